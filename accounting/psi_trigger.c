/*
 * memory.pressure triggers, with the kernel's rules: "some|full
 * <threshold us> <window us>" fires when the group's stall time of that
 * kind grew by at least the threshold within the last window, at most
 * once per window; the window is 500 ms..10 s and the threshold at most
 * the window.
 *
 * A trigger keeps samples of the stall total, one per window/10 at most
 * (the kernel's polling period), in a ring that covers one window: the
 * growth within the window is the total now less the oldest sample not
 * older than the window.  Whoever holds the trigger polls it (the API's
 * watcher thread, cgmctl pressure).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgm/log.h"
#include "internal.h"

#define WINDOW_MIN_US	500000ULL
#define WINDOW_MAX_US	10000000ULL

static bool is_blank(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* The next blank-separated word at *@s (length *@len, 0 at the end); *@s moves past it. */
static const char *next_word(const char **s, size_t *len)
{
	const char *p = *s, *w;

	while (is_blank(*p))
		p++;
	for (w = p; *p && !is_blank(*p); p++)
		;
	*len = (size_t)(p - w);
	*s = p;
	return w;
}

/* The next word as a decimal number into *@v; false if it is not one. */
static bool next_number(const char **s, unsigned long long *v)
{
	size_t len;
	const char *w = next_word(s, &len);
	char *end;

	if (!len || *w < '0' || *w > '9')
		return false;
	*v = strtoull(w, &end, 10);
	return end == w + len;
}

/* Nothing but blanks left at @s? */
static bool only_blanks(const char *s)
{
	while (is_blank(*s))
		s++;
	return *s == '\0';
}

int psi_trigger_parse(const char *spec, struct psi_trigger *t, char *why, size_t whylen)
{
	unsigned long long threshold = 0, window = 0;
	const char *s = spec, *kind;
	size_t kind_len;

	memset(t, 0, sizeof(*t));
	kind = next_word(&s, &kind_len);
	if (kind_len != 4 || (strncmp(kind, "some", 4) && strncmp(kind, "full", 4)) ||
	    !next_number(&s, &threshold) || !next_number(&s, &window) || !only_blanks(s)) {
		cgm_msg_format(why, whylen,
			       "bad trigger '%s' (expected \"some|full THRESHOLD_US WINDOW_US\")",
			       spec);
		return -EINVAL;
	}
	if (window < WINDOW_MIN_US || window > WINDOW_MAX_US) {
		cgm_msg_format(why, whylen, "trigger window %llu us outside 500000..10000000", window);
		return -EINVAL;
	}
	if (threshold == 0 || threshold > window) {
		cgm_msg_format(why, whylen, "trigger threshold %llu us not in 1..window (%llu us)",
			       threshold, window);
		return -EINVAL;
	}
	t->kind = strncmp(kind, "some", 4) ? CGM_PSI_FULL : CGM_PSI_SOME;
	t->threshold_ns = (int64_t)threshold * 1000;
	t->window_ns = (int64_t)window * 1000;
	return 0;
}

int64_t psi_trigger_period_ns(const struct psi_trigger *t)
{
	return t->window_ns / (PSI_TRIGGER_SAMPLES - 1);
}

bool psi_trigger_poll(struct cgm_hier *h, uint32_t group, struct psi_trigger *t, int64_t now)
{
	struct cgm_psi_view v;
	int64_t total, base = -1;

	/* A process killed in a stall would go on stalling the group until its slot is freed. */
	acct_reclaim_dead(h);
	psi_totals_now(h, group, now, &v);
	total = v.total[t->kind];
	/* The oldest sample within the window is the base of the growth. */
	for (unsigned i = 0; i < t->nr; i++) {
		unsigned k = (t->head + PSI_TRIGGER_SAMPLES - t->nr + i) % PSI_TRIGGER_SAMPLES;

		if (now - t->at[k] <= t->window_ns) {
			base = t->total[k];
			break;
		}
	}
	if (!t->nr || now - t->at[(t->head + PSI_TRIGGER_SAMPLES - 1) % PSI_TRIGGER_SAMPLES] >=
		      psi_trigger_period_ns(t)) {
		t->at[t->head] = now;
		t->total[t->head] = total;
		t->head = (t->head + 1) % PSI_TRIGGER_SAMPLES;
		if (t->nr < PSI_TRIGGER_SAMPLES)
			t->nr++;
	}
	if (base < 0 || total - base < t->threshold_ns)
		return false;
	/* Once per window. */
	if (t->fired_ns && now - t->fired_ns < t->window_ns)
		return false;
	t->fired_ns = now;
	return true;
}
