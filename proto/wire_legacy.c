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
 * service, records them): JSON shapes first (SerializationException, at
 * once), then parameter constraints (enums, AttributesToGet's length,
 * collected "N validation errors detected"), then mixing expression and
 * non-expression parameters, ExpressionAttributeNames/Values without an
 * expression, ConditionalOperator's use, then each parameter's own rules
 * (operand counts and types, Exists/Value, AttributeUpdates actions).
 * Validation errors are recorded through wire_api_in_invalid (the walker
 * reports the first one once the whole body deserialised) and the body is
 * then left untranslated.  What the translated expressions then meet is
 * storage's: key-schema checks, runtime type errors, and the expression
 * limits (4 KB of text, 300 operators, 100 IN operands), which a very large
 * legacy map can reach where DynamoDB would take it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/wire_legacy_int.h"

#define D(x) &shoal__##x##__descriptor

#define INVALID "One or more parameter values were invalid: "
#define JAVA    "com.amazonaws.dynamodb.v20120810."

/* ------------------------------------------------------------------------ */
/* Which operation takes what                                                */
/* ------------------------------------------------------------------------ */

/* The legacy parameters. */
enum {
	P_ATG = 1u << 0,      /* AttributesToGet */
	P_EXPECTED = 1u << 1, /* Expected */
	P_CONDOP = 1u << 2,   /* ConditionalOperator */
	P_UPDATES = 1u << 3,  /* AttributeUpdates */
	P_KEYCOND = 1u << 4,  /* KeyConditions */
	P_QFILTER = 1u << 5,  /* QueryFilter */
	P_SFILTER = 1u << 6,  /* ScanFilter */
};

static const struct {
	unsigned bit;
	const char *name;
} params[] = {
    {P_ATG, "AttributesToGet"},        {P_EXPECTED, "Expected"},
    {P_CONDOP, "ConditionalOperator"}, {P_UPDATES, "AttributeUpdates"},
    {P_KEYCOND, "KeyConditions"},      {P_QFILTER, "QueryFilter"},
    {P_SFILTER, "ScanFilter"},
};

typedef struct legacy_op {
	const ProtobufCMessageDescriptor *desc;
	/* Non-expression and expression parameters, in the order DynamoDB names
	 * them in "Can not use both ..." (NULL-terminated). */
	const char *nonexpr[5];
	const char *expr[4];
	/* "ExpressionAttributeValues can only be specified when using
	 * expressions: <values_null> is/are null"; NULL: no values. */
	const char *values_null;
	bool plural;
} legacy_op;

static const legacy_op ops[] = {
    {D(get_item_request), {"AttributesToGet", NULL}, {"ProjectionExpression", NULL}, NULL, false},
    {D(table_keys_and_attributes),
     {"AttributesToGet", NULL},
     {"ProjectionExpression", NULL},
     NULL,
     false},
    {D(put_item_request),
     {"Expected", "ConditionalOperator", NULL},
     {"ConditionExpression", NULL},
     "ConditionExpression",
     false},
    {D(delete_item_request),
     {"Expected", "ConditionalOperator", NULL},
     {"ConditionExpression", NULL},
     "ConditionExpression",
     false},
    {D(update_item_request),
     {"AttributeUpdates", "Expected", "ConditionalOperator", NULL},
     {"UpdateExpression", "ConditionExpression", NULL},
     "UpdateExpression and ConditionExpression",
     true},
    {D(query_request),
     {"AttributesToGet", "QueryFilter", "ConditionalOperator", "KeyConditions", NULL},
     {"ProjectionExpression", "FilterExpression", "KeyConditionExpression", NULL},
     "FilterExpression and KeyConditionExpression",
     true},
    {D(scan_request),
     {"AttributesToGet", "ScanFilter", "ConditionalOperator", NULL},
     {"ProjectionExpression", "FilterExpression", NULL},
     "FilterExpression",
     false},
};

static unsigned param_bit(const char *name)
{
	for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++)
		if (strcmp(params[i].name, name) == 0)
			return params[i].bit;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Comparison operators                                                      */
/* ------------------------------------------------------------------------ */

#define T(t)    (1u << (t))
#define T_SNB   (T(ST_S) | T(ST_N) | T(ST_B))
#define T_ANY   0xffffu
#define NO_MAX  1000000u
#define KEY_OK  true
#define KEY_BAD false

/* The comparison operators, with DynamoDB's rules for their operands (its
 * API reference: "EQ ... is supported for all data types, including lists
 * and maps"; ordered comparisons, IN and BETWEEN take String, Number or
 * Binary; BEGINS_WITH String or Binary; CONTAINS "String, Number, or Binary
 * (not a set type)") and whether a Query key condition may use them. */
static const wire_lg_cmp cmp_ops[] = {
    {"EQ", 1, 1, T_ANY, KEY_OK, WIRE_LG_BINARY, "="},
    {"NE", 1, 1, T_ANY, KEY_BAD, WIRE_LG_BINARY, "<>"},
    {"LE", 1, 1, T_SNB, KEY_OK, WIRE_LG_BINARY, "<="},
    {"LT", 1, 1, T_SNB, KEY_OK, WIRE_LG_BINARY, "<"},
    {"GE", 1, 1, T_SNB, KEY_OK, WIRE_LG_BINARY, ">="},
    {"GT", 1, 1, T_SNB, KEY_OK, WIRE_LG_BINARY, ">"},
    {"NOT_NULL", 0, 0, 0, KEY_BAD, WIRE_LG_EXISTS, NULL},
    {"NULL", 0, 0, 0, KEY_BAD, WIRE_LG_NOT_EXISTS, NULL},
    {"CONTAINS", 1, 1, T_SNB, KEY_BAD, WIRE_LG_FUNC, "contains"},
    {"NOT_CONTAINS", 1, 1, T_SNB, KEY_BAD, WIRE_LG_NOT_CONTAINS, NULL},
    {"BEGINS_WITH", 1, 1, T(ST_S) | T(ST_B), KEY_OK, WIRE_LG_FUNC, "begins_with"},
    {"IN", 1, NO_MAX, T_SNB, KEY_BAD, WIRE_LG_IN, NULL},
    {"BETWEEN", 2, 2, T_SNB, KEY_OK, WIRE_LG_BETWEEN, NULL},
};

/* DynamoDB's order of the enums in its messages. */
static const char *const cmp_set[] = {"IN",          "NULL", "BETWEEN",  "LT", "NOT_CONTAINS",
                                      "EQ",          "GT",   "NOT_NULL", "NE", "LE",
                                      "BEGINS_WITH", "GE",   "CONTAINS", NULL};
static const char *const condop_set[] = {"OR", "AND", NULL};
static const char *const action_set[] = {"ADD", "PUT", "DELETE", NULL};

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

typedef struct lg {
	wire_api_in *c;
	const legacy_op *op;
	const json_t *in;
	unsigned present; /* P_* bits given (not null) */
	bool failed;      /* a validation error was recorded */
	wire_lg_ph ph;    /* the placeholders of the rewritten body */
} lg;

static int nomem(lg *g)
{
	return sh_errf(g->c->errmsg, SHOAL_E_NOMEM, "out of memory translating legacy parameters");
}

static int ser(lg *g, const char *fmt, const char *arg)
{
	return sh_errf(g->c->errmsg, SHOAL_E_SERIALIZATION, fmt, arg);
}

/* Records a validation error (the first one wins); the body stays untranslated. */
static void invalid(lg *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void invalid(lg *g, const char *fmt, ...)
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

/* Member `name` of j when present and not null (jansson's iterators want
 * non-const pointers; nothing here modifies the client's body). */
static json_t *member(const json_t *j, const char *name)
{
	json_t *v = json_object_get(j, name);
	return v != NULL && !json_is_null(v) ? v : NULL;
}

/* "parent.<fmt>" as DynamoDB's constraint paths spell it (cut at size). */
static void path_of(lg *g, char *buf, size_t size, const char *fmt, const char *a, const char *b)
{
	size_t n = 0;
	if (g->c->path[0] != '\0' && (size_t)snprintf(buf, size, "%s.", g->c->path) < size)
		n = strlen(buf);
	if (snprintf(buf + n, size - n, fmt, a, b) >= (int)(size - n))
		buf[size - 1] = '\0';
}

/* An AttributeValue: shapes are SerializationExceptions (returned); an
 * invalid value is recorded unless quiet.  *ok says whether v is usable. */
static int value_of(lg *g, const json_t *j, bool quiet, st_value *v, bool *ok)
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
			invalid(g, "%s", msg);
		return SHOAL_OK;
	}
	return sh_errf(g->c->errmsg, rc, "%s", msg);
}

/* ---- 1. shapes ---------------------------------------------------------- */

static int check_string(lg *g, const json_t *j)
{
	return json_is_string(j) ? SHOAL_OK : wire_api_mismatch(g->c, j, "String");
}

/* A map parameter: a JSON object of objects. */
static int check_map(lg *g, const json_t *j, const char *java)
{
	if (json_is_array(j))
		return ser(g, "Unrecognized collection type java.util.Map<java.lang.String, %s>",
		           java);
	if (!json_is_object(j))
		return ser(g, "%sUnexpected field type", "");
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)j, k, v)
	{
		if (json_is_null(v))
			continue;
		int rc = wire_api_object_check(g->c, v);
		if (rc != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

static int check_value_shape(lg *g, const json_t *j)
{
	st_value v;
	bool ok;
	return value_of(g, j, true, &v, &ok);
}

static int check_value_list(lg *g, const json_t *j)
{
	int rc = wire_api_array_check(g->c, j);
	size_t i;
	json_t *v;
	json_array_foreach(j, i, v)
	{
		if (rc == SHOAL_OK && !json_is_null(v))
			rc = check_value_shape(g, v);
	}
	return rc;
}

/* Expected, AttributeUpdates, Conditions: each entry's members. */
static int check_entries(lg *g, const json_t *map, unsigned bit)
{
	const char *k;
	json_t *e;
	json_object_foreach((json_t *)map, k, e)
	{
		if (json_is_null(e))
			continue;
		json_t *v;
		int rc = SHOAL_OK;
		protobuf_c_boolean b;
		if (rc == SHOAL_OK && (v = member(e, "ComparisonOperator")) != NULL &&
		    bit != P_UPDATES)
			rc = check_string(g, v);
		if (rc == SHOAL_OK && (v = member(e, "AttributeValueList")) != NULL &&
		    bit != P_UPDATES)
			rc = check_value_list(g, v);
		if (rc == SHOAL_OK && (v = member(e, "Value")) != NULL &&
		    (bit == P_EXPECTED || bit == P_UPDATES))
			rc = check_value_shape(g, v);
		if (rc == SHOAL_OK && (v = member(e, "Exists")) != NULL && bit == P_EXPECTED)
			rc = wire_api_bool_from_json(g->c, v, &b);
		if (rc == SHOAL_OK && (v = member(e, "Action")) != NULL && bit == P_UPDATES)
			rc = check_string(g, v);
		if (rc != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

static int check_shapes(lg *g)
{
	json_t *v;
	int rc = SHOAL_OK;
	if ((v = member(g->in, "AttributesToGet")) != NULL && g->present & P_ATG) {
		rc = wire_api_array_check(g->c, v);
		size_t i;
		json_t *s;
		json_array_foreach(v, i, s)
		{
			if (rc == SHOAL_OK && !json_is_null(s))
				rc = check_string(g, s);
		}
	}
	if (rc == SHOAL_OK && g->present & P_CONDOP)
		rc = check_string(g, member(g->in, "ConditionalOperator"));
	static const struct {
		unsigned bit;
		const char *name, *java;
	} maps[] = {
	    {P_EXPECTED, "Expected", JAVA "ExpectedAttributeValue"},
	    {P_UPDATES, "AttributeUpdates", JAVA "AttributeValueUpdate"},
	    {P_KEYCOND, "KeyConditions", JAVA "Condition"},
	    {P_QFILTER, "QueryFilter", JAVA "Condition"},
	    {P_SFILTER, "ScanFilter", JAVA "Condition"},
	};
	for (size_t i = 0; rc == SHOAL_OK && i < sizeof(maps) / sizeof(maps[0]); i++) {
		if (!(g->present & maps[i].bit))
			continue;
		v = member(g->in, maps[i].name);
		rc = check_map(g, v, maps[i].java);
		if (rc == SHOAL_OK)
			rc = check_entries(g, v, maps[i].bit);
	}
	return rc;
}

/* ---- 2. parameter constraints -------------------------------------------- */

static void lower_first(char *dst, size_t size, const char *s)
{
	snprintf(dst, size, "%s", s);
	if (dst[0] >= 'A' && dst[0] <= 'Z')
		dst[0] = (char)(dst[0] - 'A' + 'a');
}

/* "[a, b]", as DynamoDB prints a list in a constraint message. */
static void list_text(const json_t *list, char *buf, size_t size)
{
	size_t k = 0;
	size_t i;
	json_t *s;
	k += (size_t)snprintf(buf, size, "[");
	json_array_foreach(list, i, s)
	{
		if (k >= size)
			break;
		k += (size_t)snprintf(buf + k, size - k, "%s%s", i > 0 ? ", " : "",
		                      json_is_string(s) ? json_string_value(s) : "null");
	}
	if (k < size)
		snprintf(buf + k, size - k, "]");
}

static void check_constraints(lg *g)
{
	wire_verrs e = {0};
	char path[WIRE_API_PATH_MAX + 64];
	json_t *v;
	if ((v = member(g->in, "AttributesToGet")) != NULL) {
		size_t n = json_array_size(v);
		size_t i;
		json_t *s;
		json_array_foreach(v, i, s)
		{
			if (json_is_null(s)) {
				char idx[32];
				snprintf(idx, sizeof(idx), "%zu", i + 1);
				path_of(g, path, sizeof(path), "attributesToGet.%s.member%s", idx,
				        "");
				wire_check_present(&e, path, false);
			}
		}
		if (n < 1 || n > 255) {
			char text[512];
			list_text(v, text, sizeof(text));
			path_of(g, path, sizeof(path), "attributesToGet%s%s", "", "");
			wire_verr_add(&e, text, path, "Member must have length %s to %d",
			              n < 1 ? "greater than or equal" : "less than or equal",
			              n < 1 ? 1 : 255);
		}
	}
	static const struct {
		unsigned bit;
		const char *name;
	} maps[] = {{P_EXPECTED, "Expected"},
	            {P_UPDATES, "AttributeUpdates"},
	            {P_KEYCOND, "KeyConditions"},
	            {P_QFILTER, "QueryFilter"},
	            {P_SFILTER, "ScanFilter"}};
	for (size_t m = 0; m < sizeof(maps) / sizeof(maps[0]); m++) {
		if (!(g->present & maps[m].bit))
			continue;
		char pname[32];
		lower_first(pname, sizeof(pname), maps[m].name);
		const char *k;
		json_t *c;
		json_object_foreach(member(g->in, maps[m].name), k, c)
		{
			char base[64 + 16];
			snprintf(base, sizeof(base), "%s.%%s.member%%s", pname);
			if (json_is_null(c)) {
				path_of(g, path, sizeof(path), base, k, "");
				wire_check_present(&e, path, false);
				continue;
			}
			if (maps[m].bit == P_UPDATES) {
				path_of(g, path, sizeof(path), base, k, ".action");
				wire_check_enum(&e, path, json_string_value(member(c, "Action")),
				                action_set);
				continue;
			}
			path_of(g, path, sizeof(path), base, k, ".comparisonOperator");
			const json_t *op = member(c, "ComparisonOperator");
			if (op == NULL && maps[m].bit != P_EXPECTED)
				wire_check_present(&e, path, false);
			else
				wire_check_enum(&e, path, json_string_value(op), cmp_set);
		}
	}
	if ((v = member(g->in, "ConditionalOperator")) != NULL) {
		path_of(g, path, sizeof(path), "conditionalOperator%s%s", "", "");
		wire_check_enum(&e, path, json_string_value(v), condop_set);
	}
	char msg[SH_ERRMSG_SIZE];
	if (wire_verr_done(&e, msg) != SHOAL_OK)
		invalid(g, "%s", msg);
}

/* ---- 3. expression and non-expression parameters ---------------------------- */

static void check_mixing(lg *g)
{
	const legacy_op *op = g->op;
	char exprs[256] = "", non[256] = "";
	bool any_expr = false, any_val_expr = false;
	for (const char *const *e = op->expr; *e != NULL; e++) {
		if (member(g->in, *e) == NULL)
			continue;
		any_expr = true;
		any_val_expr |= strcmp(*e, "ProjectionExpression") != 0;
		snprintf(exprs + strlen(exprs), sizeof(exprs) - strlen(exprs), "%s%s",
		         exprs[0] != '\0' ? ", " : "", *e);
	}
	if (any_expr) {
		/* KeyConditions may come with a FilterExpression or a
		 * ProjectionExpression, only not with KeyConditionExpression. */
		bool kce = member(g->in, "KeyConditionExpression") != NULL;
		for (const char *const *n = op->nonexpr; *n != NULL; n++) {
			if (!(g->present & param_bit(*n)))
				continue;
			if (strcmp(*n, "KeyConditions") == 0 && !kce)
				continue;
			snprintf(non + strlen(non), sizeof(non) - strlen(non), "%s%s",
			         non[0] != '\0' ? ", " : "", *n);
		}
		if (non[0] != '\0') {
			invalid(g,
			        "Can not use both expression and non-expression parameters in the "
			        "same request: Non-expression parameters: {%s} Expression "
			        "parameters: {%s}",
			        non, exprs);
			return;
		}
	}
	char msg[SH_ERRMSG_SIZE];
	if (wire_check_expr_params(member(g->in, "ExpressionAttributeNames") != NULL,
	                           member(g->in, "ExpressionAttributeValues") != NULL, any_expr,
	                           any_val_expr, op->values_null, op->plural, msg) != SHOAL_OK)
		invalid(g, "%s", msg);
}

/* The map ConditionalOperator combines for this operation. */
static const char *condop_target(const lg *g)
{
	if (g->op->desc == D(query_request))
		return "QueryFilter";
	if (g->op->desc == D(scan_request))
		return "ScanFilter";
	return "Expected";
}

static void check_condop(lg *g)
{
	if (!(g->present & P_CONDOP))
		return;
	json_t *map = member(g->in, condop_target(g));
	if (map == NULL)
		invalid(g, "ConditionalOperator cannot be used without Filter or Expected");
	else if (json_object_size(map) <= 1)
		invalid(g,
		        "ConditionalOperator can only be used when Filter or Expected has two or "
		        "more elements");
}

/* ---- 4. translation ------------------------------------------------------- */

/* The operands of a condition, validated as DynamoDB validates an
 * AttributeValueList: each value, their count, one type for all, a type
 * the operator takes, BETWEEN's bounds in order.  A failed check is
 * recorded (g->failed); the return value is for SHOAL_E_NOMEM. */
static int check_operands(lg *g, const wire_lg_cmp *op, json_t *const *vals, size_t n)
{
	st_value *sv = sh_arena_calloc(g->c->a, n > 0 ? n : 1, sizeof(*sv));
	if (sv == NULL)
		return nomem(g);
	for (size_t i = 0; i < n; i++) {
		bool ok;
		int rc = value_of(g, vals[i], false, &sv[i], &ok);
		if (rc != SHOAL_OK || !ok)
			return rc;
	}
	if (n < op->min || n > op->max) {
		invalid(g, INVALID "Invalid number of argument(s) for the %s ComparisonOperator",
		        op->name);
		return SHOAL_OK;
	}
	for (size_t i = 1; i < n; i++) {
		if (sv[i].type != sv[0].type) {
			invalid(g,
			        INVALID "AttributeValues inside AttributeValueList must be of same "
			                "type");
			return SHOAL_OK;
		}
	}
	if (n > 0 && !(op->types & T(sv[0].type))) {
		invalid(g, INVALID "ComparisonOperator %s is not valid for %s AttributeValue type",
		        op->name, st_type_name(sv[0].type));
		return SHOAL_OK;
	}
	if (op->kind == WIRE_LG_BETWEEN && st_value_cmp(&sv[0], &sv[1]) > 0)
		invalid(g, "The BETWEEN condition was provided a range where the lower bound is "
		           "greater than the upper bound");
	return SHOAL_OK;
}

/* The AttributeValueList of c (n values in *vals, in the arena). */
static int value_list(lg *g, const json_t *list, json_t ***vals, size_t *n)
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
static int translate_conditions(lg *g, const char *param, const char *join, const char **out)
{
	json_t *map = member(g->in, param);
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
		const json_t *opj = member(c, "ComparisonOperator");
		json_t *list = member(c, "AttributeValueList");
		/* Only ExpectedAttributeValue has a Value. */
		json_t *value = expected ? member(c, "Value") : NULL;
		json_t **vals = NULL;
		size_t n = 0;
		const wire_lg_cmp *op = opj != NULL ? cmp_op_find(json_string_value(opj)) : NULL;
		int rc = SHOAL_OK;
		if (expected && list != NULL && value != NULL) {
			invalid(g,
			        INVALID "Value and AttributeValueList cannot be used together for "
			                "Attribute: %s",
			        name);
			return SHOAL_OK;
		}
		if (expected && opj == NULL) {
			/* The Exists / Value form. */
			const json_t *ex = member(c, "Exists");
			protobuf_c_boolean exists = 1;
			if (ex != NULL)
				wire_api_bool_from_json(g->c, ex, &exists);
			if (list != NULL) {
				invalid(g,
				        INVALID "AttributeValueList can only be used with a "
				                "ComparisonOperator for Attribute: %s",
				        name);
				return SHOAL_OK;
			}
			if (exists && value == NULL) {
				invalid(g,
				        INVALID "Value must be provided when Exists is %s for "
				                "Attribute: %s",
				        ex == NULL ? "null" : "true", name);
				return SHOAL_OK;
			}
			if (!exists && value != NULL) {
				invalid(g,
				        INVALID "Value cannot be used when Exists is false for "
				                "Attribute: %s",
				        name);
				return SHOAL_OK;
			}
			op = cmp_op_find(exists ? "EQ" : "NULL");
			if (value != NULL) {
				st_value v;
				bool ok;
				rc = value_of(g, value, false, &v, &ok);
				if (rc != SHOAL_OK || !ok)
					return rc;
				vals = &value;
				n = 1;
			}
		} else {
			if (expected && member(c, "Exists") != NULL) {
				invalid(g,
				        INVALID "Exists and ComparisonOperator cannot be used "
				                "together for Attribute: %s",
				        name);
				return SHOAL_OK;
			}
			if (expected && list == NULL && value == NULL && op->min > 0) {
				invalid(g,
				        INVALID "Value or AttributeValueList must be used with "
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
			invalid(g,
			        "Attempted conditional constraint is not an indexable operation");
			return SHOAL_OK;
		}
		if (b.len > 0) {
			wire_lg_str(&b, " ");
			wire_lg_str(&b, join);
			wire_lg_str(&b, " ");
		}
		bool paren = count > 1 && !key;
		if (paren)
			wire_lg_str(&b, "(");
		rc = wire_lg_condition(&g->ph, &b, name, op, vals, n);
		if (rc != SHOAL_OK)
			return rc;
		if (paren)
			wire_lg_str(&b, ")");
	}
	if (key && (count < 1 || count > 2)) {
		invalid(g, "Conditions can be of length 1 or 2 only");
		return SHOAL_OK;
	}
	if (b.oom)
		return nomem(g);
	*out = b.len > 0 ? b.p : NULL;
	return SHOAL_OK;
}

/* AttributeUpdates -> an UpdateExpression (NULL when empty). */
static int translate_updates(lg *g, const char **out)
{
	wire_lg_update u;
	wire_lg_update_init(&u, g->c->a);
	const char *name;
	json_t *e;
	*out = NULL;
	json_object_foreach(member(g->in, "AttributeUpdates"), name, e)
	{
		if (json_is_null(e))
			continue;
		const json_t *aj = member(e, "Action");
		const char *action = aj != NULL ? json_string_value(aj) : "PUT";
		json_t *value = member(e, "Value");
		st_value v;
		bool ok = false;
		if (value != NULL) {
			int rc = value_of(g, value, false, &v, &ok);
			if (rc != SHOAL_OK || !ok)
				return rc;
		}
		bool del = strcmp(action, "DELETE") == 0, add = strcmp(action, "ADD") == 0;
		if (value == NULL && !del) {
			invalid(g,
			        INVALID "Only DELETE action is allowed when no attribute value is "
			                "specified");
			return SHOAL_OK;
		}
		bool set_type =
		    value != NULL && (v.type == ST_SS || v.type == ST_NS || v.type == ST_BS);
		if (value != NULL && del && !set_type) {
			invalid(g,
			        INVALID "DELETE action with value is not supported for the type %s",
			        st_type_name(v.type));
			return SHOAL_OK;
		}
		if (value != NULL && add && !set_type && v.type != ST_N && v.type != ST_L) {
			invalid(g, INVALID "ADD action is not supported for the type %s",
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

static int translate_projection(lg *g, const char **out)
{
	json_t *list = member(g->in, "AttributesToGet");
	wire_lg_text b = {.a = g->c->a};
	size_t i, k;
	json_t *s, *t;
	*out = NULL;
	json_array_foreach(list, i, s)
	{
		for (k = 0; k < i; k++) {
			t = json_array_get(list, k);
			if (json_equal(s, t)) {
				invalid(g, INVALID "Duplicate value in attribute name: %s",
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
static int set_text(lg *g, json_t *out, const char *name, const char *text)
{
	if (text == NULL)
		return SHOAL_OK;
	json_t *s = json_string(text);
	if (s == NULL || json_object_set_new(out, name, s) != 0)
		return nomem(g);
	return SHOAL_OK;
}

/* The copy of the body with expressions instead of legacy parameters. */
static int translate(lg *g, json_t **out)
{
	const char *projection = NULL, *update = NULL, *condition = NULL, *keycond = NULL,
	           *filter = NULL;
	const char *condop =
	    g->present & P_CONDOP ? json_string_value(member(g->in, "ConditionalOperator")) : "AND";
	const char *join = strcmp(condop, "OR") == 0 ? "OR" : "AND";
	int rc = SHOAL_OK;
	if (g->present & P_ATG)
		rc = translate_projection(g, &projection);
	if (rc == SHOAL_OK && !g->failed && g->present & P_UPDATES)
		rc = translate_updates(g, &update);
	if (rc == SHOAL_OK && !g->failed && g->present & P_EXPECTED)
		rc = translate_conditions(g, "Expected", join, &condition);
	if (rc == SHOAL_OK && !g->failed && g->present & P_QFILTER)
		rc = translate_conditions(g, "QueryFilter", join, &filter);
	if (rc == SHOAL_OK && !g->failed && g->present & P_SFILTER)
		rc = translate_conditions(g, "ScanFilter", join, &filter);
	if (rc == SHOAL_OK && !g->failed && g->present & P_KEYCOND)
		rc = translate_conditions(g, "KeyConditions", "AND", &keycond);
	if (rc != SHOAL_OK || g->failed)
		return rc;

	json_t *o = wire_lg_copy_object(g->in);
	if (o == NULL)
		return nomem(g);
	for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++)
		json_object_del(o, params[i].name);
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
	const legacy_op *op = NULL;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (ops[i].desc == desc)
			op = &ops[i];
	if (op == NULL || !json_is_object(j))
		return SHOAL_OK;
	lg g = {.c = c, .op = op, .in = j};
	for (const char *const *n = op->nonexpr; *n != NULL; n++)
		if (member(j, *n) != NULL)
			g.present |= param_bit(*n);
	if (g.present == 0)
		return SHOAL_OK;
	/* The client's placeholders are merged with ours: when they are not
	 * maps, leave the body to the walker, whose SerializationException
	 * says so. */
	const json_t *un = member(j, "ExpressionAttributeNames");
	const json_t *uv = member(j, "ExpressionAttributeValues");
	if ((un != NULL && !json_is_object(un)) || (uv != NULL && !json_is_object(uv)))
		return SHOAL_OK;

	int rc = check_shapes(&g);
	if (rc != SHOAL_OK)
		return rc;
	check_constraints(&g);
	if (!g.failed)
		check_mixing(&g);
	if (!g.failed)
		check_condop(&g);
	if (g.failed)
		return SHOAL_OK;
	rc = wire_lg_ph_init(&g.ph, c->a, un, uv, c->errmsg);
	if (rc == SHOAL_OK)
		rc = translate(&g, out);
	wire_lg_ph_fini(&g.ph);
	return rc;
}
