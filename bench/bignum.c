/*
 * bignum: arbitrary-precision arithmetic, one small allocation per result.
 *
 * After cfrac, the continued-fraction factoring program of mimalloc-bench
 * and of the Hoard papers.  A fixed 256-bit N is expanded as the continued
 * fraction of sqrt(N), step by step, carrying the convergents' numerators
 * modulo N, as the factoring method does.  Every number is a malloc'd
 * array of 32-bit digits and every operation allocates its result and frees
 * its temporaries: a single thread making tens of millions of allocations
 * of 8 to 80 bytes, nearly all freed a few operations after they were
 * made.  Every CHECK steps the identity A(k-1)^2 = (-1)^k Q(k) (mod N)
 * checks the arithmetic.
 *
 * Usage: bignum [STEPS]   (default 1200000)
 */
#include <string.h>

#include "bench_common.h"

#define N_WORDS 8 /* 256 bits */
#define CHECK 64

/* A non-negative integer: @n digits of base 2^32, least significant first,
 * the top one non-zero (zero has none). */
struct bn {
	size_t n;
	uint32_t d[];
};

static const char *prog;

/* A number of @n digits, all zero; the caller trims it once written. */
static struct bn *bn_alloc(size_t n)
{
	struct bn *r = malloc(sizeof(*r) + n * sizeof(r->d[0]));

	if (!r)
		bench_die(prog, "malloc failed");
	r->n = n;
	memset(r->d, 0, n * sizeof(r->d[0]));
	return r;
}

static struct bn *bn_trim(struct bn *r)
{
	while (r->n && !r->d[r->n - 1])
		r->n--;
	return r;
}

static struct bn *bn_small(uint32_t v)
{
	struct bn *r = bn_alloc(1);

	r->d[0] = v;
	return bn_trim(r);
}

static struct bn *bn_copy(const struct bn *a)
{
	struct bn *r = bn_alloc(a->n);

	memcpy(r->d, a->d, a->n * sizeof(a->d[0]));
	return r;
}

static size_t bn_bits(const struct bn *a)
{
	return a->n ? a->n * 32 - (size_t)__builtin_clz(a->d[a->n - 1]) : 0;
}

static int bn_cmp(const struct bn *a, const struct bn *b)
{
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	for (size_t i = a->n; i-- > 0;)
		if (a->d[i] != b->d[i])
			return a->d[i] < b->d[i] ? -1 : 1;
	return 0;
}

static struct bn *bn_add(const struct bn *a, const struct bn *b)
{
	size_t n = (a->n > b->n ? a->n : b->n) + 1;
	struct bn *r = bn_alloc(n);
	uint64_t carry = 0;

	for (size_t i = 0; i < n; i++) {
		carry += (uint64_t)(i < a->n ? a->d[i] : 0) + (i < b->n ? b->d[i] : 0);
		r->d[i] = (uint32_t)carry;
		carry >>= 32;
	}
	return bn_trim(r);
}

/* a - b, for a >= b. */
static struct bn *bn_sub(const struct bn *a, const struct bn *b)
{
	struct bn *r = bn_alloc(a->n);
	int64_t borrow = 0;

	for (size_t i = 0; i < a->n; i++) {
		int64_t v = (int64_t)a->d[i] - (i < b->n ? b->d[i] : 0) - borrow;

		borrow = v < 0;
		r->d[i] = (uint32_t)(v + (borrow << 32));
	}
	return bn_trim(r);
}

static struct bn *bn_mul(const struct bn *a, const struct bn *b)
{
	struct bn *r = bn_alloc(a->n + b->n);

	for (size_t i = 0; i < a->n; i++) {
		uint64_t carry = 0;

		for (size_t j = 0; j < b->n; j++) {
			carry += (uint64_t)a->d[i] * b->d[j] + r->d[i + j];
			r->d[i + j] = (uint32_t)carry;
			carry >>= 32;
		}
		r->d[i + b->n] = (uint32_t)carry;
	}
	return bn_trim(r);
}

static struct bn *bn_shl(const struct bn *a, size_t bits)
{
	size_t words = bits / 32;
	unsigned sh = bits % 32;
	struct bn *r = bn_alloc(a->n + words + 1);

	for (size_t i = 0; i < a->n; i++) {
		r->d[i + words] |= a->d[i] << sh;
		if (sh)
			r->d[i + words + 1] |= a->d[i] >> (32 - sh);
	}
	return bn_trim(r);
}

static struct bn *bn_shr1(const struct bn *a)
{
	struct bn *r = bn_alloc(a->n);

	for (size_t i = 0; i < a->n; i++)
		r->d[i] = a->d[i] >> 1 | (i + 1 < a->n ? a->d[i + 1] << 31 : 0);
	return bn_trim(r);
}

/*
 * bn_divmod - a / b by shifting and subtracting, one quotient bit at a time;
 * stores a % b in *@rem unless @rem is NULL.  b must not be zero.  Each bit
 * costs a new shifted divisor and, when the bit is set, a new remainder:
 * the allocations are the point.
 */
static struct bn *bn_divmod(const struct bn *a, const struct bn *b, struct bn **rem)
{
	struct bn *q, *r = bn_copy(a), *d, *t;
	size_t shift;

	if (bn_cmp(a, b) < 0) {
		q = bn_alloc(0);
		goto out;
	}
	shift = bn_bits(a) - bn_bits(b);
	q = bn_alloc(shift / 32 + 1);
	d = bn_shl(b, shift);
	for (size_t i = shift + 1; i-- > 0;) {
		if (bn_cmp(r, d) >= 0) {
			t = bn_sub(r, d);
			free(r);
			r = t;
			q->d[i / 32] |= 1u << (i % 32);
		}
		t = bn_shr1(d);
		free(d);
		d = t;
	}
	free(d);
	bn_trim(q);
out:
	if (rem)
		*rem = r;
	else
		free(r);
	return q;
}

static struct bn *bn_mod(const struct bn *a, const struct bn *m)
{
	struct bn *r;

	free(bn_divmod(a, m, &r));
	return r;
}

/* floor(sqrt(a)) by Newton's iteration from above. */
static struct bn *bn_isqrt(const struct bn *a)
{
	struct bn *one = bn_small(1);
	struct bn *x = bn_shl(one, (bn_bits(a) + 1) / 2);

	free(one);
	for (;;) {
		struct bn *q = bn_divmod(a, x, NULL);
		struct bn *s = bn_add(x, q);
		struct bn *y = bn_shr1(s);

		free(q);
		free(s);
		if (bn_cmp(y, x) >= 0) {
			free(y);
			return x;
		}
		free(x);
		x = y;
	}
}

/* Dies unless a^2 = (-1)^k q (mod n). */
static void check_identity(const struct bn *a, const struct bn *q, unsigned long k,
			   const struct bn *n)
{
	struct bn *sq = bn_mul(a, a);
	struct bn *lhs = bn_mod(sq, n);
	struct bn *rhs = k % 2 ? bn_sub(n, q) : bn_copy(q);
	int ok = bn_cmp(lhs, rhs) == 0;

	free(sq);
	free(lhs);
	free(rhs);
	if (!ok)
		bench_die(prog, "the continued fraction broke its identity: wrong arithmetic");
}

int main(int argc, char **argv)
{
	unsigned long steps = bench_arg(argc, argv, 1, 1200000, "STEPS");
	uint64_t rng = 0x7fb5d329728ea185ull;
	unsigned long sum = 0;
	struct bn *n, *a0, *sq, *m, *q, *q_prev, *a, *p1, *p2;

	prog = argv[0];
	n = bn_alloc(N_WORDS);
	for (size_t i = 0; i < N_WORDS; i++)
		n->d[i] = (uint32_t)(bench_rand(&rng) >> 32);
	n->d[N_WORDS - 1] |= 1u << 31;
	a0 = bn_isqrt(n);
	sq = bn_mul(a0, a0);
	if (bn_cmp(sq, n) == 0)
		bench_die(prog, "N is a square: its continued fraction ends");
	free(sq);

	/*
	 * sqrt(N) = a0 + 1/(a1 + 1/(a2 + ...)), with m(0) = 0, Q(0) = 1 and
	 *   m(k+1) = a(k) Q(k) - m(k)
	 *   Q(k+1) = Q(k-1) + a(k) (m(k) - m(k+1))   (Q(-1) = N)
	 *   a(k+1) = (a0 + m(k+1)) / Q(k+1)
	 * and the numerators of the convergents A(k) = a(k) A(k-1) + A(k-2),
	 * kept modulo N (A(-1) = 1, A(-2) = 0).
	 */
	m = bn_small(0);
	q = bn_small(1);
	q_prev = bn_copy(n);
	a = bn_copy(a0);
	p1 = bn_small(1);
	p2 = bn_small(0);
	for (unsigned long k = 0; k < steps; k++) {
		struct bn *t, *u, *m_next, *q_next, *a_next;

		t = bn_mul(a, p1);
		u = bn_add(t, p2);
		free(t);
		free(p2);
		p2 = p1;
		p1 = bn_mod(u, n);
		free(u);

		t = bn_mul(a, q);
		m_next = bn_sub(t, m);
		free(t);

		if (bn_cmp(m, m_next) >= 0) {
			t = bn_sub(m, m_next);
			u = bn_mul(a, t);
			q_next = bn_add(q_prev, u);
		} else {
			t = bn_sub(m_next, m);
			u = bn_mul(a, t);
			q_next = bn_sub(q_prev, u);
		}
		free(t);
		free(u);

		t = bn_add(a0, m_next);
		a_next = bn_divmod(t, q_next, NULL);
		free(t);

		if ((k + 1) % CHECK == 0)
			check_identity(p1, q_next, k + 1, n);
		sum += a_next->n ? a_next->d[0] : 0;
		free(m);
		m = m_next;
		free(q_prev);
		q_prev = q;
		q = q_next;
		free(a);
		a = a_next;
	}
	free(m);
	free(q);
	free(q_prev);
	free(a);
	free(p1);
	free(p2);
	free(a0);
	free(n);
	printf("bignum: %lu continued-fraction steps, checksum %lu\n", steps, sum);
	return 0;
}
