/*
 * Print the static-key report of libcgmalloc.so itself, for
 * tests/check-sites-objdump to compare with objdump -d of the library.
 *
 *   sk_lib_report            the report
 *   sk_lib_report --entries  where malloc's and free's first instruction
 *                            leads, one line each: "NAME nop", "NAME jmp
 *                            SYMBOL" (x86-64; exit 77 elsewhere).  calloc's
 *                            site follows its overflow check.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgmalloc.h"

static int print_entry(const char *name, const char *mi_name)
{
#if defined(__x86_64__)
	static const unsigned char nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	const unsigned char *code = dlsym(RTLD_DEFAULT, name);
	Dl_info info;
	int32_t rel;
	uintptr_t dest;

	if (!code) {
		fprintf(stderr, "sk_lib_report: no symbol %s\n", name);
		return 1;
	}
	if (memcmp(code, nop5, sizeof(nop5)) == 0) {
		printf("%s nop\n", name);
		return 0;
	}
	if (code[0] != 0xe9) {
		printf("%s other %02x\n", name, code[0]);
		return 0;
	}
	memcpy(&rel, code + 1, sizeof(rel));
	dest = (uintptr_t)code + 5 + (uintptr_t)(intptr_t)rel;
	/* mimalloc's entries have aliases (__libc_malloc...): name them as the shim calls them. */
	if (dest == (uintptr_t)dlsym(RTLD_DEFAULT, mi_name))
		printf("%s jmp %s\n", name, mi_name);
	else if (dladdr((void *)dest, &info) && info.dli_sname && (uintptr_t)info.dli_saddr == dest)
		printf("%s jmp %s\n", name, info.dli_sname);
	else
		printf("%s jmp %#lx\n", name, (unsigned long)dest);
	return 0;
#else
	(void)name;
	(void)mi_name;
	exit(77);
#endif
}

int main(int argc, char **argv)
{
	static char buf[1 << 16];

	if (argc > 1 && strcmp(argv[1], "--entries") == 0) {
		/* In this order: tests/check-entry-sites compares the lines as printed. */
		int bad = print_entry("malloc", "mi_malloc");

		return bad | print_entry("free", "mi_free");
	}
	cgm_static_keys_report(buf, sizeof(buf));
	fputs(buf, stdout);
	return 0;
}
