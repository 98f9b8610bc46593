# shim/: interposition, bootstrap, static keys, the accounted paths.  The
# library is these objects and the archives of the modules below.
LIB_SRCS += shim/bootstrap.c shim/interpose.c shim/glibc_extras.c shim/new_delete.c \
	shim/static_key.c shim/static_key_x86_64.c shim/static_key_aarch64.c \
	shim/static_key_none.c shim/static_key_sync.c \
	shim/accounted.c shim/acct_setup.c shim/epoch.c shim/mi_layout.c \
	shim/exit_report.c shim/thread_start.c shim/thread_run.c shim/moving.c shim/api.c \
	shim/regions.c shim/remap_pieces.c shim/resident.c shim/self_proc.c shim/mi_purge.c shim/large_park.c shim/spiller.c shim/bg_reclaim.c shim/pressure_api.c shim/numa.c \
	shim/lazy_libs.c shim/fd_guard.c shim/mlock.c shim/core_dump.c shim/bind_now.c

# A C++ exception thrown by a new_handler unwinds through operator new.
# The operators are defined under their mangled names, which only C++'s
# <new> declares: no C prototype to check them against.
CFLAGS_shim_new_delete := -fexceptions -Wno-missing-prototypes

# The static-key mechanism alone, for the tests that link it into a
# program of their own (with their own sites).
SK_SRCS := shim/static_key.c shim/static_key_x86_64.c shim/static_key_aarch64.c \
	shim/static_key_none.c shim/static_key_sync.c
SK_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(SK_SRCS))
