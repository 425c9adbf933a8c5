/*
 * route.c -- placing a request on a partition (storage/route.h).
 *
 * st_route_key is st_key_check (keycheck.c) under a public name; the Query's
 * plan (st_query_route) lives beside st_query in read_query.c, so that both
 * run the same checks with the same code.
 */
#include <string.h>

#include "read.h"
#include "route.h"

int st_route_key(const st_key_schema *ks, const st_value *key, bool item, const st_value **pk,
                 const st_value **sk, char *errmsg)
{
	const st_value *sk_local;
	if (key == NULL || key->type != ST_M)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The provided key element does not match the schema");
	return st_key_check(ks, key, item ? ST_KEYCHECK_ITEM : ST_KEYCHECK_KEY, pk,
	                    sk != NULL ? sk : &sk_local, errmsg);
}
