/*
 * keycheck.c -- a Key map or an Item against a table's key schema.
 *
 * DynamoDB words the same problem differently depending on where the key
 * came from, and this file keeps those words:
 *
 *   problem                  Key (Get/Update/Delete, ExclusiveStartKey)   Item (Put)
 *   wrong attribute count    The provided key element does not match ... (allowed)
 *   key attribute missing    The provided key element does not match ... Missing the key PK in the
 * item wrong type               The provided key element does not match ... Type mismatch for key
 * PK ... empty S or B             ... cannot contain an empty string value. Key: PK (both)
 *   partition key > 2048 B   Size of hashkey has exceeded ...              (both)
 *   sort key > 1024 B        Aggregated size of all range keys ...         (both)
 *
 * A wrongly typed Key gets "does not match the schema", as DynamoDB answers
 * GetItem/UpdateItem/DeleteItem; only an Item names the types.  Numbers are
 * never too large (38 digits).  Attributes are checked in key-schema order,
 * hash then range, and for each: presence, type, emptiness, size.
 */
#include <string.h>

#include "engine.h"

static const char NO_MATCH[] = "The provided key element does not match the schema";

static int check_one(const st_key_attr *ka, bool is_hash, const st_value *v, st_keycheck_mode mode,
                     char *errmsg)
{
	if (v == NULL) {
		if (mode == ST_KEYCHECK_KEY)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s", NO_MATCH);
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: Missing the key %s in "
		               "the item",
		               ka->name);
	}
	if (v->type != ka->type) {
		if (mode == ST_KEYCHECK_KEY)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s", NO_MATCH);
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: Type mismatch for key "
		               "%s expected: %s actual: %s",
		               ka->name, st_type_name(ka->type), st_type_name(v->type));
	}
	if (v->type == ST_N)
		return SHOAL_OK;
	if (v->u.str.len == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values are not valid. The AttributeValue for "
		               "a key attribute cannot contain an empty %s value. Key: %s",
		               v->type == ST_S ? "string" : "binary", ka->name);
	if (is_hash && v->u.str.len > ST_MAX_PK_SIZE)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: Size of hashkey has "
		               "exceeded the maximum size limit of2048 bytes");
	if (!is_hash && v->u.str.len > ST_MAX_SK_SIZE)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: Aggregated size of all "
		               "range keys has exceeded the size limit of 1024 bytes");
	return SHOAL_OK;
}

int st_key_check(const st_key_schema *ks, const st_value *key, st_keycheck_mode mode,
                 const st_value **pk, const st_value **sk, char *errmsg)
{
	*pk = NULL;
	*sk = NULL;
	uint32_t want = ks->range.name != NULL ? 2 : 1;
	if (key == NULL || key->type != ST_M || (mode == ST_KEYCHECK_KEY && key->u.map.n != want))
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "%s", NO_MATCH);

	const st_value *h = st_map_get(key, ks->hash.name, strlen(ks->hash.name));
	int rc = check_one(&ks->hash, true, h, mode, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	const st_value *r = NULL;
	if (ks->range.name != NULL) {
		r = st_map_get(key, ks->range.name, strlen(ks->range.name));
		rc = check_one(&ks->range, false, r, mode, errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	*pk = h;
	*sk = r;
	return SHOAL_OK;
}

int st_key_extract(sh_arena *a, const st_key_schema *ks, const st_value *item, st_value **out)
{
	*out = NULL;
	st_value *m = st_new_map(a, 2);
	if (m == NULL)
		return SHOAL_E_NOMEM;
	const st_key_attr *attrs[2] = {&ks->hash, &ks->range};
	for (int i = 0; i < 2; i++) {
		if (attrs[i]->name == NULL)
			continue;
		size_t len = strlen(attrs[i]->name);
		const st_value *v = st_map_get(item, attrs[i]->name, len);
		if (v != NULL && st_map_set(a, m, attrs[i]->name, len, v) != SHOAL_OK)
			return SHOAL_E_NOMEM;
	}
	*out = m;
	return SHOAL_OK;
}
