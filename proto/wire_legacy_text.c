/*
 * wire_legacy_text.c -- the spelling of the expressions that replace legacy
 * parameters (wire_legacy.c decides what they say).
 *
 * Every attribute name and value goes behind a placeholder of its own,
 * "#<prefix>N" / ":<prefix>N", numbered in the order of the request, so the
 * text is the same for the same body and a legacy attribute name is taken
 * whole ("a.b" is one attribute, "status" no reserved word).  The prefix is
 * "legacy", with '_' appended until none of the client's placeholders
 * starts with it.  Spellings, per operator kind:
 *   BINARY        #a = :v   (=, <>, <, <=, >, >=)
 *   EXISTS        attribute_exists(#a)
 *   NOT_EXISTS    attribute_not_exists(#a)
 *   FUNC          contains(#a, :v), begins_with(#a, :v)
 *   NOT_CONTAINS  (attribute_exists(#a) AND NOT contains(#a, :v)), one
 *                 placeholder for both mentions
 *   IN            #a IN (:v1, :v2)
 *   BETWEEN       #a BETWEEN :lo AND :hi
 * and for updates "SET #a = :v, #l = list_append(if_not_exists(#l, :e),
 * :w) REMOVE #r ADD #n :x DELETE #s :y", :e being an empty list.
 */
#include <stdio.h>
#include <string.h>

#include "proto/wire_legacy_int.h"

static int nomem(wire_lg_ph *ph)
{
	return sh_errf(ph->errmsg, SHOAL_E_NOMEM, "out of memory translating legacy parameters");
}

void wire_lg_add(wire_lg_text *t, const char *s, size_t n)
{
	if (t->oom)
		return;
	if (t->len + n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 64;
		while (t->len + n + 1 > cap)
			cap *= 2;
		char *p = sh_arena_alloc(t->a, cap);
		if (p == NULL) {
			t->oom = true;
			return;
		}
		if (t->len > 0)
			memcpy(p, t->p, t->len);
		t->p = p;
		t->cap = cap;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

void wire_lg_str(wire_lg_text *t, const char *s)
{
	wire_lg_add(t, s, strlen(s));
}

/* ------------------------------------------------------------------------ */
/* Placeholders                                                              */
/* ------------------------------------------------------------------------ */

/* Does a key of object m start with "<any char><prefix>"? */
static bool prefix_taken(const json_t *m, const char *prefix)
{
	size_t plen = strlen(prefix);
	const char *k;
	json_t *v;
	if (m == NULL)
		return false;
	json_object_foreach((json_t *)m, k, v)
	{
		(void)v;
		if (k[0] != '\0' && strncmp(k + 1, prefix, plen) == 0)
			return true;
	}
	return false;
}

json_t *wire_lg_copy_object(const json_t *j)
{
	json_t *o = json_object();
	const char *k;
	json_t *v;
	if (j == NULL)
		return o;
	json_object_foreach((json_t *)j, k, v)
	{
		if (o != NULL && json_object_set(o, k, v) != 0) {
			json_decref(o);
			o = NULL;
		}
	}
	return o;
}

int wire_lg_ph_init(wire_lg_ph *ph, sh_arena *a, const json_t *names, const json_t *values,
                    char *errmsg)
{
	memset(ph, 0, sizeof(*ph));
	ph->a = a;
	ph->errmsg = errmsg;
	snprintf(ph->prefix, sizeof(ph->prefix), "legacy");
	while ((prefix_taken(names, ph->prefix) || prefix_taken(values, ph->prefix)) &&
	       strlen(ph->prefix) + 2 < sizeof(ph->prefix))
		strcat(ph->prefix, "_");
	ph->names = wire_lg_copy_object(names);
	ph->values = wire_lg_copy_object(values);
	return ph->names != NULL && ph->values != NULL ? SHOAL_OK : nomem(ph);
}

void wire_lg_ph_fini(wire_lg_ph *ph)
{
	json_decref(ph->names);
	json_decref(ph->values);
	ph->names = ph->values = NULL;
}

int wire_lg_name(wire_lg_ph *ph, wire_lg_text *t, const char *name, size_t len)
{
	char key[64];
	snprintf(key, sizeof(key), "#%s%u", ph->prefix, ph->nnames++);
	json_t *s = json_stringn(name, len);
	if (s == NULL || json_object_set_new(ph->names, key, s) != 0)
		return nomem(ph);
	wire_lg_str(t, key);
	return t->oom ? nomem(ph) : SHOAL_OK;
}

int wire_lg_value(wire_lg_ph *ph, wire_lg_text *t, json_t *v)
{
	char key[64];
	snprintf(key, sizeof(key), ":%s%u", ph->prefix, ph->nvalues++);
	if (json_object_set(ph->values, key, v) != 0)
		return nomem(ph);
	wire_lg_str(t, key);
	return t->oom ? nomem(ph) : SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Conditions                                                                */
/* ------------------------------------------------------------------------ */

int wire_lg_condition(wire_lg_ph *ph, wire_lg_text *t, const char *name, const wire_lg_cmp *op,
                      json_t *const *vals, size_t n)
{
	size_t len = strlen(name);
	size_t mark;
	int rc = SHOAL_OK;
	switch (op->kind) {
	case WIRE_LG_BINARY:
		rc = wire_lg_name(ph, t, name, len);
		wire_lg_str(t, " ");
		wire_lg_str(t, op->text);
		wire_lg_str(t, " ");
		if (rc == SHOAL_OK)
			rc = wire_lg_value(ph, t, vals[0]);
		break;
	case WIRE_LG_EXISTS:
	case WIRE_LG_NOT_EXISTS:
		wire_lg_str(t, op->kind == WIRE_LG_EXISTS ? "attribute_exists("
		                                          : "attribute_not_exists(");
		rc = wire_lg_name(ph, t, name, len);
		wire_lg_str(t, ")");
		break;
	case WIRE_LG_FUNC:
		wire_lg_str(t, op->text);
		wire_lg_str(t, "(");
		rc = wire_lg_name(ph, t, name, len);
		wire_lg_str(t, ", ");
		if (rc == SHOAL_OK)
			rc = wire_lg_value(ph, t, vals[0]);
		wire_lg_str(t, ")");
		break;
	case WIRE_LG_NOT_CONTAINS: {
		/* Absent is false, as DynamoDB's NOT_CONTAINS answers: NOT
		 * contains() alone would be true. */
		wire_lg_str(t, "(attribute_exists(");
		mark = t->len;
		rc = wire_lg_name(ph, t, name, len);
		if (rc != SHOAL_OK)
			break;
		char key[64];
		snprintf(key, sizeof(key), "%.*s", (int)(t->len - mark), t->p + mark);
		wire_lg_str(t, ") AND NOT contains(");
		wire_lg_str(t, key);
		wire_lg_str(t, ", ");
		rc = wire_lg_value(ph, t, vals[0]);
		wire_lg_str(t, "))");
		break;
	}
	case WIRE_LG_IN:
		rc = wire_lg_name(ph, t, name, len);
		wire_lg_str(t, " IN (");
		for (size_t i = 0; i < n && rc == SHOAL_OK; i++) {
			if (i > 0)
				wire_lg_str(t, ", ");
			rc = wire_lg_value(ph, t, vals[i]);
		}
		wire_lg_str(t, ")");
		break;
	case WIRE_LG_BETWEEN:
		rc = wire_lg_name(ph, t, name, len);
		wire_lg_str(t, " BETWEEN ");
		if (rc == SHOAL_OK)
			rc = wire_lg_value(ph, t, vals[0]);
		wire_lg_str(t, " AND ");
		if (rc == SHOAL_OK)
			rc = wire_lg_value(ph, t, vals[1]);
		break;
	}
	if (rc == SHOAL_OK && t->oom)
		rc = nomem(ph);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Updates                                                                   */
/* ------------------------------------------------------------------------ */

enum { C_SET, C_REMOVE, C_ADD, C_DELETE, N_CLAUSES };

static const char *const keywords[N_CLAUSES] = {"SET ", "REMOVE ", "ADD ", "DELETE "};

void wire_lg_update_init(wire_lg_update *u, sh_arena *a)
{
	memset(u, 0, sizeof(*u));
	for (int i = 0; i < N_CLAUSES; i++)
		u->clause[i].a = a;
}

int wire_lg_update_add(wire_lg_ph *ph, wire_lg_update *u, wire_lg_action action, const char *name,
                       json_t *value)
{
	int which = action == WIRE_LG_SET || action == WIRE_LG_APPEND ? C_SET
	            : action == WIRE_LG_REMOVE                        ? C_REMOVE
	            : action == WIRE_LG_ADD                           ? C_ADD
	                                                              : C_DELETE;
	wire_lg_text *t = &u->clause[which];
	wire_lg_str(t, t->len > 0 ? ", " : keywords[which]);
	size_t mark = t->len;
	int rc = wire_lg_name(ph, t, name, strlen(name));
	if (rc != SHOAL_OK || action == WIRE_LG_REMOVE)
		return rc;
	if (action == WIRE_LG_APPEND) {
		/* Appending creates the list when there is none. */
		char key[64];
		snprintf(key, sizeof(key), "%.*s", (int)(t->len - mark), t->p + mark);
		wire_lg_str(t, " = list_append(if_not_exists(");
		wire_lg_str(t, key);
		wire_lg_str(t, ", ");
		json_t *empty = json_pack("{s:[]}", "L");
		if (empty == NULL)
			return nomem(ph);
		rc = wire_lg_value(ph, t, empty);
		json_decref(empty);
		wire_lg_str(t, "), ");
	} else {
		wire_lg_str(t, action == WIRE_LG_SET ? " = " : " ");
	}
	if (rc == SHOAL_OK)
		rc = wire_lg_value(ph, t, value);
	if (action == WIRE_LG_APPEND)
		wire_lg_str(t, ")");
	if (rc == SHOAL_OK && t->oom)
		rc = nomem(ph);
	return rc;
}

int wire_lg_update_text(wire_lg_ph *ph, wire_lg_update *u, const char **out)
{
	wire_lg_text all = {.a = u->clause[0].a};
	*out = NULL;
	for (int i = 0; i < N_CLAUSES; i++) {
		if (u->clause[i].oom)
			return nomem(ph);
		if (u->clause[i].len == 0)
			continue;
		if (all.len > 0)
			wire_lg_str(&all, " ");
		wire_lg_add(&all, u->clause[i].p, u->clause[i].len);
	}
	if (all.oom)
		return nomem(ph);
	*out = all.len > 0 ? all.p : NULL;
	return SHOAL_OK;
}
