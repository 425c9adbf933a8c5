/*
 * capacity_math.c -- the arithmetic of capacity.h: token buckets, a
 * partition's share and adaptive rate, the Space-Saving sketch of hot keys,
 * a key's DynamoDB JSON.  Pure: no locks, no clock (time is passed in).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "node/capacity.h"
#include "proto/wire.h"

/* ------------------------------------------------------------------------ */
/* Buckets                                                                   */
/* ------------------------------------------------------------------------ */

static double max_of(double rate, double burst)
{
	return burst > rate ? burst : rate;
}

void cap_bucket_init(cap_bucket *b, double rate, double burst, int64_t now_ms)
{
	b->rate = rate;
	b->max = max_of(rate, burst);
	b->tokens = rate;
	b->last_ms = now_ms;
}

void cap_bucket_refill(cap_bucket *b, int64_t now_ms)
{
	if (now_ms <= b->last_ms)
		return;
	b->tokens += b->rate * (double)(now_ms - b->last_ms) / 1000.0;
	if (b->tokens > b->max)
		b->tokens = b->max;
	b->last_ms = now_ms;
}

void cap_bucket_set(cap_bucket *b, double rate, double burst, int64_t now_ms)
{
	cap_bucket_refill(b, now_ms);
	b->rate = rate;
	b->max = max_of(rate, burst);
	if (b->tokens > b->max)
		b->tokens = b->max;
	if (b->tokens < -rate)
		b->tokens = -rate;
}

bool cap_bucket_admit(cap_bucket *b, int64_t now_ms)
{
	cap_bucket_refill(b, now_ms);
	return b->tokens > 0;
}

void cap_bucket_take(cap_bucket *b, double units, int64_t now_ms)
{
	cap_bucket_refill(b, now_ms);
	b->tokens -= units;
	if (b->tokens < -b->rate)
		b->tokens = -b->rate;
}

static double cap_max(const cap_limits *l)
{
	return l->part_max * (l->held > 0 ? l->held : 1);
}

double cap_share(const cap_limits *l)
{
	double max = cap_max(l);
	if (l->table_rate <= 0)
		return max;
	double s = l->table_rate * (l->frac > 0 && l->frac <= 1 ? l->frac : 1);
	return s < max ? s : max;
}

double cap_adaptive_rate(const cap_limits *l)
{
	double share = cap_share(l), max = cap_max(l);
	if (l->table_rate <= 0 || l->others < 0)
		return share;
	double spare = l->table_rate - l->others;
	double r = spare > share ? spare : share;
	return r < max ? r : max;
}

bool cap_at_partition_limit(const cap_limits *l, double rate)
{
	return rate >= cap_max(l) * 0.999;
}

/* ------------------------------------------------------------------------ */
/* Hot keys                                                                  */
/* ------------------------------------------------------------------------ */

cap_hot *cap_sketch_add(cap_sketch *s, uint64_t id, int kind, double units, bool *fresh)
{
	cap_hot *min = NULL;
	for (uint32_t i = 0; i < CAP_HOT_SLOTS; i++) {
		cap_hot *h = &s->slot[i];
		if (h->id == id) {
			h->count += units;
			h->win[kind] += units;
			*fresh = false;
			return h;
		}
		if (min == NULL || h->count < min->count || (min->id != 0 && h->id == 0))
			min = h;
	}
	/* Space-Saving: the new key takes the smallest counter and inherits
	 * its count (an overestimate bounded by that count). */
	double inherited = min->id != 0 ? min->count : 0;
	memset(min, 0, sizeof(*min));
	min->id = id;
	min->count = inherited + units;
	min->win[kind] = units;
	*fresh = true;
	return min;
}

void cap_sketch_roll(cap_sketch *s, double dt)
{
	if (dt <= 0)
		return;
	/* Averages over about CAP_HOT_HALF_LIFE_S seconds. */
	double keep = pow(0.5, dt / CAP_HOT_HALF_LIFE_S);
	for (uint32_t i = 0; i < CAP_HOT_SLOTS; i++) {
		cap_hot *h = &s->slot[i];
		if (h->id == 0)
			continue;
		for (int k = 0; k < 2; k++) {
			h->rate[k] = keep * h->rate[k] + (1 - keep) * (h->win[k] / dt);
			h->win[k] = 0;
		}
		h->count *= keep;
	}
}

static double hot_rate(const cap_hot *h)
{
	return h->rate[0] + h->rate[1];
}

uint32_t cap_sketch_top(const cap_sketch *s, uint32_t *idx, uint32_t max)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < CAP_HOT_SLOTS; i++) {
		const cap_hot *h = &s->slot[i];
		if (h->id == 0 || (hot_rate(h) < 0.005 && h->throttled == 0))
			continue;
		/* insertion into idx[0..n), heaviest first, keeping max */
		uint32_t j = n < max ? n++ : max;
		while (j > 0 && hot_rate(&s->slot[idx[j - 1]]) < hot_rate(h)) {
			if (j < max)
				idx[j] = idx[j - 1];
			j--;
		}
		if (j < max)
			idx[j] = i;
	}
	return n;
}

void cap_hot_set_key(cap_hot *h, char type, const char *p, uint32_t len)
{
	uint32_t n = len < CAP_HOT_RAW_MAX ? len : CAP_HOT_RAW_MAX;
	if (type == 'S' && n < len)
		while (n > 0 && ((unsigned char)p[n] & 0xC0) == 0x80)
			n--; /* p[n] continues a sequence: cut before its lead byte */
	h->type = type;
	h->len = (uint8_t)n;
	memcpy(h->raw, p, n);
}

void cap_hot_json(const cap_hot *h, char *buf, size_t size)
{
	cap_key_json(h->type, h->raw, h->len, buf, size);
}

void cap_key_json(char type, const char *p, uint32_t len, char *buf, size_t size)
{
	/* {"S":"...."} -- room for the frame and one escape */
	size_t o = (size_t)snprintf(buf, size, "{\"%c\":\"", type);
	size_t room = size > o + 3 ? size - o - 3 : 0;
	if (type == 'B') {
		char enc[CAP_HOT_KEY_MAX];
		uint32_t n = len;
		while (n > 0 && wire_b64_encoded_len(n) >= sizeof(enc))
			n--;
		wire_b64_encode(p, n, enc);
		size_t el = strlen(enc);
		if (el > room)
			el = room - room % 4;
		memcpy(buf + o, enc, el);
		o += el;
	} else {
		for (uint32_t i = 0; i < len; i++) {
			unsigned char ch = (unsigned char)p[i];
			const char *esc = NULL;
			char tmp[8];
			if (ch == '"')
				esc = "\\\"";
			else if (ch == '\\')
				esc = "\\\\";
			else if (ch < 0x20) {
				snprintf(tmp, sizeof(tmp), "\\u%04x", ch);
				esc = tmp;
			}
			size_t need = esc != NULL ? strlen(esc) : 1;
			if (need > room)
				break;
			/* never cut a UTF-8 sequence: stop before a lead byte whose
			 * sequence does not fit */
			if (ch >= 0xC0) {
				uint32_t seq = ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : 2;
				if (seq > room || i + seq > len)
					break;
			}
			if (esc != NULL)
				memcpy(buf + o, esc, need);
			else
				buf[o] = (char)ch;
			o += need;
			room -= need;
		}
	}
	buf[o++] = '"';
	buf[o++] = '}';
	buf[o] = '\0';
}
