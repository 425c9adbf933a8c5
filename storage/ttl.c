/*
 * ttl.c -- the expiry decision of Time to Live.
 *
 * DynamoDB's rules (developer guide, "Time to Live"): the TTL attribute
 * holds a Number, the expiry time in seconds since the epoch; an item whose
 * value is earlier than the current time is expired; a value that is not a
 * Number (a String of digits included), or one more than five years in the
 * past, is ignored and the item is never expired by TTL.  Fractions of a
 * second count: 1700000000.5 expires half a second after 1700000000.
 *
 * The same function answers for the scanner (node/ttl.c, with the leader's
 * clock) and for the apply of the TTL delete (write.c, with the Raft
 * entry's proposer time, so that every replica decides alike).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "storage/storage.h"

/* now_ms + off_s seconds as a number. */
static bool num_of_time(int64_t now_ms, int64_t off_s, st_num *out)
{
	char text[48], msg[SH_ERRMSG_SIZE];
	int64_t ms = now_ms + off_s * 1000;
	if (ms < 0)
		return false; /* before 1970: no valid TTL value is there */
	snprintf(text, sizeof(text), "%" PRId64 ".%03" PRId64, ms / 1000, ms % 1000);
	return st_num_parse(text, strlen(text), out, msg) == SHOAL_OK;
}

bool st_ttl_expired(const st_value *v, int64_t now_ms)
{
	if (v == NULL || v->type != ST_N)
		return false;
	st_num t, now, oldest;
	char msg[SH_ERRMSG_SIZE];
	if (st_num_parse(v->u.str.ptr, v->u.str.len, &t, msg) != SHOAL_OK)
		return false;
	if (!num_of_time(now_ms, 0, &now) || st_num_cmp(&t, &now) >= 0)
		return false;
	if (num_of_time(now_ms, -ST_TTL_MAX_PAST_S, &oldest) && st_num_cmp(&t, &oldest) < 0)
		return false;
	return true;
}

bool st_ttl_item_expired(const st_value *item, const char *attr, int64_t now_ms)
{
	if (item == NULL || item->type != ST_M || attr == NULL)
		return false;
	return st_ttl_expired(st_map_get(item, attr, strlen(attr)), now_ms);
}
