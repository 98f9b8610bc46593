# zpool/: the zsmalloc-style compressed page pool, as a PIC static archive
# that the shim links later ($(B)/libcgmzpool.a; not part of LIB_SRCS).
# Its users also link $(ZPOOL_LIBS) and provide cgm_log (shim/log.c).

ZPOOL_SRCS := zpool/mem.c zpool/idpool.c zpool/class.c zpool/arena.c \
	zpool/zspage.c zpool/obj.c zpool/compact.c zpool/codec.c \
	zpool/store.c zpool/writeback.c zpool/stats.c zpool/pool.c
ZPOOL_HDRS := include/cgm/zpool.h include/cgm/zp_types.h include/cgm/compiler.h \
	include/cgm/log.h
ZPOOL_PKGS := liblz4 libzstd liburing
ZPOOL_CFLAGS := $(shell pkg-config --cflags $(ZPOOL_PKGS) 2>/dev/null)
ZPOOL_LIBS := $(shell pkg-config --libs $(ZPOOL_PKGS) 2>/dev/null) -lpthread
ZPOOL_LIB := $(B)/libcgmzpool.a
ZPOOL_OBJS := $(patsubst %.c,$(B)/zpool-obj/%.o,$(ZPOOL_SRCS))

$(B)/zpool-obj/%.o: %.c $(ZPOOL_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_BASE) $(CFLAGS_BASE) $(ZPOOL_CFLAGS) $(CFLAGS) -c -o $@ $<

$(ZPOOL_LIB): $(ZPOOL_OBJS)
	rm -f $@
	$(AR) rcs $@ $^

zpool: $(ZPOOL_LIB)
all: $(ZPOOL_LIB)

.PHONY: zpool
