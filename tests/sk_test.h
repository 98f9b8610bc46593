/* Keys and site functions shared by the static-key tests' two files. */
#ifndef SK_TEST_H
#define SK_TEST_H

#include <stdbool.h>

#include "cgm/static_key.h"

DECLARE_STATIC_KEY_FALSE(sk_shared_key);
DECLARE_STATIC_KEY_TRUE(sk_main_true);

bool other_tu_shared_unlikely(void);
bool other_tu_main_likely(void);

#endif
