# An allocation-heavy workload for `make run`: builds and drops dicts,
# lists and strings, then reports whether the heap was served by cgmalloc.
import ctypes

def churn(rounds):
    total = 0
    for r in range(rounds):
        d = {f"key{i}-{r}": [i] * (i % 17) for i in range(20000)}
        s = "".join(k for k in list(d)[:2000])
        total += len(d) + len(s)
    return total

print("allocated and freed", churn(30), "objects and characters")
try:
    lib = ctypes.CDLL(None)
    version = ctypes.CFUNCTYPE(ctypes.c_char_p)(("cgm_version", lib))()
    print("heap served by cgmalloc", version.decode())
except AttributeError:
    print("not running under cgmalloc")
