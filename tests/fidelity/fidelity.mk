# tests/fidelity/: does a group charge what the kernel's memcg would?
# Large blocks touched in part, the program's own mmap, python3's arenas,
# what the allocator keeps and memory.reclaim, compared with the
# process's RssAnon and with a kernel cgroup (cgmctl compare).

FID := $(B)/tests/fidelity
FID_TESTS := resident reclaim protect
FID_CHECKS := $(addprefix check-fid-,$(FID_TESTS))

$(FID)/fid_prog: tests/fidelity/fid_prog.c
	@mkdir -p $(FID)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -pthread -o $@ $< -ldl

FID_ENV = $(REL_ENV) FID_PROG=$(abspath $(FID)/fid_prog)

$(FID_CHECKS): check-fid-%: tests/fidelity/test_%.sh tests/fidelity/lib.sh \
		tests/reliability/lib.sh tests/cgmctl/lib.sh $(FID)/fid_prog $(REL)/rel_prog \
		$(LIB) $(CGMCTL)
	$(RUN) env $(FID_ENV) sh tests/fidelity/test_$*.sh

CHECK_TARGETS += $(FID_CHECKS)
.PHONY: $(FID_CHECKS)
