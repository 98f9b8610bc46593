/*
 * Binding the library's lazily bound functions all at once.
 *
 * libcgmalloc.so is linked for lazy binding, with only what malloc can
 * run, the signal handlers and the fd guards calling through the GOT
 * (bound at load time; the Makefile's BIND_AT_LOAD): binding each of its
 * ~130 imports at load time cost /bin/true about 700 instructions
 * apiece, most of the start-up budget.
 *
 * With spill=1 a lazy binding is a hazard: the resolver reads the
 * loader's link maps and scope lists, and for whatever dlopen loaded
 * these are allocated with malloc, in pages that can be spilled.  So the
 * spiller calls cgm_bind_now() before its first spill, and binds each
 * slot the way the resolver would have: the same name and version looked
 * up from this library's scope (dlsym and dlvsym with RTLD_DEFAULT, whose
 * scope is the caller's).  The relocations are read from the library's
 * own dynamic section.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cgm/bind_now.h"
#include "cgm/log.h"

#if defined(__x86_64__)
#define JUMP_SLOT	R_X86_64_JUMP_SLOT
#elif defined(__aarch64__)
#define JUMP_SLOT	R_AARCH64_JUMP_SLOT
#endif

#ifdef JUMP_SLOT

/* What the dynamic section says about this library's lazy slots. */
struct own_dyn {
	uintptr_t base, start, end;	/* load bias; the mapping's bounds */
	const ElfW(Rela) *jmprel;
	size_t nr_rela;
	const ElfW(Sym) *symtab;
	const char *strtab;
	const ElfW(Half) *versym;
	const ElfW(Verneed) *verneed;
	bool now;			/* linked -z now: every slot bound already */
};

/*
 * An address the dynamic section holds.  The loader adds the load bias to
 * some entries in place (when the section is writable) and not to others,
 * so an entry that already points into the mapping is taken as it is.
 */
static const void *dyn_ptr(const struct own_dyn *o, ElfW(Addr) v)
{
	if (v >= o->start && v < o->end)
		return (const void *)v;
	return (const void *)(o->base + v);
}

static bool read_own_dyn(struct own_dyn *o)
{
	struct dl_find_object dlfo;
	const struct link_map *lm;
	ElfW(Addr) jmprel = 0, symtab = 0, strtab = 0, versym = 0, verneed = 0;
	size_t pltrelsz = 0;
	bool rela = false;

	if (_dl_find_object((void *)read_own_dyn, &dlfo) != 0 || !dlfo.dlfo_link_map)
		return false;
	lm = dlfo.dlfo_link_map;
	*o = (struct own_dyn){ .base = lm->l_addr, .start = (uintptr_t)dlfo.dlfo_map_start,
			       .end = (uintptr_t)dlfo.dlfo_map_end };
	for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_JMPREL:		jmprel = d->d_un.d_ptr; break;
		case DT_PLTRELSZ:	pltrelsz = d->d_un.d_val; break;
		case DT_PLTREL:		rela = d->d_un.d_val == DT_RELA; break;
		case DT_SYMTAB:		symtab = d->d_un.d_ptr; break;
		case DT_STRTAB:		strtab = d->d_un.d_ptr; break;
		case DT_VERSYM:		versym = d->d_un.d_ptr; break;
		case DT_VERNEED:	verneed = d->d_un.d_ptr; break;
		case DT_FLAGS:		o->now |= (d->d_un.d_val & DF_BIND_NOW) != 0; break;
		case DT_FLAGS_1:	o->now |= (d->d_un.d_val & DF_1_NOW) != 0; break;
		default:		break;
		}
	}
	if (!jmprel || !pltrelsz)
		return true;	/* no lazy slot at all */
	if (!rela || !symtab || !strtab)
		return false;
	o->jmprel = dyn_ptr(o, jmprel);
	o->nr_rela = pltrelsz / sizeof(ElfW(Rela));
	o->symtab = dyn_ptr(o, symtab);
	o->strtab = dyn_ptr(o, strtab);
	o->versym = versym ? dyn_ptr(o, versym) : NULL;
	o->verneed = verneed ? dyn_ptr(o, verneed) : NULL;
	return true;
}

/* The version symbol @sym is bound to ("GLIBC_2.2.5"), or NULL. */
static const char *sym_version(const struct own_dyn *o, size_t sym)
{
	ElfW(Half) ndx;
	const ElfW(Verneed) *vn = o->verneed;

	if (!o->versym || !vn)
		return NULL;
	ndx = o->versym[sym] & 0x7fff;
	if (ndx < 2)
		return NULL;	/* local or global: unversioned */
	for (;;) {
		const ElfW(Vernaux) *va = (const void *)((const char *)vn + vn->vn_aux);

		for (unsigned i = 0; i < vn->vn_cnt; i++) {
			if (va->vna_other == ndx)
				return o->strtab + va->vna_name;
			va = (const void *)((const char *)va + va->vna_next);
		}
		if (!vn->vn_next)
			return NULL;
		vn = (const void *)((const char *)vn + vn->vn_next);
	}
}

/*
 * Each lazy slot, resolved as the resolver would; written when it holds
 * anything else if @write, else only counted in @out->bound.
 */
static int walk_slots(bool write, struct cgm_bind_count *out)
{
	struct own_dyn o;

	*out = (struct cgm_bind_count){ 0 };
	if (!read_own_dyn(&o))
		return -1;
	for (size_t i = 0; i < o.nr_rela; i++) {
		const ElfW(Rela) *r = &o.jmprel[i];
		size_t sym = ELF64_R_SYM(r->r_info);
		const char *name, *version;
		void **slot, *addr;

		if (ELF64_R_TYPE(r->r_info) != JUMP_SLOT)
			continue;
		out->slots++;
		if (o.now)
			continue;
		name = o.strtab + o.symtab[sym].st_name;
		version = sym_version(&o, sym);
		addr = version ? dlvsym(RTLD_DEFAULT, name, version) : dlsym(RTLD_DEFAULT, name);
		if (!addr) {
			out->failed++;
			continue;
		}
		slot = (void **)(o.base + r->r_offset);
		if (__atomic_load_n(slot, __ATOMIC_RELAXED) == addr)
			continue;
		/*
		 * Another thread may be calling through the slot, or binding it:
		 * every value it can hold leads to the same function.
		 */
		if (write)
			__atomic_store_n(slot, addr, __ATOMIC_RELAXED);
		out->bound++;
	}
	return 0;
}

int cgm_bind_now(struct cgm_bind_count *out)
{
	if (walk_slots(true, out) == 0)
		return 0;
	cgm_log("cannot read libcgmalloc.so's dynamic section: its functions stay "
		"lazily bound (a first call may wait on a spilled page)");
	return -1;
}

int cgm_bind_pending(void)
{
	struct cgm_bind_count n;

	return walk_slots(false, &n) == 0 ? n.bound : -1;
}

#else /* !JUMP_SLOT */

int cgm_bind_now(struct cgm_bind_count *out)
{
	*out = (struct cgm_bind_count){ 0 };
	cgm_log("binding at once is not written for this architecture: libcgmalloc.so's "
		"functions stay lazily bound (a first call may wait on a spilled page)");
	return -1;
}

int cgm_bind_pending(void)
{
	return -1;
}

#endif /* JUMP_SLOT */
