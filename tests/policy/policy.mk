# tests/policy/: the example policies (examples/) run on the hierarchy
# mounted with cgmctl mount, against preloaded workloads.

check-policy-examples: tests/policy/test_examples.sh tests/spill/hotcold.py examples/senpai.py examples/oomd.py \
		tests/fidelity/lib.sh tests/reliability/lib.sh tests/cgmctl/lib.sh \
		$(FID)/fid_prog $(REL)/rel_prog $(LIB) $(CGMCTL)
	$(RUN) env $(FID_ENV) EXAMPLES=$(abspath examples) \
		HOTCOLD=$(abspath tests/spill/hotcold.py) sh tests/policy/test_examples.sh

CHECK_TARGETS += check-policy-examples
.PHONY: check-policy-examples
