/*
 * tl_history.c -- the recorder and the text form of histories (the format is
 * documented in tl_history.h).  The checkers: tl_history_linear.c
 * (registers), tl_history_list.c (lists).
 */
#include "tests/lib/tl_history.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/lib/testlib.h"

struct tl_history {
	pthread_mutex_t mu;
	tl_op *ops;
	size_t n, cap;
};

static void *xmalloc(size_t n)
{
	void *p = malloc(n == 0 ? 1 : n);
	tl_assert_msg(p != NULL, "out of memory (%zu bytes)", n);
	return p;
}

static char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = xmalloc(n);
	memcpy(p, s, n);
	return p;
}

tl_history *tl_history_new(void)
{
	tl_history *h = xmalloc(sizeof(*h));
	memset(h, 0, sizeof(*h));
	pthread_mutex_init(&h->mu, NULL);
	return h;
}

void tl_history_free(tl_history *h)
{
	if (h == NULL)
		return;
	for (size_t i = 0; i < h->n; i++) {
		free(h->ops[i].key);
		free(h->ops[i].list);
	}
	free(h->ops);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

uint64_t tl_history_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* With h->mu held: a new zeroed slot, its id in *id. */
static tl_op *push(tl_history *h, size_t *id)
{
	if (h->n == h->cap) {
		size_t cap = h->cap == 0 ? 256 : h->cap * 2;
		tl_op *ops = realloc(h->ops, cap * sizeof(*ops));
		tl_assert_msg(ops != NULL, "out of memory (%zu operations)", cap);
		h->ops = ops;
		h->cap = cap;
	}
	*id = h->n++;
	tl_op *op = &h->ops[*id];
	memset(op, 0, sizeof(*op));
	return op;
}

size_t tl_history_invoke(tl_history *h, int proc, tl_fn fn, const char *key, int64_t arg,
                         int64_t arg2)
{
	char *k = xstrdup(key);
	uint64_t now = tl_history_now();
	size_t id;
	pthread_mutex_lock(&h->mu);
	tl_op *op = push(h, &id);
	op->t_invoke = now;
	op->t_complete = TL_NO_TIME;
	op->proc = proc;
	op->kind = TL_INVOKE;
	op->fn = fn;
	op->key = k;
	op->arg = arg;
	op->arg2 = arg2;
	op->value = TL_NIL;
	pthread_mutex_unlock(&h->mu);
	return id;
}

static void complete(tl_history *h, size_t id, tl_kind kind, int64_t value, int64_t *list, size_t n)
{
	uint64_t now = tl_history_now();
	pthread_mutex_lock(&h->mu);
	tl_assert_msg(id < h->n, "tl_history_complete: no operation %zu", id);
	tl_op *op = &h->ops[id];
	tl_assert_msg(op->kind == TL_INVOKE, "tl_history_complete: operation %zu completed twice",
	              id);
	tl_assert(kind == TL_OK || kind == TL_FAIL || kind == TL_INFO);
	op->kind = kind;
	op->t_complete = kind == TL_INFO ? TL_NO_TIME : now;
	op->value = kind == TL_OK ? value : TL_NIL;
	op->list = list;
	op->nlist = n;
	pthread_mutex_unlock(&h->mu);
}

void tl_history_complete(tl_history *h, size_t id, tl_kind kind, int64_t value)
{
	complete(h, id, kind, value, NULL, 0);
}

static int64_t *copy_list(const int64_t *list, size_t n)
{
	if (list == NULL)
		return NULL;
	int64_t *l = xmalloc(n * sizeof(*l));
	if (n > 0)
		memcpy(l, list, n * sizeof(*l));
	return l;
}

void tl_history_complete_list(tl_history *h, size_t id, tl_kind kind, const int64_t *list, size_t n)
{
	if (kind != TL_OK)
		complete(h, id, kind, TL_NIL, NULL, 0);
	else
		complete(h, id, kind, TL_NIL, copy_list(list == NULL ? (int64_t[1]){0} : list, n),
		         n);
}

size_t tl_history_add(tl_history *h, const tl_op *src)
{
	char *k = xstrdup(src->key);
	int64_t *list = src->fn == TL_READ_LIST && src->kind == TL_OK
	                    ? copy_list(src->list == NULL ? (int64_t[1]){0} : src->list, src->nlist)
	                    : NULL;
	size_t id;
	pthread_mutex_lock(&h->mu);
	tl_op *op = push(h, &id);
	*op = *src;
	op->key = k;
	op->list = list;
	op->nlist = list != NULL ? src->nlist : 0;
	if (op->kind == TL_INVOKE || op->kind == TL_INFO)
		op->t_complete = TL_NO_TIME;
	pthread_mutex_unlock(&h->mu);
	return id;
}

size_t tl_history_len(const tl_history *h)
{
	pthread_mutex_lock((pthread_mutex_t *)&h->mu);
	size_t n = h->n;
	pthread_mutex_unlock((pthread_mutex_t *)&h->mu);
	return n;
}

const tl_op *tl_history_op(const tl_history *h, size_t id)
{
	tl_assert_msg(id < h->n, "tl_history_op: no operation %zu", id);
	return &h->ops[id];
}

const char *tl_verdict_name(tl_verdict v)
{
	switch (v) {
	case TL_LINEARIZABLE:
		return "LINEARIZABLE";
	case TL_NOT_LINEARIZABLE:
		return "NOT_LINEARIZABLE";
	case TL_UNKNOWN:
		return "UNKNOWN";
	}
	return "?";
}

void tl_check_result_fini(tl_check_result *r)
{
	tl_history_free(r->witness);
	r->witness = NULL;
}

/* ------------------------------------------------------------------------
 * Text form. */

static const char *const kind_names[] = {"invoke", "ok", "fail", "info"};
static const char *const fn_names[] = {"read", "write", "cas", "append", "read-list"};

/* Appends to buf at *len (snprintf-style: *len may exceed size). */
static void put(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(*len < size ? buf + *len : NULL, *len < size ? size - *len : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len += (size_t)n;
}

static void put_value(char *buf, size_t size, size_t *len, int64_t v)
{
	if (v == TL_NIL)
		put(buf, size, len, "nil");
	else
		put(buf, size, len, "%" PRId64, v);
}

int tl_history_format_op(const tl_op *op, char *buf, size_t size)
{
	size_t len = 0;
	if (size > 0)
		buf[0] = '\0';
	put(buf, size, &len, "%" PRIu64 " ", op->t_invoke);
	if (op->t_complete == TL_NO_TIME)
		put(buf, size, &len, "- ");
	else
		put(buf, size, &len, "%" PRIu64 " ", op->t_complete);
	put(buf, size, &len, "%d %s %s ", op->proc, kind_names[op->kind], fn_names[op->fn]);
	for (const char *k = op->key; *k != '\0'; k++) {
		if (*k == '%' || isspace((unsigned char)*k) || !isprint((unsigned char)*k))
			put(buf, size, &len, "%%%02X", (unsigned char)*k);
		else
			put(buf, size, &len, "%c", *k);
	}
	if (op->key[0] == '\0')
		put(buf, size, &len, "%%00");
	switch (op->fn) {
	case TL_WRITE:
	case TL_APPEND:
		put(buf, size, &len, " ");
		put_value(buf, size, &len, op->arg);
		break;
	case TL_CAS:
		put(buf, size, &len, " ");
		put_value(buf, size, &len, op->arg);
		put(buf, size, &len, " ");
		put_value(buf, size, &len, op->arg2);
		break;
	case TL_READ:
	case TL_READ_LIST:
		break;
	}
	if (op->kind == TL_OK) {
		if (op->fn == TL_READ || op->fn == TL_CAS) {
			put(buf, size, &len, " = ");
			put_value(buf, size, &len, op->value);
		} else if (op->fn == TL_READ_LIST) {
			put(buf, size, &len, " = [");
			for (size_t i = 0; i < op->nlist; i++) {
				if (i > 0)
					put(buf, size, &len, ",");
				put_value(buf, size, &len, op->list[i]);
			}
			put(buf, size, &len, "]");
		}
	}
	return (int)len;
}

static void dump_op(const tl_op *op, FILE *f)
{
	char small[512];
	int n = tl_history_format_op(op, small, sizeof(small));
	if ((size_t)n < sizeof(small)) {
		fprintf(f, "%s\n", small);
		return;
	}
	char *big = xmalloc((size_t)n + 1);
	tl_history_format_op(op, big, (size_t)n + 1);
	fprintf(f, "%s\n", big);
	free(big);
}

void tl_history_dump(const tl_history *h, FILE *f)
{
	for (size_t i = 0; i < h->n; i++)
		dump_op(&h->ops[i], f);
}

int tl_history_dump_file(const tl_history *h, const char *path)
{
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -1;
	tl_history_dump(h, f);
	int bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		errno = errno != 0 ? errno : EIO;
		return -1;
	}
	return 0;
}

/* The parser: a cursor over one line. */
typedef struct {
	char *p;
	const char *why;
} cursor;

static char *token(cursor *c)
{
	while (*c->p == ' ' || *c->p == '\t')
		c->p++;
	if (*c->p == '\0' || *c->p == '\n' || *c->p == '\r')
		return NULL;
	char *t = c->p;
	while (*c->p != '\0' && !isspace((unsigned char)*c->p))
		c->p++;
	if (*c->p != '\0')
		*c->p++ = '\0';
	return t;
}

static bool parse_u64(const char *t, uint64_t *v)
{
	if (t == NULL || !isdigit((unsigned char)t[0]))
		return false;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(t, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*v = x;
	return true;
}

/* A value: decimal or nil, ending at `stop` characters (or the string's end). */
static bool parse_value(const char *t, int64_t *v, const char **endp)
{
	if (strncmp(t, "nil", 3) == 0) {
		*v = TL_NIL;
		*endp = t + 3;
		return true;
	}
	if (!isdigit((unsigned char)t[0]) && t[0] != '-')
		return false;
	char *end;
	errno = 0;
	long long x = strtoll(t, &end, 10);
	if (errno != 0 || end == t)
		return false;
	*v = x;
	*endp = end;
	return true;
}

static bool parse_value_tok(const char *t, int64_t *v)
{
	const char *end;
	return t != NULL && parse_value(t, v, &end) && *end == '\0';
}

static int lookup(const char *t, const char *const *names, int n)
{
	for (int i = 0; t != NULL && i < n; i++)
		if (strcmp(t, names[i]) == 0)
			return i;
	return -1;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* Decodes the key in place; "%00" alone is the empty key. */
static bool decode_key(char *t)
{
	char *w = t;
	for (char *r = t; *r != '\0';) {
		if (*r == '%') {
			int hi = hexval(r[1]), lo = hi < 0 ? -1 : hexval(r[2]);
			if (hi < 0 || lo < 0)
				return false;
			int ch = hi * 16 + lo;
			if (ch == 0) {
				if (r != t || r[3] != '\0')
					return false;
				break;
			}
			*w++ = (char)ch;
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return true;
}

/* Parses "[a,b,c]" into a new array. */
static bool parse_list(const char *t, int64_t **out, size_t *n)
{
	if (t == NULL || t[0] != '[')
		return false;
	size_t cap = 16, len = 0;
	int64_t *l = xmalloc(cap * sizeof(*l));
	const char *p = t + 1;
	if (*p == ']') {
		p++;
	} else {
		for (;;) {
			int64_t v;
			const char *end;
			if (!parse_value(p, &v, &end))
				goto bad;
			if (len == cap) {
				cap *= 2;
				int64_t *nl = realloc(l, cap * sizeof(*l));
				tl_assert(nl != NULL);
				l = nl;
			}
			l[len++] = v;
			p = end;
			if (*p == ',') {
				p++;
				continue;
			}
			if (*p != ']')
				goto bad;
			p++;
			break;
		}
	}
	if (*p != '\0')
		goto bad;
	*out = l;
	*n = len;
	return true;
bad:
	free(l);
	return false;
}

/* Parses one line into op (key points into the line; list is allocated). */
static bool parse_line(char *line, tl_op *op, const char **why)
{
	cursor c = {line, NULL};
	memset(op, 0, sizeof(*op));
	op->value = TL_NIL;
	char *t = token(&c);
	if (!parse_u64(t, &op->t_invoke))
		return *why = "bad invoke time", false;
	t = token(&c);
	if (t != NULL && strcmp(t, "-") == 0)
		op->t_complete = TL_NO_TIME;
	else if (!parse_u64(t, &op->t_complete))
		return *why = "bad complete time", false;
	t = token(&c);
	uint64_t proc;
	if (!parse_u64(t, &proc) || proc > INT32_MAX)
		return *why = "bad process", false;
	op->proc = (int)proc;
	int k = lookup(token(&c), kind_names, 4);
	if (k < 0)
		return *why = "bad kind (invoke, ok, fail, info)", false;
	op->kind = (tl_kind)k;
	int f = lookup(token(&c), fn_names, 5);
	if (f < 0)
		return *why = "bad function (read, write, cas, append, read-list)", false;
	op->fn = (tl_fn)f;
	op->key = token(&c);
	if (op->key == NULL || !decode_key(op->key))
		return *why = "bad key", false;
	if (op->fn == TL_WRITE || op->fn == TL_APPEND || op->fn == TL_CAS)
		if (!parse_value_tok(token(&c), &op->arg))
			return *why = "bad argument", false;
	if (op->fn == TL_CAS)
		if (!parse_value_tok(token(&c), &op->arg2))
			return *why = "bad second argument", false;
	bool has_result =
	    op->kind == TL_OK && (op->fn == TL_READ || op->fn == TL_CAS || op->fn == TL_READ_LIST);
	t = token(&c);
	if (has_result) {
		if (t == NULL || strcmp(t, "=") != 0)
			return *why = "missing '= result'", false;
		t = token(&c);
		if (op->fn == TL_READ_LIST) {
			if (!parse_list(t, &op->list, &op->nlist))
				return *why = "bad list", false;
		} else if (!parse_value_tok(t, &op->value)) {
			return *why = "bad result", false;
		}
		t = token(&c);
	}
	if (t != NULL) {
		free(op->list);
		return *why = "trailing text", false;
	}
	bool done = op->kind == TL_OK || op->kind == TL_FAIL;
	if (done != (op->t_complete != TL_NO_TIME)) {
		free(op->list);
		return *why = "ok and fail need a complete time, invoke and info none", false;
	}
	if (done && op->t_complete < op->t_invoke) {
		free(op->list);
		return *why = "completes before its invocation", false;
	}
	return true;
}

tl_history *tl_history_load(FILE *f, char *err, size_t err_size)
{
	tl_history *h = tl_history_new();
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	unsigned lineno = 0;
	while ((n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#' || *p == '\n' || *p == '\r' || *p == '\0')
			continue;
		tl_op op;
		const char *why = NULL;
		if (!parse_line(p, &op, &why)) {
			snprintf(err, err_size, "line %u: %s", lineno, why);
			free(line);
			tl_history_free(h);
			return NULL;
		}
		tl_history_add(h, &op);
		free(op.list);
	}
	free(line);
	if (ferror(f)) {
		snprintf(err, err_size, "read error: %s", strerror(errno));
		tl_history_free(h);
		return NULL;
	}
	return h;
}

tl_history *tl_history_load_file(const char *path, char *err, size_t err_size)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, err_size, "%s: %s", path, strerror(errno));
		return NULL;
	}
	tl_history *h = tl_history_load(f, err, err_size);
	fclose(f);
	return h;
}
