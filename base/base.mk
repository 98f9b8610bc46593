# base/: what every module may use -- one-line diagnostics, sizes, and the
# one table of CGMALLOC_CONF keys with its parser.  Depends on nothing.
base_SRCS := base/log.c base/size.c base/config.c base/config_table.c base/proc_maps.c
MODULES += base
