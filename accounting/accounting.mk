# accounting/: the memcg model.  Linked into the shim and into cgmctl.
ACCT_SRCS := accounting/page_counter.c accounting/hier.c accounting/group.c \
	accounting/attach.c accounting/charge.c accounting/rstat.c \
	accounting/move.c accounting/limits.c accounting/files.c
LIB_SRCS += $(ACCT_SRCS)
