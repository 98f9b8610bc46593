# accounting/: the memcg model.  Uses only the base; linked into the shim,
# cgmctl, the tests, the fuzzers and the benches as libcgmacct.a.
acct_SRCS := accounting/page_counter.c accounting/hier.c accounting/group.c \
	accounting/attach.c accounting/stock.c accounting/harvest.c \
	accounting/charge.c accounting/oom.c accounting/rstat.c \
	accounting/move.c accounting/limits.c accounting/files.c accounting/sample.c \
	accounting/group_reclaim.c accounting/protect.c accounting/psi.c accounting/psi_trigger.c \
	accounting/vmpressure.c
MODULES += acct
