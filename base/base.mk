# base/: what every module may use -- one-line diagnostics, sizes, and the
# one table of CGMALLOC_CONF keys with its parser, the descriptors the
# library keeps for itself.  Depends on nothing.
base_SRCS := base/log.c base/size.c base/config.c base/config_table.c base/config_help.c \
	base/proc_maps.c base/own_fds.c base/strbuf.c base/mul_div.c
MODULES += base
