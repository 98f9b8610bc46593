# shim/: interposition, bootstrap, configuration.
LIB_SRCS += shim/log.c shim/config.c shim/config_table.c shim/bootstrap.c \
	shim/interpose.c shim/glibc_extras.c shim/new_delete.c \
	shim/static_key.c shim/static_key_x86_64.c shim/static_key_aarch64.c \
	shim/static_key_none.c shim/static_key_sync.c

# A C++ exception thrown by a new_handler unwinds through operator new.
CFLAGS_shim_new_delete := -fexceptions

LIB_SRCS += shim/accounted.c shim/acct_setup.c shim/watcher.c shim/mi_layout.c \
	shim/exit_report.c shim/thread_start.c shim/moving.c
LIB_LIBS += -lcgroup
