# tests/spill/: spill=1 in a preloaded program (userfaultfd: skipped where
# the kernel gives this process none that serves system calls).

SPT := $(B)/tests/spill

$(SPT)/spill_prog: tests/spill/spill_prog.c
	@mkdir -p $(SPT)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -pthread -o $@ $<

$(SPT)/spill_commit: tests/spill/spill_commit.c
	@mkdir -p $(SPT)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -o $@ $<

$(SPT)/spill_threads_max $(SPT)/spill_cancel $(SPT)/spill_core $(SPT)/spill_stop $(SPT)/spill_stale $(SPT)/spill_fds: $(SPT)/%: tests/spill/%.c
	@mkdir -p $(SPT)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -pthread -o $@ $<

check-spill-lib: tests/spill/test_spill_lib.sh tests/spill/hotcold.py tests/fidelity/lib.sh tests/reliability/lib.sh \
		tests/cgmctl/lib.sh $(SPT)/spill_prog $(SPT)/spill_commit $(SPT)/spill_threads_max $(SPT)/spill_cancel $(SPT)/spill_core \
		$(SPT)/spill_stop $(SPT)/spill_stale $(SPT)/spill_fds $(FID)/fid_prog $(REL)/rel_prog $(LIB) $(CGMCTL)
	$(RUN) env $(FID_ENV) SPILL_PROG=$(abspath $(SPT)/spill_prog) \
		SPILL_COMMIT=$(abspath $(SPT)/spill_commit) \
		SPILL_THREADS_MAX=$(abspath $(SPT)/spill_threads_max) SPILL_CANCEL=$(abspath $(SPT)/spill_cancel) \
		SPILL_CORE=$(abspath $(SPT)/spill_core) SPILL_STOP=$(abspath $(SPT)/spill_stop) \
		SPILL_STALE=$(abspath $(SPT)/spill_stale) SPILL_FDS=$(abspath $(SPT)/spill_fds) \
		HOTCOLD=$(abspath tests/spill/hotcold.py) sh tests/spill/test_spill_lib.sh

CHECK_TARGETS += check-spill-lib
.PHONY: check-spill-lib

# mremap of a mapping in several VMAs, made so on purpose with a
# userfaultfd of the test's own (spilling leaves such mappings behind).
$(SPT)/spill_mremap: tests/spill/spill_mremap.c
	@mkdir -p $(SPT)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -o $@ $<

check-spill-mremap: tests/spill/test_spill_mremap.sh tests/fidelity/lib.sh tests/reliability/lib.sh \
		tests/cgmctl/lib.sh $(SPT)/spill_mremap $(FID)/fid_prog $(REL)/rel_prog $(LIB) $(CGMCTL)
	$(RUN) env $(FID_ENV) SPILL_MREMAP=$(abspath $(SPT)/spill_mremap) sh tests/spill/test_spill_mremap.sh

CHECK_TARGETS += check-spill-mremap
.PHONY: check-spill-mremap

# The kernel bug the spill engine works around (sp_check_left()),
# reproduced without the engine: how many UFFDIO_MOVE calls said fewer
# pages than they moved.  It reports on the kernel; it is not a test.
$(SPT)/uffd_move_misreport: tests/spill/uffd_move_misreport.c
	@mkdir -p $(SPT)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -pthread -o $@ $<

kernel-uffd-move: $(SPT)/uffd_move_misreport
	$(SPT)/uffd_move_misreport

.PHONY: kernel-uffd-move

# The preload tests' programs (sqlite3, python3, C++, git, a pipeline),
# perl and python3 forking workers
# under memory.high at about half their peak: same output, pages spilled.
# `make stress` runs it SPILL_PROGRAMS_ROUNDS times, with node, jq, tclsh
# and sort too where installed (SPILL_PROGRAMS_MORE), and keeps a failed
# run's directory and cores in build/spill-programs-failed.
SPILL_PROGRAMS_ROUNDS ?= 10
SPILL_PROGRAMS_DEPS := tests/spill/test_spill_programs.sh tests/spill/programs_lib.sh tests/fidelity/lib.sh tests/reliability/lib.sh \
	tests/cgmctl/lib.sh tests/preload/sqlite_workload.sql tests/preload/dict_list_workload.py \
	tests/preload/git_workload.sh tests/preload/pipeline_workload.sh tests/spill/perl_workload.pl \
	tests/spill/fork_workload.py tests/spill/node_workers.js tests/spill/tcl_workload.tcl $(PL_BIN)/cxx_workload \
	$(FID)/fid_prog $(REL)/rel_prog $(LIB) $(CGMCTL)

check-spill-programs: $(SPILL_PROGRAMS_DEPS)
	$(RUN) env $(FID_ENV) CGM_TEST_BIN=$(abspath $(PL_BIN)) sh tests/spill/test_spill_programs.sh

stress-spill-programs: $(SPILL_PROGRAMS_DEPS)
	for i in $$(seq $(SPILL_PROGRAMS_ROUNDS)); do \
		env $(FID_ENV) CGM_TEST_BIN=$(abspath $(PL_BIN)) SPILL_PROGRAMS_KEEP=$(abspath $(B))/spill-programs-failed \
			SPILL_PROGRAMS_MORE=1 \
			sh tests/spill/test_spill_programs.sh || exit 1; \
	done

# The same workloads at several shares of their peaks, with and without
# the background reclaim, and under memory.max with a backing file
# (tests/spill/sweep_programs.sh says why): SPILL_SWEEP_SHARES="40 50 70"
# and SPILL_SWEEP_MODES="default nobg maxfile" by default.
stress-spill-sweep: $(SPILL_PROGRAMS_DEPS) tests/spill/sweep_programs.sh
	env $(FID_ENV) CGM_TEST_BIN=$(abspath $(PL_BIN)) sh tests/spill/sweep_programs.sh

CHECK_TARGETS += check-spill-programs
STRESS_TARGETS += stress-spill-programs stress-spill-sweep
.PHONY: check-spill-programs stress-spill-programs stress-spill-sweep

# A model-based random test: a few threads write, read, reallocate, remap
# and discard their objects while one reclaims, and every byte is compared
# with a shadow copy (kept in shared memory, which is never spilled).  SPILL_MODEL_OPS and SPILL_MODEL_SEEDS set the run;
# `make stress` runs it longer with a fresh seed.
$(SPT)/spill_model: tests/spill/spill_model.c include/cgmalloc.h $(LIB)
	@mkdir -p $(SPT)
	$(CC) $(TEST_CFLAGS) $(TEST_DEPFLAGS) -pthread -o $@ $< $(SHIM_LINK)

SPILL_MODEL_DEPS := tests/spill/test_spill_model.sh tests/fidelity/lib.sh tests/reliability/lib.sh \
	tests/cgmctl/lib.sh $(SPT)/spill_model $(FID)/fid_prog $(REL)/rel_prog $(LIB) $(CGMCTL)
SPILL_MODEL_ENV = $(FID_ENV) SPILL_MODEL=$(abspath $(SPT)/spill_model)

check-spill-model: $(SPILL_MODEL_DEPS)
	$(RUN) env $(SPILL_MODEL_ENV) sh tests/spill/test_spill_model.sh

stress-spill-model: $(SPILL_MODEL_DEPS)
	env $(SPILL_MODEL_ENV) SPILL_MODEL_OPS=200000 SPILL_MODEL_SEEDS="$$(date +%s)" \
		sh tests/spill/test_spill_model.sh

# Three seeds take about 15 s.
CHECK_TARGETS += check-spill-model
STRESS_TARGETS += stress-spill-model
.PHONY: check-spill-model stress-spill-model
