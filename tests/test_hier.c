/*
 * The hierarchy file (accounting/hier.c) and its group tree
 * (accounting/group.c): every kind of bad file is refused with a reason
 * and no crash; paths are validated; events propagate as specified; and
 * garbage written into the indices inside an accepted file crashes or
 * hangs none of the functions that walk them.
 *
 * usage: test_hier [regressions] [seed]
 */
#include <check.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "acct_fixture.h"
#include "cgm/files.h"

static uint64_t seed0 = 1;
static struct acct_tmp tmp;

static void setup(void)
{
	ck_assert_int_eq(acct_tmp_create(&tmp), 0);
}

static void teardown(void)
{
	acct_tmp_remove(&tmp);
}

/* Create a valid hierarchy file at tmp.path and leave it closed. */
static void make_valid_file(void)
{
	struct cgm_hier h;

	acct_tmp_open(&tmp, &h);
	hier_close(&h);
}

/* Map the file at tmp.path for scribbling on it. */
static void *map_file(size_t *size)
{
	struct stat st;
	int fd = open(tmp.path, O_RDWR);
	void *p;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	ck_assert(p != MAP_FAILED);
	*size = (size_t)st.st_size;
	return p;
}

/* hier_open must refuse, say why (naming the file) in one line, and leave no mapping. */
static void expect_refused(const char *what, const char *reason_part, int want_err)
{
	struct cgm_hier h;
	char why[512] = "";
	int err = hier_open(&h, tmp.path, false, why, sizeof(why));

	ck_assert_msg(err < 0, "%s: accepted", what);
	if (want_err)
		ck_assert_msg(err == want_err, "%s: error %d, expected %d (%s)", what, err, want_err, why);
	ck_assert_msg(h.hdr == NULL, "%s: refused but mapped", what);
	ck_assert_msg(why[0] && !strchr(why, '\n'), "%s: no one-line reason: '%s'", what, why);
	ck_assert_msg(strstr(why, reason_part), "%s: reason '%s' does not say '%s'", what, why,
		      reason_part);
}

START_TEST(test_create_and_reopen)
{
	struct cgm_hier a, b;
	struct stat st;
	char why[256];
	int64_t g;

	acct_tmp_open(&tmp, &a);
	ck_assert_int_eq(stat(tmp.path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	ck_assert_ptr_nonnull(hier_group(&a, CGM_ROOT));
	g = group_mkdir(&a, "/x/y");
	ck_assert_int_gt(g, 0);
	/* A second mapping (another process, in effect) sees the same tree. */
	ck_assert_int_eq(hier_open(&b, tmp.path, true, why, sizeof(why)), 0);
	ck_assert_int_eq(group_lookup(&b, "/x/y"), g);
	ck_assert_int_eq(hier_group(&b, (uint32_t)g)->depth, 2);
	hier_close(&b);
	hier_close(&a);
	/* Nothing was left behind by the temp+link creation. */
	{
		char side[sizeof(tmp.path) + 32];

		snprintf(side, sizeof(side), "%s.new.%d", tmp.path, (int)getpid());
		ck_assert_int_ne(access(side, F_OK), 0);
	}
}
END_TEST

START_TEST(test_bad_magic)
{
	size_t size;
	struct cgm_hier_header *hd;

	make_valid_file();
	hd = map_file(&size);
	hd->magic ^= 0xff;
	munmap(hd, size);
	expect_refused("bad magic", "bad magic", -EINVAL);
}
END_TEST

START_TEST(test_wrong_version)
{
	size_t size;
	struct cgm_hier_header *hd;

	make_valid_file();
	hd = map_file(&size);
	hd->version = CGM_HIER_VERSION + 1;
	hd->checksum = hier_header_checksum(hd);
	munmap(hd, size);
	expect_refused("wrong version", "version", -EPROTO);
}
END_TEST

/* hier_open(create) on the file, which must come back fresh (replaced) or refused. */
static void expect_replaced(const char *what, bool replaced)
{
	struct cgm_hier h;
	char why[512] = "";
	int err = hier_open(&h, tmp.path, true, why, sizeof(why));

	if (replaced) {
		ck_assert_msg(err == 0, "%s: not replaced: %s", what, why);
		ck_assert_uint_eq(h.hdr->version, CGM_HIER_VERSION);
		ck_assert_uint_eq(h.hdr->header_size, sizeof(struct cgm_hier_header));
		hier_close(&h);
	} else {
		ck_assert_msg(err < 0, "%s: replaced or accepted", what);
	}
}

/*
 * Another build's file (another version, another header size, or a
 * self-consistent header of other sizes) is replaced when nobody has it
 * mapped, refused while somebody does; a corrupt one is never replaced.
 */
START_TEST(test_other_build_replaced_when_unused)
{
	size_t size;
	struct cgm_hier_header *hd;

	make_valid_file();
	hd = map_file(&size);
	hd->version = CGM_HIER_VERSION + 1;
	/* Mapped here: in use. */
	expect_replaced("another version, in use", false);
	munmap(hd, size);
	expect_replaced("another version", true);

	hd = map_file(&size);
	hd->header_size += 64;
	munmap(hd, size);
	expect_replaced("another header size", true);

	hd = map_file(&size);
	hd->max_groups /= 2;
	hd->checksum = hier_header_checksum(hd);
	munmap(hd, size);
	expect_replaced("other geometry, consistent header", true);

	hd = map_file(&size);
	hd->max_groups /= 2;
	munmap(hd, size);
	expect_replaced("corrupt (stale checksum)", false);
}
END_TEST

/*
 * A file of this build's layout cut short or grown (a consistent header,
 * the wrong size) holds the user's groups: refused, never replaced, even
 * when nobody has it mapped.
 */
START_TEST(test_resized_not_replaced)
{
	struct stat st;
	off_t sizes[3];

	make_valid_file();
	ck_assert_int_eq(stat(tmp.path, &st), 0);
	sizes[0] = st.st_size + 4096;
	sizes[1] = st.st_size - 64;
	sizes[2] = 20000000;
	for (int i = 0; i < 3; i++) {
		struct stat now;

		ck_assert_int_eq(truncate(tmp.path, sizes[i]), 0);
		expect_replaced("our layout, resized", false);
		ck_assert_int_eq(stat(tmp.path, &now), 0);
		ck_assert_msg(now.st_ino == st.st_ino && now.st_size == sizes[i],
			      "the resized file (%lld bytes) was replaced or changed",
			      (long long)sizes[i]);
	}
}
END_TEST

START_TEST(test_truncated)
{
	size_t sizes[] = { 0, 100, sizeof(struct cgm_hier_header) - 1,
			   sizeof(struct cgm_hier_header), 1 << 20 };

	make_valid_file();
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		ck_assert_int_eq(truncate(tmp.path, (off_t)sizes[i]), 0);
		/* A header cut short no longer even has its magic. */
		expect_refused("truncated", sizes[i] >= sizeof(struct cgm_hier_header) ?
			       "truncated or resized" : "truncated", -EINVAL);
		acct_tmp_remove(&tmp);
		setup();
		make_valid_file();
	}
}
END_TEST

START_TEST(test_resized)
{
	struct stat st;

	make_valid_file();
	ck_assert_int_eq(stat(tmp.path, &st), 0);
	ck_assert_int_eq(truncate(tmp.path, st.st_size + 4096), 0);
	expect_refused("grown by a page", "resized", -EINVAL);
	ck_assert_int_eq(truncate(tmp.path, st.st_size - 64), 0);
	expect_refused("shrunk by 64 bytes", "resized", -EINVAL);
}
END_TEST

START_TEST(test_corrupt_header)
{
	size_t size;
	struct cgm_hier_header *hd;

	make_valid_file();
	hd = map_file(&size);
	hd->checksum ^= 1;
	expect_refused("checksum", "corrupt header", -EINVAL);
	hd->checksum ^= 1;
	/* A geometry field changed, checksum stale. */
	hd->max_groups--;
	expect_refused("geometry, stale checksum", "corrupt header", -EINVAL);
	/* A geometry field changed and the checksum made to match: the fields are checked too. */
	hd->checksum = hier_header_checksum(hd);
	expect_refused("geometry, matching checksum", "corrupt header", -EINVAL);
	hd->max_groups++;
	hd->threads_off += 64;
	hd->checksum = hier_header_checksum(hd);
	expect_refused("offsets, matching checksum", "corrupt header", -EINVAL);
	hd->threads_off -= 64;
	hd->file_size += 4096;
	hd->checksum = hier_header_checksum(hd);
	expect_refused("file_size", "resized", -EINVAL);
	hd->file_size -= 4096;
	hd->checksum = hier_header_checksum(hd);
	munmap(hd, size);
	/* Put back, it opens again: the refusals were about the scribbles. */
	{
		struct cgm_hier h;
		char why[256];

		ck_assert_int_eq(hier_open(&h, tmp.path, false, why, sizeof(why)), 0);
		hier_close(&h);
	}
}
END_TEST

START_TEST(test_foreign_owner)
{
	if (getuid() != 0) {
		fprintf(stderr, "test_foreign_owner: skipped (chown needs root)\n");
		return;
	}
	make_valid_file();
	ck_assert_int_eq(chown(tmp.path, 65534, 65534), 0);
	expect_refused("owned by uid 65534", "belongs to uid 65534", -EPERM);
	/* Not even create=true takes it over. */
	{
		struct cgm_hier h;
		char why[256] = "";

		ck_assert_int_eq(hier_open(&h, tmp.path, true, why, sizeof(why)), -EPERM);
	}
}
END_TEST

/*
 * The default hierarchy's directory, base/cgmalloc-<uid>: made private if
 * missing; anything else found under that name (another user's directory,
 * one that others may enter, a symlink, a file) is refused, so no other
 * user can put a hierarchy of theirs where this user's programs look.
 */
START_TEST(test_user_dir)
{
	char dir[256], why[512] = "", expect[320], link_target[320];

	ck_assert_int_eq(hier_user_dir(tmp.dir, dir, sizeof(dir), why, sizeof(why)), 0);
	snprintf(expect, sizeof(expect), "%s/cgmalloc-%u", tmp.dir, (unsigned)getuid());
	ck_assert_str_eq(dir, expect);
	{
		struct stat st;

		ck_assert_int_eq(lstat(dir, &st), 0);
		ck_assert(S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
	}
	/* Found again: fine. */
	ck_assert_int_eq(hier_user_dir(tmp.dir, dir, sizeof(dir), why, sizeof(why)), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	ck_assert_int_eq(hier_user_dir(tmp.dir, dir, sizeof(dir), why, sizeof(why)), -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "not a private directory"));
	ck_assert_int_eq(rmdir(dir), 0);
	snprintf(link_target, sizeof(link_target), "%s/elsewhere", tmp.dir);
	ck_assert_int_eq(mkdir(link_target, 0700), 0);
	ck_assert_int_eq(symlink(link_target, dir), 0);
	ck_assert_int_eq(hier_user_dir(tmp.dir, dir, sizeof(dir), why, sizeof(why)), -EPERM);
	ck_assert_ptr_nonnull(strstr(why, "a symlink"));
	ck_assert_int_eq(unlink(dir), 0);
	if (getuid() == 0) {
		ck_assert_int_eq(mkdir(dir, 0700), 0);
		ck_assert_int_eq(chown(dir, 65534, 65534), 0);
		ck_assert_int_eq(hier_user_dir(tmp.dir, dir, sizeof(dir), why, sizeof(why)), -EPERM);
		ck_assert_ptr_nonnull(strstr(why, "owned by uid 65534"));
		ck_assert_int_eq(rmdir(dir), 0);
	}
	rmdir(link_target);
}
END_TEST

START_TEST(test_not_regular)
{
	char target[sizeof(tmp.path) + 8];

	ck_assert_int_eq(mkfifo(tmp.path, 0600), 0);
	expect_refused("a FIFO", "not a regular file", -EINVAL);
	unlink(tmp.path);
	ck_assert_int_eq(mkdir(tmp.path, 0700), 0);
	expect_refused("a directory", "cannot open", 0);
	rmdir(tmp.path);
	/* A symlink, even to a valid hierarchy, is not followed. */
	snprintf(target, sizeof(target), "%s.real", tmp.path);
	make_valid_file();
	ck_assert_int_eq(rename(tmp.path, target), 0);
	ck_assert_int_eq(symlink(target, tmp.path), 0);
	expect_refused("a symlink", "a symbolic link, which is not followed", -ELOOP);
	/* /dev/null: a character device. */
	{
		struct cgm_hier h;
		char why[256] = "";

		ck_assert_int_lt(hier_open(&h, "/dev/null", false, why, sizeof(why)), 0);
		ck_assert_ptr_null(h.hdr);
		ck_assert(why[0]);
	}
}
END_TEST

START_TEST(test_missing_and_long_path)
{
	struct cgm_hier h;
	char why[256] = "", longp[CGM_PATH_MAX + 10];

	expect_refused("missing, create=false", "cannot open", -ENOENT);
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	ck_assert_int_eq(hier_open(&h, longp, true, why, sizeof(why)), -ENAMETOOLONG);
	ck_assert(why[0]);
	/* create=true in a directory that does not exist. */
	ck_assert_int_lt(hier_open(&h, "/nonexistent-dir-cgm/h", true, why, sizeof(why)), 0);
	ck_assert(why[0]);
}
END_TEST

/* ---- groups ---- */

START_TEST(test_group_paths)
{
	static const char *const bad[] = {
		"", "a", "//", "/a/", "/a//b", "/.", "/..", "/a/./b", "/a/../b", "/a b",
		"/a\n", "/a\\b", "/\xc3\xa9", NULL,
	};
	static const char *const good[] = { "/", "/a", "/a.b", "/..a", "/a-b_c@d:e+f", NULL };
	struct cgm_hier h;
	char path[CGM_PATH_MAX], deep[CGM_PATH_MAX + 200] = "", longname[80];
	int64_t a, ab, c;

	acct_tmp_open(&tmp, &h);
	for (int i = 0; bad[i]; i++) {
		ck_assert_msg(group_path_valid(bad[i]) < 0, "'%s' accepted", bad[i]);
		ck_assert_msg(group_mkdir(&h, bad[i]) == -EINVAL, "mkdir '%s'", bad[i]);
		ck_assert_msg(group_lookup(&h, bad[i]) == CGM_NONE, "lookup '%s'", bad[i]);
	}
	for (int i = 0; good[i]; i++)
		ck_assert_msg(group_path_valid(good[i]) == 0, "'%s' refused", good[i]);
	/* A component of 63 characters fits, 64 does not. */
	memset(longname + 1, 'n', 64);
	longname[0] = '/';
	longname[64] = '\0';
	ck_assert_int_eq(group_path_valid(longname), 0);
	longname[64] = 'n';
	longname[65] = '\0';
	ck_assert_int_lt(group_path_valid(longname), 0);
	/* 64 levels fit, 65 do not. */
	for (int i = 0; i < 65; i++) {
		strcat(deep, "/d");
		ck_assert_int_eq(group_path_valid(deep) == 0, i < 64);
	}

	a = group_mkdir(&h, "/a");
	ab = group_mkdir(&h, "/a/b");
	c = group_mkdir(&h, "/c/d/e");		/* parents created on demand */
	ck_assert(a > 0 && ab > 0 && c > 0);
	ck_assert_int_eq(group_mkdir(&h, "/a/b"), ab);	/* exists: same group */
	ck_assert_int_eq(group_lookup(&h, "/a/b"), ab);
	ck_assert_int_eq(group_lookup(&h, "/"), CGM_ROOT);
	ck_assert_int_eq(group_lookup(&h, "/a/x"), CGM_NONE);
	ck_assert_int_eq(group_path(&h, (uint32_t)c, path, sizeof(path)), 0);
	ck_assert_str_eq(path, "/c/d/e");
	ck_assert_int_eq(group_path(&h, CGM_ROOT, path, sizeof(path)), 0);
	ck_assert_str_eq(path, "/");
	ck_assert_int_eq(group_path(&h, (uint32_t)c, path, 4), -ENAMETOOLONG);
	ck_assert_int_eq(group_path(&h, CGM_MAX_GROUPS + 5, path, sizeof(path)), -EINVAL);

	ck_assert_int_eq(group_rmdir(&h, "/a"), -EBUSY);	/* has a child */
	ck_assert_int_eq(group_rmdir(&h, "/"), -EBUSY);
	ck_assert_int_eq(group_rmdir(&h, "/nope"), -ENOENT);
	page_counter_charge(&hier_group(&h, (uint32_t)ab)->memory, 1);
	ck_assert_int_eq(group_rmdir(&h, "/a/b"), -EBUSY);	/* holds a page */
	page_counter_uncharge(&hier_group(&h, (uint32_t)ab)->memory, 1);
	ck_assert_int_eq(group_rmdir(&h, "/a/b"), 0);
	ck_assert_int_eq(group_lookup(&h, "/a/b"), CGM_NONE);
	ck_assert_int_eq(hier_group(&h, (uint32_t)a)->nr_children, 0);
	ck_assert_int_eq(group_rmdir(&h, "/a"), 0);
	/* The slot is reused, clean. */
	ck_assert_int_gt(group_mkdir(&h, "/z"), 0);
	ck_assert_int_eq(page_counter_read(&hier_group(&h, (uint32_t)group_lookup(&h, "/z"))->memory), 0);
	hier_close(&h);
}
END_TEST

/* Is group @i's bit set in the header's map of group slots in use? */
static bool group_bit(const struct cgm_hier *h, uint32_t i)
{
	return (h->hdr->group_map[i / 64] >> (i % 64)) & 1;
}

/*
 * A new group takes the first free slot that group_map shows, and the map
 * follows mkdir and rmdir; a map that disagrees with the slots' states
 * (a process killed between the two writes) costs no group and no slot.
 */
START_TEST(test_group_map)
{
	struct cgm_hier h;
	int64_t g[4];
	char name[16];

	acct_tmp_open(&tmp, &h);
	ck_assert(group_bit(&h, CGM_ROOT));
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "/g%d", i);
		g[i] = group_mkdir(&h, name);
		ck_assert_int_eq(g[i], i + 1);
		ck_assert(group_bit(&h, (uint32_t)g[i]));
	}
	ck_assert_int_eq(group_rmdir(&h, "/g1"), 0);
	ck_assert(!group_bit(&h, (uint32_t)g[1]));
	ck_assert(group_bit(&h, (uint32_t)g[2]));
	/* The lowest free slot again. */
	ck_assert_int_eq(group_mkdir(&h, "/again"), g[1]);
	ck_assert(group_bit(&h, (uint32_t)g[1]));

	/* A bit cleared under a live group: that group is kept, the bit mended. */
	hier_map_clear(h.hdr->group_map, (uint32_t)g[2]);
	ck_assert_int_eq(group_mkdir(&h, "/past"), 5);
	ck_assert(group_bit(&h, (uint32_t)g[2]));
	ck_assert_int_eq(group_lookup(&h, "/g2"), g[2]);

	/* A map that says every slot is taken: the free state of a slot still counts. */
	ck_assert_int_eq(group_rmdir(&h, "/g3"), 0);
	memset(h.hdr->group_map, 0xff, sizeof(h.hdr->group_map));
	ck_assert_int_eq(group_mkdir(&h, "/full"), g[3]);
	ck_assert_int_eq(group_lookup(&h, "/full"), g[3]);
	hier_close(&h);
}
END_TEST

/*
 * A child among many is found by its key (struct cgm_group_key), a
 * missing one is known missing from the keys alone, and keys out of step
 * with the tree fall back to the sibling walk: a group is never made twice.
 */
START_TEST(test_group_keys)
{
	struct cgm_hier h;
	int64_t parent, kids[40];
	char name[32];

	acct_tmp_open(&tmp, &h);
	parent = group_mkdir(&h, "/many");
	ck_assert_int_gt(parent, 0);
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "/many/k%d", i);
		kids[i] = group_mkdir(&h, name);
		ck_assert_int_gt(kids[i], 0);
		ck_assert_uint_eq(h.keys[kids[i]].parent, (uint32_t)parent);
	}
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "/many/k%d", i);
		ck_assert_int_eq(group_lookup(&h, name), kids[i]);
	}
	ck_assert_int_eq(group_lookup(&h, "/many/absent"), CGM_NONE);
	ck_assert_int_eq(group_lookup(&h, "/many/k40"), CGM_NONE);

	/* A key lost: the count no longer matches, and the walk finds the group. */
	h.keys[kids[7]].parent = CGM_NONE;
	ck_assert_int_eq(group_lookup(&h, "/many/k7"), kids[7]);
	ck_assert_int_eq(group_mkdir(&h, "/many/k7"), kids[7]);
	ck_assert_uint_eq(h.groups[parent].nr_children, 40);
	h.keys[kids[7]].parent = (uint32_t)parent;

	/* A hash that collides is checked against the name. */
	h.keys[kids[9]].name_hash = h.keys[kids[8]].name_hash;
	ck_assert_int_eq(group_lookup(&h, "/many/k8"), kids[8]);

	/* A removed group's key goes with it: the name is free again. */
	ck_assert_int_eq(group_rmdir(&h, "/many/k3"), 0);
	ck_assert_uint_eq(h.keys[kids[3]].parent, CGM_NONE);
	ck_assert_int_eq(group_lookup(&h, "/many/k3"), CGM_NONE);
	ck_assert_int_eq(group_mkdir(&h, "/many/k3"), kids[3]);
	ck_assert_uint_eq(h.groups[parent].nr_children, 40);
	hier_close(&h);
}
END_TEST

START_TEST(test_event_propagation)
{
	struct cgm_hier h;
	uint64_t rng = seed0 + 3;
	static int64_t local[CGM_MAX_GROUPS][CGM_NR_EVENTS], hier[CGM_MAX_GROUPS][CGM_NR_EVENTS];
	uint32_t idx[40];
	int bad = 0;

	acct_tmp_open(&tmp, &h);
	ck_assert_int_eq(acct_random_tree(&h, &rng, 40, idx), 0);
	for (int op = 0; op < 5000; op++) {
		/* The root now and then: local only. */
		uint32_t g = acct_rand_below(&rng, 10) ? idx[acct_rand_below(&rng, 40)] : CGM_ROOT;
		int ev = (int)acct_rand_below(&rng, CGM_NR_EVENTS);

		group_event(&h, g, (enum cgm_event)ev);
		local[g][ev]++;
		for (uint32_t x = g; x != CGM_ROOT; x = h.groups[x].parent)
			hier[x][ev]++;
	}
	/* Out of range: nothing happens, nothing crashes. */
	group_event(&h, CGM_MAX_GROUPS, CGM_EV_MAX);
	group_event(&h, CGM_NONE, CGM_EV_MAX);
	for (uint32_t g = 0; g < CGM_MAX_GROUPS; g++)
		for (int ev = 0; ev < CGM_NR_EVENTS; ev++)
			bad += h.groups[g].events_local[ev] != local[g][ev] ||
			       h.groups[g].events[ev] != hier[g][ev];
	ck_assert_msg(bad == 0, "%d event counters differ from the model", bad);
	ck_assert_int_eq(h.groups[CGM_ROOT].events[CGM_EV_MAX], 0);
	ck_assert_int_gt(h.groups[CGM_ROOT].events_local[CGM_EV_MAX], 0);
	/* And the files say the same. */
	{
		char buf[512];

		ck_assert_int_gt(cgm_file_read(&h, idx[5], "memory.events.local", buf, sizeof(buf)), 0);
		ck_assert_int_eq(acct_file_value(buf, "oom_kill"), local[idx[5]][CGM_EV_OOM_KILL]);
		ck_assert_int_gt(cgm_file_read(&h, idx[0], "memory.events", buf, sizeof(buf)), 0);
		ck_assert_int_eq(acct_file_value(buf, "high"), hier[idx[0]][CGM_EV_HIGH]);
	}
	hier_close(&h);
}
END_TEST

/* ---- garbage inside an accepted file ---- */

static uint32_t garbage_index(uint64_t *rng, uint32_t in_range, uint32_t self)
{
	switch (acct_rand_below(rng, 6)) {
	case 0: return CGM_NONE;
	case 1: return CGM_NONE - 1;
	case 2: return in_range + (uint32_t)acct_rand_below(rng, 1u << 20);
	case 3: return self;				/* a cycle of one */
	default: return (uint32_t)acct_rand_below(rng, in_range);	/* valid, but wrong */
	}
}

/* Everything that walks the tree, the process list or the thread lists. */
static void walk_everything(struct cgm_hier *h, const uint32_t *idx, int n, uint64_t *rng)
{
	static const char *const lookups[] = { "/", "/g0", "/g0/g1", "/g3/x", "/new/deep/path", NULL };
	char buf[4096], why[256];

	for (int i = 0; lookups[i]; i++)
		(void)group_lookup(h, lookups[i]);
	for (int i = 0; i < n; i++) {
		(void)group_path(h, idx[i], buf, sizeof(buf));
		(void)group_limited(h, idx[i]);
		group_event(h, idx[i], (enum cgm_event)acct_rand_below(rng, CGM_NR_EVENTS));
	}
	(void)group_mkdir(h, "/g0/fresh");
	(void)group_rmdir(h, "/g0/fresh");
	rstat_flush(h);
	for (uint32_t p = 0; p < 4; p++)
		acct_harvest(h, p);
	acct_harvest_subtree(h, CGM_ROOT);
	acct_harvest_subtree(h, idx[acct_rand_below(rng, (uint64_t)n)]);
	for (size_t f = 0; f < cgm_nfiles; f++)
		(void)cgm_file_read(h, idx[acct_rand_below(rng, (uint64_t)n)], cgm_files[f].name,
				    buf, sizeof(buf));
	(void)cgm_file_write(h, CGM_NONE, idx[0], "memory.high", "max", why, sizeof(why));
	(void)acct_reclaim_dead(h);
}

/*
 * Fill a hierarchy with groups, a process of ours with threads, and a
 * dead process, then write garbage into the index fields and call every
 * walker after each scribble.  Check's timeout catches a loop.
 */
/* @arg non-NULL: scribble on counts (held pages, free pool) instead of indices. */
static void scribble_and_walk(void *arg)
{
	struct cgm_hier h;
	struct cgm_acct a = { .proc = CGM_NONE, .batch_pages = CGM_CHARGE_BATCH };
	uint64_t rng = seed0 + 5;
	uint32_t idx[24], slots[4];
	int64_t size;

	acct_tmp_open(&tmp, &a.h);
	h = a.h;
	if (acct_random_tree(&h, &rng, 24, idx) < 0 || acct_attach(&a, "/g0") < 0)
		_exit(2);
	for (int i = 0; i < 4; i++) {
		slots[i] = acct_thread_register(&a, (int)syscall(SYS_gettid));
		if (slots[i] == CGM_NONE)
			_exit(3);
		size = sim_malloc(&a, &h.threads[slots[i]], 5000, false);
		sim_free(&h.threads[slots[i]], size);
	}
	/* A second process slot, as a process that died would leave it. */
	h.procs[a.proc + 1] = h.procs[a.proc];
	h.procs[a.proc + 1].pid = 999999;
	h.procs[a.proc + 1].first_thread = CGM_NONE;

	for (int round = 0; round < 400; round++) {
		uint32_t g = idx[acct_rand_below(&rng, 24)];
		struct cgm_group *gr = &h.groups[g];
		struct cgm_proc *p = &h.procs[a.proc + acct_rand_below(&rng, 2)];
		struct cgm_thread_slot *t = &h.threads[slots[acct_rand_below(&rng, 4)]];

		switch (arg ? 8 : acct_rand_below(&rng, 10)) {
		case 0: gr->parent = garbage_index(&rng, CGM_MAX_GROUPS, g); break;
		case 1: gr->first_child = garbage_index(&rng, CGM_MAX_GROUPS, g); break;
		case 2: gr->next_sibling = garbage_index(&rng, CGM_MAX_GROUPS, g); break;
		case 3: memset(gr->name, 'x', sizeof(gr->name)); break;	/* no NUL */
		case 4: t->proc = garbage_index(&rng, CGM_MAX_PROCS, t->proc); break;
		case 5: t->next = garbage_index(&rng, CGM_MAX_THREADS, (uint32_t)(t - h.threads)); break;
		case 6: p->group = garbage_index(&rng, CGM_MAX_GROUPS, p->group); break;
		case 7: p->first_thread = garbage_index(&rng, CGM_MAX_THREADS, p->first_thread); break;
		case 8:
			if (!arg)
				break;
			/* Counts, not indices: any value must still be arithmetic-safe. */
			p->held_pages = (int64_t)acct_rand(&rng) >> acct_rand_below(&rng, 64);
			p->free_pool = (int64_t)acct_rand(&rng) >> acct_rand_below(&rng, 64);
			break;
		default:
			/* A cycle through two groups. */
			gr->parent = idx[acct_rand_below(&rng, 24)];
			h.groups[gr->parent].parent = g;
			break;
		}
		walk_everything(&h, idx, 24, &rng);
	}
	hier_close(&h);
}

/*
 * Fill a hierarchy with groups, a process of ours with threads, and a
 * dead process, then write garbage into the index fields and call every
 * walker after each scribble.
 */
START_TEST(test_corrupt_indices)
{
	char msg[128];

	ck_assert_msg(acct_run_guarded(scribble_and_walk, NULL, 20000, msg, sizeof(msg)) == 0,
		      "garbage indices (seed %" PRIu64 "): %s", seed0, msg);
}
END_TEST

/*
 * Garbage in the counts of a process slot: harvesting must not overflow
 * (signed overflow is undefined; the ASan+UBSan build stops on it).
 */
START_TEST(test_corrupt_counts)
{
	char msg[128];

	ck_assert_msg(acct_run_guarded(scribble_and_walk, &msg, 20000, msg, sizeof(msg)) == 0,
		      "garbage counts (seed %" PRIu64 "): %s", seed0, msg);
}
END_TEST

/*
 * Every process slot's lock word names an owner thread that does not
 * exist (a scribbled file): a robust mutex waits for that owner for ever.
 * The attach must still come through -- the free slot it claims has its
 * lock made afresh after a second -- and say so in one line.
 */
static void attach_past_scribbled_locks(void *arg)
{
	struct cgm_acct a = { .proc = CGM_NONE, .batch_pages = CGM_CHARGE_BATCH };

	(void)arg;
	acct_tmp_open(&tmp, &a.h);
	for (uint32_t i = 0; i < CGM_MAX_PROCS; i++) {
		/* Slots used before (their locks made): a first claim would make it afresh anyway. */
		a.h.procs[i].lock_ready = CGM_LOCK_READY;
		a.h.procs[i].lock.__data.__lock = 0x3ffffff0;
		a.h.procs[i].lock.__data.__owner = 0x3ffffff0;
	}
	if (acct_attach(&a, "/g0") < 0)
		_exit(2);
	_exit(0);
}

START_TEST(test_attach_past_scribbled_locks)
{
	char msg[128];

	ck_assert_msg(acct_run_guarded(attach_past_scribbled_locks, NULL, 5000, msg, sizeof(msg)) == 0,
		      "attach with scribbled slot locks: %s", msg);
}
END_TEST

/*
 * A group's page counter names its parent by a byte offset in the file
 * (page_counter.h: "accounting/hier.c checks it on open").  A scribbled
 * offset must be refused on open or ignored -- not followed out of the
 * mapping or round a cycle.
 */
static void use_scribbled_counters(void *arg)
{
	struct cgm_hier h;
	char why[256];
	uint32_t g = (uint32_t)(uintptr_t)arg;

	if (hier_open(&h, tmp.path, false, why, sizeof(why)) < 0)
		return;		/* refused on open: fine */
	/* memory.min propagates protected usage up the counters; a charge walks them. */
	(void)cgm_file_write(&h, CGM_NONE, g, "memory.min", "1M", why, sizeof(why));
	page_counter_charge(&h.groups[g].memory, 1);
	hier_close(&h);
}

START_TEST(test_corrupt_parent_offset)
{
	struct cgm_hier h;
	char msg[128];
	int64_t a, b;

	acct_tmp_open(&tmp, &h);
	a = group_mkdir(&h, "/a");
	b = group_mkdir(&h, "/a/b");
	ck_assert(a > 0 && b > 0);
	/* /a's counter points at /a/b's, /a/b's at /a's: a cycle. */
	h.groups[a].memory.parent_off = (char *)&h.groups[b].memory - (char *)&h.groups[a].memory;
	hier_close(&h);
	ck_assert_msg(acct_run_guarded(use_scribbled_counters, (void *)(uintptr_t)b, 3000,
				       msg, sizeof(msg)) == 0,
		      "parent_off cycle between /a and /a/b: %s", msg);

	acct_tmp_open(&tmp, &h);
	/* Far outside the mapping. */
	h.groups[a].memory.parent_off = (int64_t)1 << 40;
	hier_close(&h);
	ck_assert_msg(acct_run_guarded(use_scribbled_counters, (void *)(uintptr_t)a, 3000,
				       msg, sizeof(msg)) == 0,
		      "parent_off 2^40: %s", msg);
}
END_TEST

static void add_tests(TCase *tc, bool regressions)
{
	if (regressions) {
		tcase_add_test(tc, test_corrupt_counts);
		return;
	}
	tcase_add_test(tc, test_corrupt_parent_offset);
	tcase_add_test(tc, test_create_and_reopen);
	tcase_add_test(tc, test_bad_magic);
	tcase_add_test(tc, test_wrong_version);
	tcase_add_test(tc, test_other_build_replaced_when_unused);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_resized);
	tcase_add_test(tc, test_resized_not_replaced);
	tcase_add_test(tc, test_attach_past_scribbled_locks);
	tcase_add_test(tc, test_corrupt_header);
	tcase_add_test(tc, test_foreign_owner);
	tcase_add_test(tc, test_user_dir);
	tcase_add_test(tc, test_not_regular);
	tcase_add_test(tc, test_missing_and_long_path);
	tcase_add_test(tc, test_group_paths);
	tcase_add_test(tc, test_group_map);
	tcase_add_test(tc, test_group_keys);
	tcase_add_test(tc, test_event_propagation);
	tcase_add_test(tc, test_corrupt_indices);
}

int main(int argc, char **argv)
{
	return acct_suite_main(argc, argv, "hier", &seed0, setup, teardown, add_tests);
}
