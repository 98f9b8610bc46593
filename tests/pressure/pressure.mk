# tests/pressure/: memory.pressure of preloaded programs, its triggers
# through cgmctl and the C API.

PST := $(B)/tests/pressure

$(PST)/psi_prog: tests/pressure/psi_prog.c include/cgmalloc.h $(LIB)
	@mkdir -p $(PST)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -o $@ $< $(SHIM_LINK)

check-pressure: tests/pressure/test_pressure.sh tests/fidelity/lib.sh tests/reliability/lib.sh \
		tests/cgmctl/lib.sh $(PST)/psi_prog $(FID)/fid_prog $(REL)/rel_prog $(LIB) $(CGMCTL)
	$(RUN) env $(FID_ENV) PSI_PROG=$(abspath $(PST)/psi_prog) sh tests/pressure/test_pressure.sh

CHECK_TARGETS += check-pressure
.PHONY: check-pressure
