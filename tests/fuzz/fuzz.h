/*
 * The entry point every libFuzzer target defines: libFuzzer calls it once
 * per input and declares it in no C header of its own.
 */
#ifndef CGM_FUZZ_H
#define CGM_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* CGM_FUZZ_H */
