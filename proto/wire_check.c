/*
 * wire_check.c -- DynamoDB's API-level checks, shared by the request
 * converters.
 *
 * DynamoDB validates a request in two stages, and so do we:
 *  1. Parameter constraints from its API model (not null, length, pattern,
 *     range, enum).  Every violation is collected, up to ten, and reported
 *     in one ValidationException:
 *       "2 validation errors detected: Value 'ab' at 'tableName' failed to
 *        satisfy constraint: Member must have length greater than or equal
 *        to 3; Value '0' at 'limit' failed to satisfy constraint: Member
 *        must have value greater than or equal to 1"
 *     Paths are camelCase parameter names, list members are
 *     "keySchema.1.member.keyType" (1-based), as in DynamoDB's messages.
 *  2. Rules across parameters and the values themselves, first failure
 *     only (the converters in wire_req.c / wire_table.c).
 * The order of parameters inside a message follows DynamoDB's (as recorded
 * by dynalite's validations, which were written against the real service).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/wire_int.h"

const char *const wire_rcc_set[] = {"INDEXES", "TOTAL", "NONE", NULL};
const char *const wire_rv_set[] = {"ALL_NEW", "UPDATED_OLD", "ALL_OLD",
                                   "NONE",    "UPDATED_NEW", NULL};
const char *const wire_ricm_set[] = {"SIZE", "NONE", NULL};
const char *const wire_rvoccf_set[] = {"ALL_OLD", "NONE", NULL};
const char *const wire_select_set[] = {"SPECIFIC_ATTRIBUTES", "COUNT", "ALL_ATTRIBUTES",
                                       "ALL_PROJECTED_ATTRIBUTES", NULL};

#define VERR_MAX 10

void wire_verr_add(wire_verrs *e, const char *value, const char *path, const char *fmt, ...)
{
	if (e->n >= VERR_MAX)
		return;
	char constraint[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(constraint, sizeof(constraint), fmt, ap);
	va_end(ap);
	size_t room = sizeof(e->buf) - e->len;
	int w;
	if (value != NULL)
		w = snprintf(e->buf + e->len, room,
		             "%sValue '%s' at '%s' failed to satisfy constraint: %s",
		             e->n > 0 ? "; " : "", value, path, constraint);
	else
		w = snprintf(e->buf + e->len, room,
		             "%sValue null at '%s' failed to satisfy constraint: %s",
		             e->n > 0 ? "; " : "", path, constraint);
	if (w > 0)
		e->len += (size_t)w < room ? (size_t)w : room - 1;
	e->n++;
}

int wire_verr_done(const wire_verrs *e, char *errmsg)
{
	if (e->n == 0)
		return SHOAL_OK;
	return sh_errf(errmsg, SHOAL_E_VALIDATION, "%d validation error%s detected: %s", e->n,
	               e->n > 1 ? "s" : "", e->buf);
}

int wire_check_expr_params(bool names, bool values, bool any_expr, bool any_val_expr,
                           const char *val_exprs, bool plural, char *errmsg)
{
	if (names && !any_expr)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ExpressionAttributeNames can only be specified when using "
		               "expressions");
	if (values && val_exprs != NULL && !any_val_expr)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "ExpressionAttributeValues can only be specified when using "
		               "expressions: %s %s null",
		               val_exprs, plural ? "are" : "is");
	return SHOAL_OK;
}

void wire_check_present(wire_verrs *e, const char *path, bool present)
{
	if (!present)
		wire_verr_add(e, NULL, path, "Member must not be null");
}

size_t wire_char_len(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

bool wire_name_chars_ok(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s; s++) {
		char c = *s;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

void wire_check_name(wire_verrs *e, const char *path, const char *name, bool required)
{
	if (name == NULL) {
		if (required)
			wire_check_present(e, path, false);
		return;
	}
	if (!wire_name_chars_ok(name))
		wire_verr_add(e, name, path,
		              "Member must satisfy regular expression pattern: " WIRE_NAME_PATTERN);
	size_t n = wire_char_len(name);
	if (n < ST_TABLE_NAME_MIN)
		wire_verr_add(e, name, path, "Member must have length greater than or equal to %d",
		              ST_TABLE_NAME_MIN);
	if (n > ST_TABLE_NAME_MAX)
		wire_verr_add(e, name, path, "Member must have length less than or equal to %d",
		              ST_TABLE_NAME_MAX);
}

void wire_check_enum(wire_verrs *e, const char *path, const char *s, const char *const *set)
{
	if (s == NULL)
		return;
	char list[256];
	size_t len = 0;
	for (const char *const *p = set; *p != NULL; p++) {
		if (strcmp(*p, s) == 0)
			return;
		int w = snprintf(list + len, sizeof(list) - len, "%s%s", p == set ? "" : ", ", *p);
		if (w > 0 && (size_t)w < sizeof(list) - len)
			len += (size_t)w;
	}
	wire_verr_add(e, s, path, "Member must satisfy enum value set: [%s]", list);
}

void wire_check_min(wire_verrs *e, const char *path, bool present, long long v, long long min)
{
	if (present && v < min) {
		char value[32];
		snprintf(value, sizeof(value), "%lld", v);
		wire_verr_add(e, value, path,
		              "Member must have value greater than or equal to %lld", min);
	}
}

void wire_check_max(wire_verrs *e, const char *path, bool present, long long v, long long max)
{
	if (present && v > max) {
		char value[32];
		snprintf(value, sizeof(value), "%lld", v);
		wire_verr_add(e, value, path, "Member must have value less than or equal to %lld",
		              max);
	}
}

int wire_dup(sh_arena *a, const char *s, const char **out, char *errmsg)
{
	*out = NULL;
	if (s == NULL)
		return SHOAL_OK;
	char *d = sh_arena_strndup(a, s, strlen(s));
	if (d == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory copying a request");
	*out = d;
	return SHOAL_OK;
}

const char *wire_rv_name(st_return_values rv)
{
	switch (rv) {
	case ST_RV_ALL_OLD:
		return "ALL_OLD";
	case ST_RV_UPDATED_OLD:
		return "UPDATED_OLD";
	case ST_RV_ALL_NEW:
		return "ALL_NEW";
	case ST_RV_UPDATED_NEW:
		return "UPDATED_NEW";
	default:
		return "NONE";
	}
}

const char *wire_select_name(st_select s)
{
	switch (s) {
	case ST_SELECT_ALL_ATTRIBUTES:
		return "ALL_ATTRIBUTES";
	case ST_SELECT_ALL_PROJECTED_ATTRIBUTES:
		return "ALL_PROJECTED_ATTRIBUTES";
	case ST_SELECT_SPECIFIC_ATTRIBUTES:
		return "SPECIFIC_ATTRIBUTES";
	case ST_SELECT_COUNT:
		return "COUNT";
	default:
		return NULL;
	}
}

/* ------------------------------------------------------------------------ */
/* Values of a request                                                       */
/* ------------------------------------------------------------------------ */

static int new_item(sh_arena *a, const Shoal__Item *pb, st_value **out, char *errmsg)
{
	st_value *v = sh_arena_alloc(a, sizeof(*v));
	if (v == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory converting a request");
	*out = v;
	return wire_item_from_pb(a, pb, v, errmsg);
}

int wire_norm_item(sh_arena *a, const Shoal__Item *pb, const st_value **out, char *errmsg)
{
	*out = NULL;
	if (pb == NULL)
		return SHOAL_OK;
	st_value *v = NULL;
	int rc = new_item(a, pb, &v, errmsg);
	if (rc == SHOAL_OK)
		rc = st_value_normalize(a, v, errmsg);
	if (rc == SHOAL_OK)
		*out = v;
	return rc;
}

int wire_norm_start_key(sh_arena *a, const Shoal__Item *pb, const st_value **out, char *errmsg)
{
	char msg[SH_ERRMSG_SIZE];
	int rc = wire_norm_item(a, pb, out, msg);
	if (rc == SHOAL_OK)
		return SHOAL_OK;
	if (rc != SHOAL_E_VALIDATION)
		return sh_errf(errmsg, rc, "%s", msg);
	/* DynamoDB leaves the prefix off these (observed; see dynalite). */
	static const char *const bare[] = {"contains duplicates",   "number set",
	                                   "numeric value",         "significant digits",
	                                   "number with magnitude", NULL};
	for (const char *const *p = bare; *p != NULL; p++) {
		if (strstr(msg, *p) != NULL)
			return sh_errf(errmsg, rc, "%s", msg);
	}
	return sh_errf(errmsg, rc, "The provided starting key is invalid: %s", msg);
}

int wire_norm_values(sh_arena *a, const Shoal__Item *pb, const st_value **out, char *errmsg)
{
	*out = NULL;
	if (pb == NULL)
		return SHOAL_OK;
	st_value *v = NULL;
	int rc = new_item(a, pb, &v, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	for (uint32_t i = 0; i < v->u.map.n; i++) {
		/* Each value alone, wrapped in a one-attribute map so that nesting
		 * is counted as for an item's attribute.  The wrapper's name is a
		 * stand-in: placeholders are checked with the whole map below
		 * and by the expression engine. */
		const st_attr *at = &v->u.map.a[i];
		st_attr one = {.name = "v", .name_len = 1, .value = at->value};
		st_value wrap = {.type = ST_M, .u.map = {&one, 1}};
		char msg[SH_ERRMSG_SIZE];
		rc = st_value_normalize(a, &wrap, msg);
		if (rc == SHOAL_E_VALIDATION) {
			int len = at->name_len > 255 ? 255 : (int)at->name_len;
			return sh_errf(
			    errmsg, rc,
			    "ExpressionAttributeValues contains invalid value: %s for key %.*s",
			    msg, len, at->name);
		}
		if (rc != SHOAL_OK)
			return sh_errf(errmsg, rc, "%s", msg);
		v->u.map.a[i].value = one.value;
	}
	/* Now sort the map and refuse repeated placeholders. */
	rc = st_value_normalize(a, v, errmsg);
	if (rc == SHOAL_OK)
		*out = v;
	return rc;
}

int wire_norm_names(sh_arena *a, const Shoal__ExpressionAttributeNames *pb, const st_value **out,
                    char *errmsg)
{
	*out = NULL;
	if (pb == NULL)
		return SHOAL_OK;
	st_value *v = sh_arena_alloc(a, sizeof(*v));
	if (v == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory converting a request");
	int rc = wire_names_from_pb(a, pb, v, errmsg);
	if (rc == SHOAL_OK)
		rc = st_value_normalize(a, v, errmsg);
	if (rc == SHOAL_OK)
		*out = v;
	return rc;
}
