#include "tl_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One request in flight.  Slots belong to the tl_load, not to a run, so an
 * answer that arrives after its run gave up on it (a later run's poll)
 * still finds its slot; `run` tells it that its stats are gone. */
typedef struct slot {
	struct tl_load *l;
	uint64_t due;
	uint64_t run;
	int stat;
	bool busy;
	struct slot *next_free;
} slot;

struct tl_load {
	shoal_client *c;
	uint64_t origin;
	unsigned max_inflight, in_flight;
	uint64_t run; /* current run number */
	tl_load_stat *stats;
	unsigned nstats;
	slot *slots, *free_slots;
	tl_load_answer_fn on_answer;
	void *on_answer_arg;
	char json[TL_LOAD_JSON_MAX];
};

uint64_t tl_load_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

tl_load *tl_load_new(shoal_client *c, uint64_t origin_us, unsigned max_inflight)
{
	tl_load *l = calloc(1, sizeof(*l));
	if (l == NULL)
		return NULL;
	l->slots = calloc(max_inflight, sizeof(slot));
	if (l->slots == NULL) {
		free(l);
		return NULL;
	}
	l->c = c;
	l->origin = origin_us;
	l->max_inflight = max_inflight;
	for (unsigned i = 0; i < max_inflight; i++) {
		l->slots[i].l = l;
		l->slots[i].next_free = l->free_slots;
		l->free_slots = &l->slots[i];
	}
	return l;
}

void tl_load_free(tl_load *l)
{
	if (l == NULL)
		return;
	free(l->slots);
	free(l);
}

void tl_load_on_answer(tl_load *l, tl_load_answer_fn fn, void *arg)
{
	l->on_answer = fn;
	l->on_answer_arg = arg;
}

static unsigned sec_of(const tl_load *l, uint64_t t)
{
	uint64_t s = t > l->origin ? (t - l->origin) / 1000000u : 0;
	return s < TL_LOAD_MAX_SECS ? (unsigned)s : TL_LOAD_MAX_SECS - 1;
}

static void done(void *arg, int code, const void *body, size_t len, const shoal_error *err)
{
	slot *s = arg;
	tl_load *l = s->l;
	l->in_flight--;
	s->busy = false;
	if (s->run == l->run && s->stat >= 0) {
		uint64_t t = tl_load_now_us();
		uint64_t lat = t > s->due ? t - s->due : 0;
		tl_load_stat *st = &l->stats[s->stat];
		unsigned sec = sec_of(l, t);
		if (code == SHOAL_OK) {
			st->ok++;
			st->sec_ok[sec]++;
			tl_hist_record(&st->ok_lat, lat);
			if (lat > st->sec_max_us[sec])
				st->sec_max_us[sec] = lat > UINT32_MAX ? UINT32_MAX : (uint32_t)lat;
		} else if (code == SHOAL_E_THROUGHPUT) {
			st->throttled++;
			st->sec_thr[sec]++;
			tl_hist_record(&st->thr_lat, lat);
		} else {
			st->other++;
			st->sec_other[sec]++;
			if (st->first_error[0] == '\0')
				snprintf(st->first_error, sizeof(st->first_error), "%s: %s",
				         err->exception, err->message);
		}
		if (l->on_answer != NULL)
			l->on_answer(l->on_answer_arg, s->stat, code, lat, t);
	}
	s->next_free = l->free_slots;
	l->free_slots = s;
}

static void submit(tl_load *l, const tl_load_class *k, uint64_t n, uint64_t due)
{
	const char *op = NULL;
	int si = k->build(k->arg, n, &op, l->json, sizeof(l->json));
	if (si < 0 || (unsigned)si >= l->nstats)
		return;
	tl_load_stat *st = &l->stats[si];
	st->sent++;
	st->sec_sent[sec_of(l, due)]++;
	slot *s = l->free_slots;
	if (s == NULL) {
		st->refused++;
		return;
	}
	l->free_slots = s->next_free;
	s->due = due;
	s->run = l->run;
	s->stat = si;
	shoal_error err;
	int rc = shoal_submit_json(l->c, op, l->json, done, s, &err);
	if (rc != SHOAL_OK) {
		st->other++;
		if (st->first_error[0] == '\0')
			snprintf(st->first_error, sizeof(st->first_error), "%s: %s (not sent)",
			         err.exception, err.message);
		s->next_free = l->free_slots;
		l->free_slots = s;
		return;
	}
	s->busy = true;
	l->in_flight++;
}

unsigned tl_load_run(tl_load *l, const tl_load_class *classes, unsigned n_classes, double secs,
                     tl_load_stat *stats, unsigned nstats)
{
	l->run++;
	l->stats = stats;
	l->nstats = nstats;
	uint64_t start = tl_load_now_us();
	uint64_t end = start + (uint64_t)(secs * 1e6);
	uint64_t *sent = calloc(n_classes, sizeof(uint64_t));
	if (sent == NULL)
		return 0;
	for (;;) {
		uint64_t t = tl_load_now_us();
		if (t >= end)
			break;
		/* Send everything due by now; note when the next one is due. */
		uint64_t next = end;
		for (unsigned i = 0; i < n_classes; i++) {
			const tl_load_class *k = &classes[i];
			double gap = 1e6 / k->rate;
			for (;;) {
				uint64_t due = start + (uint64_t)((double)sent[i] * gap);
				if (due > t || due >= end) {
					if (due < next)
						next = due;
					break;
				}
				submit(l, k, sent[i], due);
				sent[i]++;
			}
		}
		t = tl_load_now_us();
		if (next <= t)
			continue;
		int wait_ms = (int)((next - t + 999) / 1000);
		if (l->in_flight > 0) {
			shoal_poll(l->c, wait_ms);
		} else {
			/* Nothing to wait for but the clock (shoal_poll returns at
			 * once when nothing is in flight). */
			uint64_t d = next - t;
			struct timespec ts = {.tv_sec = (time_t)(d / 1000000u),
			                      .tv_nsec = (long)(d % 1000000u) * 1000};
			nanosleep(&ts, NULL);
		}
	}
	free(sent);
	uint64_t drain_end = tl_load_now_us() + (uint64_t)TL_LOAD_DRAIN_MS * 1000u;
	while (l->in_flight > 0 && tl_load_now_us() < drain_end)
		shoal_poll(l->c, 100);
	unsigned left = l->in_flight;
	if (left > 0) {
		/* Count the unanswered ones as lost against their stats. */
		for (unsigned i = 0; i < l->max_inflight; i++) {
			slot *s = &l->slots[i];
			if (s->busy && s->run == l->run && s->stat >= 0)
				stats[s->stat].lost++;
		}
	}
	l->run++; /* answers still to come belong to no run */
	return left;
}
