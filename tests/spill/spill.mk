# tests/spill/: spill=1 in a preloaded program (userfaultfd: skipped where
# the kernel gives this process none that serves system calls).

SPT := $(B)/tests/spill

$(SPT)/spill_prog: tests/spill/spill_prog.c
	@mkdir -p $(SPT)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -pthread -o $@ $<

check-spill-lib: tests/spill/test_spill_lib.sh tests/spill/hotcold.py tests/fidelity/lib.sh tests/reliability/lib.sh \
		tests/cgmctl/lib.sh $(SPT)/spill_prog $(FID)/fid_prog $(REL)/rel_prog $(LIB) $(CGMCTL)
	$(RUN) env $(FID_ENV) SPILL_PROG=$(abspath $(SPT)/spill_prog) \
		HOTCOLD=$(abspath tests/spill/hotcold.py) sh tests/spill/test_spill_lib.sh

CHECK_TARGETS += check-spill-lib
.PHONY: check-spill-lib

