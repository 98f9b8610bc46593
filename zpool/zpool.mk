# zpool/: the zsmalloc-style compressed page pool, libcgmzpool.a.  Uses
# only the base; its users also link $(ZPOOL_LIBS).
zpool_SRCS := zpool/mem.c zpool/idpool.c zpool/class.c zpool/arena.c \
	zpool/zspage.c zpool/obj.c zpool/compact.c zpool/codec.c \
	zpool/store.c zpool/writeback.c zpool/csum.c zpool/stats.c zpool/pool.c \
	zpool/spill.c zpool/uffd_span.c zpool/recompress.c zpool/zdict.c
ZPOOL_PKGS := liblz4 libzstd liburing
ZPOOL_LIBS := $(shell pkg-config --libs $(ZPOOL_PKGS) 2>/dev/null) -lpthread
MODULES += zpool

zpool: $(B)/libcgmzpool.a
all: $(B)/libcgmzpool.a

.PHONY: zpool
