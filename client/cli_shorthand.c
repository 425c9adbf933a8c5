/*
 * cli_shorthand.c -- the AWS CLI's shorthand syntax for structured option
 * values, as awscli/shorthand.py parses it, e.g.
 *
 *   --key-schema AttributeName=PK,KeyType=HASH AttributeName=SK,KeyType=RANGE
 *   --provisioned-throughput ReadCapacityUnits=5,WriteCapacityUnits=5
 *   --key 'PK={S=USER#1},SK={S=PROFILE}'
 *   --projection ProjectionType=INCLUDE,NonKeyAttributes=a,b
 *
 * Grammar (awscli's, byte for byte, so that what people paste from the docs
 * parses the same way):
 *
 *   parameter     = keyval *("," keyval)
 *   keyval        = key "=" [values]
 *   key           = 1*(ALPHA / DIGIT / "-" / "_" / "." / "#" / "/" / ":")
 *   values        = csv-value / explicit-list / hash-literal
 *   csv-value     = first-value *("," second-value)   a list if more than one;
 *                                                     "a=b,c=d" backtracks: c is a key
 *   explicit-list = "[" [explicit-value *("," explicit-value)] "]"
 *   hash-literal  = "{" [keyval-x *("," keyval-x)] "}"   (keyval-x: key "=" explicit-value)
 *   explicit-value= explicit-list / hash-literal / first-value
 *   first-value   = single-quoted / double-quoted / word: starts with none of
 *                   space " ' , = [ {, continues with none of " ' , ] }
 *                   (so '=' and spaces may appear inside; trailing spaces are
 *                   dropped; "\," is a comma, other backslash pairs are kept)
 *   second-value  = quoted / a word that contains none of " ' , =
 *   quoted        = '...' or "..." with \' (\") and \\ escapes
 *
 * The parse gives raw JSON (objects, arrays, strings); cli_shorthand_convert
 * then applies the value's shape: numbers and booleans from strings, a single
 * value where a list is expected becomes a one-element list, and structure
 * members are checked by name.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/cli_int.h"

typedef struct parser {
	const char *opt; /* "--key" for messages */
	const char *s;
	size_t n, i;
	cli_fail *f;
	bool failed;
} parser;

static bool at_eof(const parser *p)
{
	return p->i >= p->n;
}

static int syntax_error(parser *p, const char *expected)
{
	if (p->failed)
		return -1;
	p->failed = true;
	char actual[8];
	if (at_eof(p))
		snprintf(actual, sizeof(actual), "EOF");
	else
		snprintf(actual, sizeof(actual), "%c", p->s[p->i]);
	/* The caret line points under the offending character. */
	size_t line_start = 0;
	for (size_t k = 0; k < p->i && k < p->n; k++)
		if (p->s[k] == '\n')
			line_start = k + 1;
	size_t col = p->i - line_start;
	char caret[256];
	size_t c = 0;
	for (; c < col && c + 2 < sizeof(caret); c++)
		caret[c] = ' ';
	caret[c++] = '^';
	caret[c] = '\0';
	cli_failf(p->f, CLI_EXIT_USAGE, false,
	          "Error parsing parameter '%s': Expected: '%s', received: '%s' for input:\n%s\n%s",
	          p->opt, expected, actual, p->s, caret);
	return -1;
}

static void skip_ws(parser *p)
{
	while (!at_eof(p) && isspace((unsigned char)p->s[p->i]))
		p->i++;
}

static int expect(parser *p, char ch, bool ws)
{
	if (ws)
		skip_ws(p);
	if (at_eof(p) || p->s[p->i] != ch) {
		char e[2] = {ch, '\0'};
		return syntax_error(p, e);
	}
	p->i++;
	if (ws)
		skip_ws(p);
	return 0;
}

/* Character classes of awscli's regular expressions (bytes >= 0x80 are in
 * every class, like the code points above U+007F). */
static bool start_word(unsigned char c)
{
	return c >= 0x21 && c != '"' && c != '\'' && c != ',' && c != '=' && c != '[' && c != '{' &&
	       c != 0x7f;
}

static bool first_follow(unsigned char c)
{
	return (isspace(c) || c >= 0x21) && c != '"' && c != '\'' && c != ',' && c != ']' &&
	       c != '}' && c != 0x7f;
}

static bool second_follow(unsigned char c)
{
	return (isspace(c) || c >= 0x21) && c != '"' && c != '\'' && c != ',' && c != '=' &&
	       c != 0x7f;
}

/* A word of the given classes (escapes "\x" allowed anywhere); "\," becomes
 * ",", trailing whitespace is dropped.  Returns NULL without error when no
 * word starts here (the caller decides). */
static json_t *word(parser *p, bool (*follow)(unsigned char))
{
	size_t start = p->i;
	bool first = true;
	while (!at_eof(p)) {
		unsigned char c = (unsigned char)p->s[p->i];
		if (c == '\\' && p->i + 1 < p->n) {
			p->i += 2;
		} else if (first ? start_word(c) : follow(c)) {
			p->i++;
		} else {
			break;
		}
		first = false;
	}
	if (p->i == start)
		return NULL;
	size_t len = p->i - start;
	char *buf = malloc(len + 1);
	if (buf == NULL)
		return NULL;
	size_t o = 0;
	for (size_t k = start; k < p->i; k++) {
		if (p->s[k] == '\\' && k + 1 < p->i && p->s[k + 1] == ',') {
			buf[o++] = ',';
			k++;
		} else {
			buf[o++] = p->s[k];
		}
	}
	while (o > 0 && isspace((unsigned char)buf[o - 1]))
		o--;
	json_t *j = json_stringn(buf, o);
	free(buf);
	return j;
}

static json_t *quoted(parser *p)
{
	char q = p->s[p->i];
	size_t k = p->i + 1;
	char *buf = malloc(p->n - p->i + 1);
	if (buf == NULL)
		return NULL;
	size_t o = 0;
	for (; k < p->n && p->s[k] != q; k++) {
		if (p->s[k] == '\\' && k + 1 < p->n && (p->s[k + 1] == q || p->s[k + 1] == '\\')) {
			buf[o++] = p->s[++k];
			continue;
		}
		buf[o++] = p->s[k];
	}
	if (k >= p->n) {
		free(buf);
		p->i = p->n;
		char e[2] = {q, '\0'};
		syntax_error(p, e);
		return NULL;
	}
	p->i = k + 1;
	json_t *j = json_stringn(buf, o);
	free(buf);
	return j;
}

static json_t *first_value(parser *p)
{
	if (!at_eof(p) && (p->s[p->i] == '\'' || p->s[p->i] == '"'))
		return quoted(p);
	json_t *w = word(p, first_follow);
	return w != NULL ? w : json_string("");
}

static json_t *explicit_value(parser *p);
static int keyval(parser *p, json_t *obj, bool explicit_values);

static json_t *explicit_list(parser *p)
{
	if (expect(p, '[', true) < 0)
		return NULL;
	json_t *arr = json_array();
	while (!p->failed) {
		if (at_eof(p)) {
			syntax_error(p, "]");
			break;
		}
		if (p->s[p->i] == ']') {
			p->i++;
			return arr;
		}
		json_t *v = explicit_value(p);
		if (v == NULL)
			break;
		json_array_append_new(arr, v);
		skip_ws(p);
		if (at_eof(p)) {
			syntax_error(p, "]");
			break;
		}
		if (p->s[p->i] == ']')
			continue;
		if (expect(p, ',', false) < 0)
			break;
		skip_ws(p);
	}
	json_decref(arr);
	return NULL;
}

static json_t *hash_literal(parser *p)
{
	if (expect(p, '{', true) < 0)
		return NULL;
	json_t *obj = json_object();
	while (!p->failed) {
		if (at_eof(p)) {
			syntax_error(p, "}");
			break;
		}
		if (p->s[p->i] == '}') {
			p->i++;
			return obj;
		}
		if (keyval(p, obj, true) < 0)
			break;
		skip_ws(p);
		if (at_eof(p)) {
			syntax_error(p, "}");
			break;
		}
		if (p->s[p->i] == '}')
			continue;
		if (expect(p, ',', false) < 0)
			break;
		skip_ws(p);
	}
	json_decref(obj);
	return NULL;
}

static json_t *explicit_value(parser *p)
{
	if (!at_eof(p) && p->s[p->i] == '[')
		return explicit_list(p);
	if (!at_eof(p) && p->s[p->i] == '{')
		return hash_literal(p);
	return first_value(p);
}

/* csv-value: "a" -> "a"; "a,b,c" -> ["a","b","c"]; in "a,c=d" c is the next
 * key: back up to the comma before it. */
static json_t *csv_value(parser *p)
{
	json_t *first = first_value(p);
	if (first == NULL)
		return NULL;
	skip_ws(p);
	if (at_eof(p) || p->s[p->i] != ',')
		return first;
	json_t *list = json_array();
	json_array_append_new(list, first);
	size_t comma = p->i;
	p->i++;
	skip_ws(p);
	for (;;) {
		bool was_failed = p->failed;
		json_t *v = NULL;
		if (!at_eof(p) && p->s[p->i] != '\'' && p->s[p->i] != '"') {
			size_t before = p->i;
			v = word(p, second_follow);
			if (v == NULL)
				p->i = before;
		} else if (!at_eof(p)) {
			v = quoted(p);
		}
		if (v == NULL && p->failed && !was_failed) {
			json_decref(list);
			return NULL; /* unterminated quote */
		}
		skip_ws(p);
		if (v != NULL && at_eof(p)) {
			json_array_append_new(list, v);
			break;
		}
		if (v != NULL && p->s[p->i] == ',') {
			json_array_append_new(list, v);
			comma = p->i;
			p->i++;
			skip_ws(p);
			continue;
		}
		/* Not a list member: the text after `comma` is the next keyval. */
		json_decref(v);
		if (v == NULL && at_eof(p)) {
			json_decref(list);
			syntax_error(p, "value");
			return NULL;
		}
		p->i = comma;
		break;
	}
	if (json_array_size(list) == 1) {
		json_t *only = json_incref(json_array_get(list, 0));
		json_decref(list);
		return only;
	}
	return list;
}

static int keyval(parser *p, json_t *obj, bool explicit_values)
{
	size_t start = p->i;
	while (!at_eof(p)) {
		unsigned char c = (unsigned char)p->s[p->i];
		if (!(isalnum(c) || c == '-' || c == '_' || c == '.' || c == '#' || c == '/' ||
		      c == ':'))
			break;
		p->i++;
	}
	char *key = strndup(p->s + start, p->i - start);
	if (key == NULL)
		return cli_failf(p->f, CLI_EXIT_OTHER, false, "out of memory"), -1;
	if (expect(p, '=', true) < 0) {
		free(key);
		return -1;
	}
	json_t *v;
	if (explicit_values) {
		v = explicit_value(p);
	} else if (at_eof(p)) {
		v = json_string("");
	} else if (p->s[p->i] == '[') {
		v = explicit_list(p);
	} else if (p->s[p->i] == '{') {
		v = hash_literal(p);
	} else {
		v = csv_value(p);
	}
	if (v == NULL) {
		free(key);
		if (!p->failed)
			syntax_error(p, "value");
		return -1;
	}
	if (json_object_get(obj, key) != NULL) {
		cli_failf(
		    p->f, CLI_EXIT_USAGE, false,
		    "Error parsing parameter '%s': Second instance of key \"%s\" encountered "
		    "for input:\n%s\nThis is often because there is a preceding \",\" instead "
		    "of a space.",
		    p->opt, key, p->s);
		p->failed = true;
		json_decref(v);
		free(key);
		return -1;
	}
	json_object_set_new(obj, key, v);
	free(key);
	return 0;
}

int cli_shorthand_parse(const char *opt, const char *text, json_t **out, cli_fail *f)
{
	parser p = {.opt = opt, .s = text, .n = strlen(text), .i = 0, .f = f};
	*out = NULL;
	json_t *obj = json_object();
	if (keyval(&p, obj, false) < 0)
		goto fail;
	while (!at_eof(&p)) {
		size_t before = p.i;
		if (expect(&p, ',', true) < 0 || keyval(&p, obj, false) < 0)
			goto fail;
		if (p.i == before) {
			syntax_error(&p, ",");
			goto fail;
		}
	}
	*out = obj;
	return 0;
fail:
	json_decref(obj);
	return -1;
}

/* ------------------------------------------------------------------------ */
/* Conversion to a shape                                                     */
/* ------------------------------------------------------------------------ */

static const char *py_type(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		return "<class 'dict'>";
	case JSON_ARRAY:
		return "<class 'list'>";
	case JSON_STRING:
		return "<class 'str'>";
	case JSON_INTEGER:
		return "<class 'int'>";
	case JSON_REAL:
		return "<class 'float'>";
	case JSON_TRUE:
	case JSON_FALSE:
		return "<class 'bool'>";
	default:
		return "<class 'NoneType'>";
	}
}

static const char *valid_types(cli_kind k)
{
	switch (k) {
	case CLI_STRING:
		return "<class 'str'>";
	case CLI_INT:
	case CLI_LONG:
		return "<class 'int'>";
	case CLI_BOOL:
		return "<class 'bool'>";
	case CLI_BLOB:
		return "<class 'bytes'>, <class 'bytearray'>, file-like object";
	case CLI_LIST:
		return "<class 'list'>, <class 'tuple'>";
	default:
		return "<class 'dict'>";
	}
}

/* "Invalid type for parameter <path>, value: <v>, type: <t>, valid types: <vt>" */
static void type_error(char *buf, size_t size, const char *path, const json_t *v, cli_kind k)
{
	char *text = json_is_string(v) ? strdup(json_string_value(v))
	                               : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	snprintf(buf, size, "Invalid type for parameter %s, value: %s, type: %s, valid types: %s",
	         path, text != NULL ? text : "?", py_type(v), valid_types(k));
	free(text);
}

static void unknown_member(char *buf, size_t size, const char *path, const char *name,
                           const cli_member *members)
{
	size_t o = (size_t)snprintf(
	    buf, size, "Unknown parameter in %s: \"%s\", must be one of: ", path, name);
	for (const cli_member *m = members; m->name != NULL && o < size; m++)
		o += (size_t)snprintf(buf + o, size - o, "%s%s", m == members ? "" : ", ", m->name);
}

static int convert_fail(cli_fail *f, const char *line)
{
	cli_failf(f, CLI_EXIT_USAGE, false, "Parameter validation failed:\n%s", line);
	return -1;
}

static bool parse_ll(const char *s, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0)
		return false;
	*out = v;
	return true;
}

int cli_shorthand_convert(const json_t *raw, const cli_shape *shape, const char *path, json_t **out,
                          cli_fail *f)
{
	char line[1024];
	*out = NULL;
	switch (shape->kind) {
	case CLI_ANY:
		*out = json_deep_copy(raw);
		return 0;
	case CLI_STRING:
	case CLI_BLOB:
		if (!json_is_string(raw)) {
			type_error(line, sizeof(line), path, raw, shape->kind);
			return convert_fail(f, line);
		}
		*out = json_deep_copy(raw);
		return 0;
	case CLI_INT:
	case CLI_LONG: {
		long long v;
		if (!json_is_string(raw) || !parse_ll(json_string_value(raw), &v)) {
			type_error(line, sizeof(line), path, raw, shape->kind);
			return convert_fail(f, line);
		}
		*out = json_integer(v);
		return 0;
	}
	case CLI_BOOL:
		if (json_is_string(raw) && strcasecmp(json_string_value(raw), "true") == 0) {
			*out = json_true();
			return 0;
		}
		if (json_is_string(raw) && strcasecmp(json_string_value(raw), "false") == 0) {
			*out = json_false();
			return 0;
		}
		type_error(line, sizeof(line), path, raw, shape->kind);
		return convert_fail(f, line);
	case CLI_LIST: {
		json_t *arr = json_array();
		if (!json_is_array(raw)) {
			/* A single value where a list is expected: a list of one. */
			json_t *v;
			char p2[512];
			snprintf(p2, sizeof(p2), "%s[0]", path);
			if (cli_shorthand_convert(raw, shape->elem, p2, &v, f) < 0) {
				json_decref(arr);
				return -1;
			}
			json_array_append_new(arr, v);
			*out = arr;
			return 0;
		}
		size_t i;
		json_t *e;
		json_array_foreach(raw, i, e)
		{
			json_t *v;
			char p2[512];
			snprintf(p2, sizeof(p2), "%s[%zu]", path, i);
			if (cli_shorthand_convert(e, shape->elem, p2, &v, f) < 0) {
				json_decref(arr);
				return -1;
			}
			json_array_append_new(arr, v);
		}
		*out = arr;
		return 0;
	}
	case CLI_MAP:
	case CLI_STRUCT: {
		if (!json_is_object(raw)) {
			type_error(line, sizeof(line), path, raw, shape->kind);
			return convert_fail(f, line);
		}
		json_t *obj = json_object();
		const char *k;
		json_t *e;
		json_object_foreach((json_t *)raw, k, e)
		{
			const cli_shape *vs = shape->elem;
			if (shape->kind == CLI_STRUCT) {
				vs = NULL;
				for (const cli_member *m = shape->members; m->name != NULL; m++)
					if (strcmp(m->name, k) == 0)
						vs = m->shape;
				if (vs == NULL) {
					unknown_member(line, sizeof(line), path, k, shape->members);
					json_decref(obj);
					return convert_fail(f, line);
				}
			}
			json_t *v;
			char p2[512];
			snprintf(p2, sizeof(p2), "%s.%s", path, k);
			if (cli_shorthand_convert(e, vs, p2, &v, f) < 0) {
				json_decref(obj);
				return -1;
			}
			json_object_set_new(obj, k, v);
		}
		*out = obj;
		return 0;
	}
	}
	return -1;
}

/* ------------------------------------------------------------------------ */
/* Validation of whole bodies (botocore's ParamValidator, the parts that     */
/* matter here: unknown members and JSON types)                              */
/* ------------------------------------------------------------------------ */

typedef struct verrs {
	char buf[2000];
	size_t len;
	int n;
} verrs;

static void verr_add(verrs *e, const char *line)
{
	if (e->len < sizeof(e->buf))
		e->len += (size_t)snprintf(e->buf + e->len, sizeof(e->buf) - e->len, "%s%s",
		                           e->n ? "\n" : "", line);
	e->n++;
}

static void validate(const json_t *v, const cli_shape *shape, const char *path, verrs *e)
{
	char line[1024];
	if (json_is_null(v) || shape->kind == CLI_ANY)
		return; /* null members are ignored by the service */
	bool ok;
	switch (shape->kind) {
	case CLI_STRING:
	case CLI_BLOB:
		ok = json_is_string(v);
		break;
	case CLI_INT:
	case CLI_LONG:
		ok = json_is_integer(v);
		break;
	case CLI_BOOL:
		ok = json_is_boolean(v);
		break;
	case CLI_LIST:
		ok = json_is_array(v);
		break;
	default:
		ok = json_is_object(v);
		break;
	}
	if (!ok) {
		type_error(line, sizeof(line), path, v, shape->kind);
		verr_add(e, line);
		return;
	}
	char p2[512];
	if (shape->kind == CLI_LIST) {
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x)
		{
			snprintf(p2, sizeof(p2), "%s[%zu]", path, i);
			validate(x, shape->elem, p2, e);
		}
	} else if (shape->kind == CLI_MAP || shape->kind == CLI_STRUCT) {
		const char *k;
		json_t *x;
		json_object_foreach((json_t *)v, k, x)
		{
			const cli_shape *vs = shape->elem;
			if (shape->kind == CLI_STRUCT) {
				vs = NULL;
				for (const cli_member *m = shape->members; m->name != NULL; m++)
					if (strcmp(m->name, k) == 0)
						vs = m->shape;
				if (vs == NULL) {
					unknown_member(line, sizeof(line), path, k, shape->members);
					verr_add(e, line);
					continue;
				}
			}
			snprintf(p2, sizeof(p2), "%s.%s", path, k);
			validate(x, vs, p2, e);
		}
	}
}

int cli_validate_body(const cli_cmd *cmd, const json_t *body, cli_fail *f)
{
	verrs e = {.len = 0, .n = 0};
	const char *k;
	json_t *x;
	json_object_foreach((json_t *)body, k, x)
	{
		const cli_opt *o = NULL;
		for (const cli_opt *q = cmd->opts; q->name != NULL; q++)
			if (strcmp(q->member, k) == 0)
				o = q;
		if (o == NULL) {
			char line[1024];
			size_t n = (size_t)snprintf(
			    line, sizeof(line),
			    "Unknown parameter in input: \"%s\", must be one of: ", k);
			for (const cli_opt *q = cmd->opts; q->name != NULL && n < sizeof(line); q++)
				n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s",
				                      q == cmd->opts ? "" : ", ", q->member);
			verr_add(&e, line);
			continue;
		}
		validate(x, o->shape, k, &e);
	}
	if (e.n == 0)
		return 0;
	cli_failf(f, CLI_EXIT_USAGE, false, "Parameter validation failed:\n%s", e.buf);
	return -1;
}
