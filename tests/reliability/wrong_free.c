/*
 * Preloaded before libcgmalloc.so by test_mimalloc_check.sh: a mimalloc
 * whose mi_free() does not free a block of the caller's own page the way
 * 2.0.9's does (here it frees nothing at all).  The accounted free does
 * that local case itself (mi209_free_block), so the start-up check must
 * see the difference and leave accounting off.
 */
void mi_free(void *p);

void mi_free(void *p)
{
	(void)p;
}
