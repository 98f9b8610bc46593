#!/bin/sh
# The static-key mechanism on aarch64: built with Debian's cross compiler,
# run under qemu-user, its sites checked against objdump.  Exit 77 (a
# skip) when the cross compiler or qemu-user is not installed.
#   tests/static_key_aarch64.sh MAKE BINARY CROSS_CC QEMU
set -eu
make=$1 bin=$2 cc=$3 qemu=$4
for tool in "$cc" "$qemu"; do
	command -v "$tool" >/dev/null ||
		{ echo "check-static-key-aarch64: $tool is not installed (scripts/install-deps)" >&2; exit 77; }
done
"$make" --no-print-directory "$bin"
"$qemu" "$bin" --emulated
OBJDUMP=aarch64-linux-gnu-objdump "$(dirname "$0")/check-sites-objdump" "$bin" "$qemu" "$bin" --report
