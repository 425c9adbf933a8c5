/*
 * wire_legacy.c -- DynamoDB's legacy conditional parameters (AttributesToGet,
 * Expected, ConditionalOperator, AttributeUpdates, KeyConditions,
 * QueryFilter, ScanFilter), translated into the expressions that replaced
 * them.
 *
 * Design.  A legacy parameter says nothing an expression cannot say, so
 * Shoal has no second evaluator: the JSON body is rewritten, before the
 * schema walker (wire_api_in.c) reads it, into the body a client using
 * expressions would have sent.  The walker calls wire_legacy_rewrite for
 * every request message it fills; for the messages that take legacy
 * parameters (the table below) and carry one, the rewrite returns a shallow
 * copy of the object with the legacy members removed and
 *   AttributesToGet       -> ProjectionExpression  "#p0, #p1"
 *   Expected (+ ConditionalOperator)      -> ConditionExpression
 *   AttributeUpdates      -> UpdateExpression "SET .. REMOVE .. ADD .. DELETE .."
 *   KeyConditions         -> KeyConditionExpression
 *   QueryFilter / ScanFilter (+ ConditionalOperator) -> FilterExpression
 * with every attribute name and value behind a generated placeholder
 * (#<p>N, :<p>N) added to ExpressionAttributeNames / Values.  Legacy names
 * are whole top-level attribute names ("a.b" is one attribute), which is
 * what a #placeholder means, and no reserved word can bite.  <p> is
 * "legacy", lengthened with '_' until no placeholder the client sent starts
 * with it: the client's own names can only be there with KeyConditions plus
 * a FilterExpression or ProjectionExpression (any other mix is refused), and
 * then both sets of placeholders live side by side without collision.  The
 * parser, the key-condition extraction, the evaluator and the update engine
 * in storage/ then build and run the same trees as for expressions, on the
 * HTTP endpoint and in libshoal (the CLI) alike, because both turn JSON into
 * a Request here.  Protobuf clients have no legacy fields: shoal.proto
 * carries expressions only.
 *
 * The operators keep DynamoDB's meaning: NE is true for an absent attribute
 * (as <> is), NOT_CONTAINS false (so it is spelled with attribute_exists),
 * an Expected {Exists: false} is attribute_not_exists, an AttributeUpdates
 * ADD of a list appends to it (list_append, creating it), of a number or a
 * set is ADD, DELETE with a set is DELETE, without a value REMOVE.  The
 * spelling itself is wire_legacy_text.c's.  Conditions are joined with AND
 * (or ConditionalOperator), each in parentheses when there are several.
 *
 * Checks, in DynamoDB's order and words (as dynalite, written against the
 * service, records them): JSON shapes, parameter constraints, mixing with
 * expressions and ConditionalOperator's use first (wire_legacy_check.c),
 * then each parameter's own rules here (operand counts and types,
 * Exists/Value, AttributeUpdates actions, KeyConditions' operators and
 * count, duplicate AttributesToGet).  Validation errors are recorded
 * through wire_api_in_invalid (the walker reports the first one once the
 * whole body deserialised) and the body is then left untranslated.  What
 * the translated expressions then meet is storage's: key-schema checks,
 * runtime type errors, and the expression limits (4 KB of text, 300
 * operators, 100 IN operands), which a very large legacy map can reach
 * where DynamoDB would take it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/wire_legacy_int.h"

#define D(x) &shoal__##x##__descriptor

#define INVALID "One or more parameter values were invalid: "

/* ------------------------------------------------------------------------ */
/* Which operation takes what                                                */
/* ------------------------------------------------------------------------ */

#define JAVA "com.amazonaws.dynamodb.v20120810."

const wire_lg_param wire_lg_params[] = {
    {WIRE_LG_ATG, "AttributesToGet", NULL},
    {WIRE_LG_EXPECTED, "Expected", JAVA "ExpectedAttributeValue"},
    {WIRE_LG_CONDOP, "ConditionalOperator", NULL},
    {WIRE_LG_UPDATES, "AttributeUpdates", JAVA "AttributeValueUpdate"},
    {WIRE_LG_KEYCOND, "KeyConditions", JAVA "Condition"},
    {WIRE_LG_QFILTER, "QueryFilter", JAVA "Condition"},
    {WIRE_LG_SFILTER, "ScanFilter", JAVA "Condition"},
    {0, NULL, NULL},
};

static const wire_lg_op ops[] = {
    {D(get_item_request), {"AttributesToGet", NULL}, {"ProjectionExpression", NULL}},
    {D(table_keys_and_attributes), {"AttributesToGet", NULL}, {"ProjectionExpression", NULL}},
    {D(put_item_request), {"Expected", "ConditionalOperator", NULL}, {"ConditionExpression", NULL}},
    {D(delete_item_request),
     {"Expected", "ConditionalOperator", NULL},
     {"ConditionExpression", NULL}},
    {D(update_item_request),
     {"AttributeUpdates", "Expected", "ConditionalOperator", NULL},
     {"UpdateExpression", "ConditionExpression", NULL}},
    {D(query_request),
     {"AttributesToGet", "QueryFilter", "ConditionalOperator", "KeyConditions", NULL},
     {"ProjectionExpression", "FilterExpression", "KeyConditionExpression", NULL}},
    {D(scan_request),
     {"AttributesToGet", "ScanFilter", "ConditionalOperator", NULL},
     {"ProjectionExpression", "FilterExpression", NULL}},
};

unsigned wire_lg_param_bit(const char *name)
{
	for (const wire_lg_param *p = wire_lg_params; p->name != NULL; p++)
		if (strcmp(p->name, name) == 0)
			return p->bit;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Comparison operators                                                      */
/* ------------------------------------------------------------------------ */

#define CMP_ROW(name, min, max, types, key, kind, text) {name, min, max, types, key, kind, text},
static const wire_lg_cmp cmp_ops[] = {WIRE_LG_CMP_OPS(CMP_ROW)};
#undef CMP_ROW

static const wire_lg_cmp *cmp_op_find(const char *name)
{
	for (size_t i = 0; i < sizeof(cmp_ops) / sizeof(cmp_ops[0]); i++)
		if (strcmp(cmp_ops[i].name, name) == 0)
			return &cmp_ops[i];
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* The rewrite                                                               */
/* ------------------------------------------------------------------------ */

static int nomem(wire_lg *g)
{
	return sh_errf(g->c->errmsg, SHOAL_E_NOMEM, "out of memory translating legacy parameters");
}

void wire_lg_invalid(wire_lg *g, const char *fmt, ...)
{
	char buf[SH_ERRMSG_SIZE];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (!g->failed)
		wire_api_in_invalid(g->c, "%s", buf);
	g->failed = true;
}

json_t *wire_lg_member(const json_t *j, const char *name)
{
	json_t *v = json_object_get(j, name);
	return v != NULL && !json_is_null(v) ? v : NULL;
}

int wire_lg_value_of(wire_lg *g, const json_t *j, bool quiet, st_value *v, bool *ok)
{
	char msg[SH_ERRMSG_SIZE];
	*ok = false;
	int rc = wire_value_from_json(g->c->a, j, v, msg);
	if (rc == SHOAL_OK)
		rc = st_value_normalize(g->c->a, v, msg);
	if (rc == SHOAL_OK) {
		*ok = true;
		return SHOAL_OK;
	}
	if (rc == SHOAL_E_VALIDATION) {
		if (!quiet)
			wire_lg_invalid(g, "%s", msg);
		return SHOAL_OK;
	}
	return sh_errf(g->c->errmsg, rc, "%s", msg);
}

/* ------------------------------------------------------------------------ */
/* Translation, with each parameter's own checks                             */
/* ------------------------------------------------------------------------ */

/* The operands of a condition, validated as DynamoDB validates an
 * AttributeValueList: each value, their count, one type for all, a type
 * the operator takes, BETWEEN's bounds in order.  A failed check is
 * recorded (g->failed); the return value is for SHOAL_E_NOMEM. */
static int check_operands(wire_lg *g, const wire_lg_cmp *op, json_t *const *vals, size_t n)
{
	st_value *sv = sh_arena_calloc(g->c->a, n > 0 ? n : 1, sizeof(*sv));
	if (sv == NULL)
		return nomem(g);
	for (size_t i = 0; i < n; i++) {
		bool ok;
		int rc = wire_lg_value_of(g, vals[i], false, &sv[i], &ok);
		if (rc != SHOAL_OK || !ok)
			return rc;
	}
	if (n < op->min || n > op->max) {
		wire_lg_invalid(
		    g, INVALID "Invalid number of argument(s) for the %s ComparisonOperator",
		    op->name);
		return SHOAL_OK;
	}
	for (size_t i = 1; i < n; i++) {
		if (sv[i].type != sv[0].type) {
			wire_lg_invalid(g, INVALID
			                "AttributeValues inside AttributeValueList must be of same "
			                "type");
			return SHOAL_OK;
		}
	}
	if (n > 0 && !(op->types & WIRE_LG_T(sv[0].type))) {
		wire_lg_invalid(
		    g, INVALID "ComparisonOperator %s is not valid for %s AttributeValue type",
		    op->name, st_type_name(sv[0].type));
		return SHOAL_OK;
	}
	if (op->kind == WIRE_LG_BETWEEN && st_value_cmp(&sv[0], &sv[1]) > 0)
		wire_lg_invalid(
		    g, "The BETWEEN condition was provided a range where the lower bound is "
		       "greater than the upper bound");
	return SHOAL_OK;
}

/* The AttributeValueList of c (n values in *vals, in the arena). */
static int value_list(wire_lg *g, const json_t *list, json_t ***vals, size_t *n)
{
	size_t cap = json_array_size(list);
	*vals = sh_arena_calloc(g->c->a, cap > 0 ? cap : 1, sizeof(**vals));
	if (*vals == NULL)
		return nomem(g);
	*n = 0;
	size_t i;
	json_t *v;
	json_array_foreach(list, i, v)
	{
		if (!json_is_null(v))
			(*vals)[(*n)++] = v;
	}
	return SHOAL_OK;
}

/* Conditions joined by `join` into *out (NULL when the map is empty).
 * Expected is an ExpectedAttributeValue map, the others Condition maps;
 * key: KeyConditions. */
static int translate_conditions(wire_lg *g, const char *param, const char *join, const char **out)
{
	json_t *map = wire_lg_member(g->in, param);
	bool expected = strcmp(param, "Expected") == 0;
	bool key = strcmp(param, "KeyConditions") == 0;
	size_t count = json_object_size(map);
	wire_lg_text b = {.a = g->c->a};
	const char *name;
	json_t *c;
	*out = NULL;
	json_object_foreach(map, name, c)
	{
		if (json_is_null(c))
			continue;
		const json_t *opj = wire_lg_member(c, "ComparisonOperator");
		json_t *list = wire_lg_member(c, "AttributeValueList");
		/* Only ExpectedAttributeValue has a Value. */
		json_t *value = expected ? wire_lg_member(c, "Value") : NULL;
		json_t **vals = NULL;
		size_t n = 0;
		const wire_lg_cmp *op = opj != NULL ? cmp_op_find(json_string_value(opj)) : NULL;
		int rc = SHOAL_OK;
		if (expected && list != NULL && value != NULL) {
			wire_lg_invalid(g,
			                INVALID
			                "Value and AttributeValueList cannot be used together for "
			                "Attribute: %s",
			                name);
			return SHOAL_OK;
		}
		if (expected && opj == NULL) {
			/* The Exists / Value form. */
			const json_t *ex = wire_lg_member(c, "Exists");
			protobuf_c_boolean exists = 1;
			if (ex != NULL)
				wire_api_bool_from_json(g->c, ex, &exists);
			if (list != NULL) {
				wire_lg_invalid(g,
				                INVALID
				                "AttributeValueList can only be used with a "
				                "ComparisonOperator for Attribute: %s",
				                name);
				return SHOAL_OK;
			}
			if (exists && value == NULL) {
				wire_lg_invalid(g,
				                INVALID
				                "Value must be provided when Exists is %s for "
				                "Attribute: %s",
				                ex == NULL ? "null" : "true", name);
				return SHOAL_OK;
			}
			if (!exists && value != NULL) {
				wire_lg_invalid(g,
				                INVALID
				                "Value cannot be used when Exists is false for "
				                "Attribute: %s",
				                name);
				return SHOAL_OK;
			}
			op = cmp_op_find(exists ? "EQ" : "NULL");
			if (value != NULL) {
				st_value v;
				bool ok;
				rc = wire_lg_value_of(g, value, false, &v, &ok);
				if (rc != SHOAL_OK || !ok)
					return rc;
				vals = &value;
				n = 1;
			}
		} else {
			if (expected && wire_lg_member(c, "Exists") != NULL) {
				wire_lg_invalid(g,
				                INVALID
				                "Exists and ComparisonOperator cannot be used "
				                "together for Attribute: %s",
				                name);
				return SHOAL_OK;
			}
			if (expected && list == NULL && value == NULL && op->min > 0) {
				wire_lg_invalid(g,
				                INVALID
				                "Value or AttributeValueList must be used with "
				                "ComparisonOperator: %s for Attribute: %s",
				                op->name, name);
				return SHOAL_OK;
			}
			if (list != NULL)
				rc = value_list(g, list, &vals, &n);
			else if (value != NULL) {
				vals = &value;
				n = 1;
			}
			if (rc == SHOAL_OK)
				rc = check_operands(g, op, vals, n);
			if (rc != SHOAL_OK || g->failed)
				return rc;
		}
		if (key && !op->key) {
			wire_lg_invalid(
			    g, "Attempted conditional constraint is not an indexable operation");
			return SHOAL_OK;
		}
		if (b.len > 0) {
			wire_lg_str(&b, " ");
			wire_lg_str(&b, join);
			wire_lg_str(&b, " ");
		}
		/* NOT_CONTAINS is spelled in parentheses of its own: a second
		 * pair would be "redundant parentheses" to the parser. */
		bool paren = count > 1 && !key && op->kind != WIRE_LG_NOT_CONTAINS;
		if (paren)
			wire_lg_str(&b, "(");
		rc = wire_lg_condition(&g->ph, &b, name, op, vals, n);
		if (rc != SHOAL_OK)
			return rc;
		if (paren)
			wire_lg_str(&b, ")");
	}
	if (key && (count < 1 || count > 2)) {
		wire_lg_invalid(g, "Conditions can be of length 1 or 2 only");
		return SHOAL_OK;
	}
	if (b.oom)
		return nomem(g);
	*out = b.len > 0 ? b.p : NULL;
	return SHOAL_OK;
}

/* AttributeUpdates -> an UpdateExpression (NULL when empty). */
static int translate_updates(wire_lg *g, const char **out)
{
	wire_lg_update u;
	wire_lg_update_init(&u, g->c->a);
	const char *name;
	json_t *e;
	*out = NULL;
	json_object_foreach(wire_lg_member(g->in, "AttributeUpdates"), name, e)
	{
		if (json_is_null(e))
			continue;
		const json_t *aj = wire_lg_member(e, "Action");
		const char *action = aj != NULL ? json_string_value(aj) : "PUT";
		json_t *value = wire_lg_member(e, "Value");
		st_value v;
		bool ok = false;
		if (value != NULL) {
			int rc = wire_lg_value_of(g, value, false, &v, &ok);
			if (rc != SHOAL_OK || !ok)
				return rc;
		}
		bool del = strcmp(action, "DELETE") == 0, add = strcmp(action, "ADD") == 0;
		if (value == NULL && !del) {
			wire_lg_invalid(g, INVALID
			                "Only DELETE action is allowed when no attribute value is "
			                "specified");
			return SHOAL_OK;
		}
		bool set_type =
		    value != NULL && (v.type == ST_SS || v.type == ST_NS || v.type == ST_BS);
		if (value != NULL && del && !set_type) {
			wire_lg_invalid(
			    g, INVALID "DELETE action with value is not supported for the type %s",
			    st_type_name(v.type));
			return SHOAL_OK;
		}
		if (value != NULL && add && !set_type && v.type != ST_N && v.type != ST_L) {
			wire_lg_invalid(g, INVALID "ADD action is not supported for the type %s",
			                st_type_name(v.type));
			return SHOAL_OK;
		}
		wire_lg_action act = del    ? (value != NULL ? WIRE_LG_DELETE : WIRE_LG_REMOVE)
		                     : !add ? WIRE_LG_SET
		                     : v.type == ST_L ? WIRE_LG_APPEND
		                                      : WIRE_LG_ADD;
		int rc = wire_lg_update_add(&g->ph, &u, act, name, value);
		if (rc != SHOAL_OK)
			return rc;
	}
	return wire_lg_update_text(&g->ph, &u, out);
}

static int translate_projection(wire_lg *g, const char **out)
{
	json_t *list = wire_lg_member(g->in, "AttributesToGet");
	wire_lg_text b = {.a = g->c->a};
	size_t i, k;
	json_t *s, *t;
	*out = NULL;
	json_array_foreach(list, i, s)
	{
		for (k = 0; k < i; k++) {
			t = json_array_get(list, k);
			if (json_equal(s, t)) {
				wire_lg_invalid(g, INVALID "Duplicate value in attribute name: %s",
				                json_string_value(s));
				return SHOAL_OK;
			}
		}
	}
	json_array_foreach(list, i, s)
	{
		if (i > 0)
			wire_lg_str(&b, ", ");
		int rc = wire_lg_name(&g->ph, &b, json_string_value(s), json_string_length(s));
		if (rc != SHOAL_OK)
			return rc;
	}
	*out = b.len > 0 ? b.p : NULL;
	return SHOAL_OK;
}

/* Sets member `name` of out to text (nothing when NULL). */
static int set_text(wire_lg *g, json_t *out, const char *name, const char *text)
{
	if (text == NULL)
		return SHOAL_OK;
	json_t *s = json_string(text);
	if (s == NULL || json_object_set_new(out, name, s) != 0)
		return nomem(g);
	return SHOAL_OK;
}

/* The copy of the body with expressions instead of legacy parameters. */
static int translate(wire_lg *g, json_t **out)
{
	const char *projection = NULL, *update = NULL, *condition = NULL, *keycond = NULL,
	           *filter = NULL;
	const char *condop = g->present & WIRE_LG_CONDOP
	                         ? json_string_value(wire_lg_member(g->in, "ConditionalOperator"))
	                         : "AND";
	const char *join = strcmp(condop, "OR") == 0 ? "OR" : "AND";
	int rc = SHOAL_OK;
	if (g->present & WIRE_LG_ATG)
		rc = translate_projection(g, &projection);
	if (rc == SHOAL_OK && !g->failed && g->present & WIRE_LG_UPDATES)
		rc = translate_updates(g, &update);
	if (rc == SHOAL_OK && !g->failed && g->present & WIRE_LG_EXPECTED)
		rc = translate_conditions(g, "Expected", join, &condition);
	if (rc == SHOAL_OK && !g->failed && g->present & WIRE_LG_QFILTER)
		rc = translate_conditions(g, "QueryFilter", join, &filter);
	if (rc == SHOAL_OK && !g->failed && g->present & WIRE_LG_SFILTER)
		rc = translate_conditions(g, "ScanFilter", join, &filter);
	if (rc == SHOAL_OK && !g->failed && g->present & WIRE_LG_KEYCOND)
		rc = translate_conditions(g, "KeyConditions", "AND", &keycond);
	if (rc != SHOAL_OK || g->failed)
		return rc;

	json_t *o = wire_lg_copy_object(g->in);
	if (o == NULL)
		return nomem(g);
	for (const wire_lg_param *p = wire_lg_params; p->name != NULL; p++)
		json_object_del(o, p->name);
	rc = set_text(g, o, "ProjectionExpression", projection);
	if (rc == SHOAL_OK)
		rc = set_text(g, o, "UpdateExpression", update);
	if (rc == SHOAL_OK)
		rc = set_text(g, o, "ConditionExpression", condition);
	if (rc == SHOAL_OK)
		rc = set_text(g, o, "KeyConditionExpression", keycond);
	if (rc == SHOAL_OK)
		rc = set_text(g, o, "FilterExpression", filter);
	if (rc == SHOAL_OK && json_object_size(g->ph.names) > 0 &&
	    json_object_set(o, "ExpressionAttributeNames", g->ph.names) != 0)
		rc = nomem(g);
	if (rc == SHOAL_OK && json_object_size(g->ph.values) > 0 &&
	    json_object_set(o, "ExpressionAttributeValues", g->ph.values) != 0)
		rc = nomem(g);
	if (rc != SHOAL_OK) {
		json_decref(o);
		return rc;
	}
	*out = o;
	return SHOAL_OK;
}

int wire_legacy_rewrite(wire_api_in *c, const ProtobufCMessageDescriptor *desc, const json_t *j,
                        json_t **out)
{
	*out = NULL;
	const wire_lg_op *op = NULL;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (ops[i].desc == desc)
			op = &ops[i];
	if (op == NULL || !json_is_object(j))
		return SHOAL_OK;
	wire_lg g = {.c = c, .op = op, .in = j};
	for (const char *const *n = op->nonexpr; *n != NULL; n++)
		if (wire_lg_member(j, *n) != NULL)
			g.present |= wire_lg_param_bit(*n);
	if (g.present == 0)
		return SHOAL_OK;
	/* The client's placeholders are merged with ours: when they are not
	 * maps, leave the body to the walker, whose SerializationException
	 * says so. */
	const json_t *un = wire_lg_member(j, "ExpressionAttributeNames");
	const json_t *uv = wire_lg_member(j, "ExpressionAttributeValues");
	if ((un != NULL && !json_is_object(un)) || (uv != NULL && !json_is_object(uv)))
		return SHOAL_OK;

	int rc = wire_lg_check_shapes(&g);
	if (rc != SHOAL_OK)
		return rc;
	wire_lg_check_constraints(&g);
	if (!g.failed)
		wire_lg_check_mixing(&g);
	if (!g.failed)
		wire_lg_check_condop(&g);
	if (g.failed)
		return SHOAL_OK;
	rc = wire_lg_ph_init(&g.ph, c->a, un, uv, c->errmsg);
	if (rc == SHOAL_OK)
		rc = translate(&g, out);
	wire_lg_ph_fini(&g.ph);
	return rc;
}
