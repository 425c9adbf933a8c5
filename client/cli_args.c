/*
 * cli_args.c -- option values -> request JSON, the AWS CLI's way
 * (awscli/paramfile.py and argprocess.py):
 *
 *   1. file://path and fileb://path values are replaced by the file's
 *      content (path relative to the current directory; ~ is $HOME);
 *   2. a structure, map or list value that starts with '{' or '[' is JSON;
 *      otherwise it is shorthand syntax (cli_shorthand.c);
 *   3. list options take every following word up to the next option, each
 *      word one element ("AttributeName=PK,AttributeType=S
 *      AttributeName=SK,AttributeType=S"), unless a single word is a JSON
 *      array;
 *   4. integers are parsed as argparse does ("argument --limit: invalid int
 *      value: 'x'").
 * JSON values are checked later, with the whole body (cli_validate_body).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/cli_int.h"

int cli_failf(cli_fail *f, int exit_code, bool usage, const char *fmt, ...)
{
	f->exit_code = exit_code;
	f->usage = usage;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->text, sizeof(f->text), fmt, ap);
	va_end(ap);
	return -1;
}

/* Reads a whole file into a malloc'd NUL-terminated buffer; errno on failure. */
static char *read_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	if (fp == NULL)
		return NULL;
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	while (buf != NULL) {
		size_t got = fread(buf + len, 1, cap - len - 1, fp);
		len += got;
		if (got == 0)
			break;
		if (len + 1 == cap) {
			char *nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				free(buf);
				buf = NULL;
				errno = ENOMEM;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	int err = errno;
	if (buf != NULL && ferror(fp)) {
		free(buf);
		buf = NULL;
	}
	fclose(fp);
	if (buf == NULL) {
		errno = err != 0 ? err : EIO;
		return NULL;
	}
	buf[len] = '\0';
	return buf;
}

int cli_param_text(const char *opt, const char *value, char **out, cli_fail *f)
{
	*out = NULL;
	const char *path = NULL;
	if (strncmp(value, "file://", 7) == 0)
		path = value + 7;
	else if (strncmp(value, "fileb://", 8) == 0)
		path = value + 8;
	if (path == NULL) {
		*out = strdup(value);
		if (*out == NULL)
			return cli_failf(f, CLI_EXIT_OTHER, false, "out of memory");
		return 0;
	}
	char expanded[4096];
	const char *home = getenv("HOME");
	if (path[0] == '~' && (path[1] == '/' || path[1] == '\0') && home != NULL)
		snprintf(expanded, sizeof(expanded), "%s%s", home, path + 1);
	else
		snprintf(expanded, sizeof(expanded), "%s", path);
	char *text = read_file(expanded);
	if (text == NULL) {
		int e = errno;
		return cli_failf(
		    f, CLI_EXIT_USAGE, false,
		    "Error parsing parameter '%s': Unable to load paramfile %s: [Errno "
		    "%d] %s: '%s'",
		    opt, value, e, strerror(e), expanded);
	}
	*out = text;
	return 0;
}

static bool starts_with_any(const char *s, const char *chars)
{
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	return *s != '\0' && strchr(chars, *s) != NULL;
}

static int parse_json(const char *opt, const char *text, json_t **out, cli_fail *f)
{
	json_error_t je;
	*out = json_loads(text, JSON_DECODE_ANY, &je);
	if (*out == NULL)
		return cli_failf(
		    f, CLI_EXIT_USAGE, false,
		    "Error parsing parameter '%s': Invalid JSON: %s: line %d column %d "
		    "(char %d)\nJSON received: %s",
		    opt, je.text, je.line, je.column, je.position, text);
	return 0;
}

/* One value (already read from any file) of a structure, map or ANY shape. */
static int complex_value(const char *opt, const cli_shape *shape, const char *path,
                         const char *text, json_t **out, cli_fail *f)
{
	if (shape->kind == CLI_ANY || starts_with_any(text, "{["))
		return parse_json(opt, text, out, f);
	json_t *raw;
	if (cli_shorthand_parse(opt, text, &raw, f) < 0)
		return -1;
	int rc = cli_shorthand_convert(raw, shape, path, out, f);
	json_decref(raw);
	return rc;
}

static int scalar_value(const char *opt, const cli_shape *shape, const char *text, json_t **out,
                        cli_fail *f)
{
	switch (shape->kind) {
	case CLI_INT:
	case CLI_LONG: {
		char *end;
		errno = 0;
		long long v = strtoll(text, &end, 10);
		const char *p = end;
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (text[0] == '\0' || *p != '\0' || errno != 0)
			return cli_failf(f, CLI_EXIT_USAGE, true,
			                 "argument --%s: invalid int value: '%s'", opt + 2, text);
		*out = json_integer(v);
		return 0;
	}
	case CLI_BOOL:
		if (strcasecmp(text, "true") == 0) {
			*out = json_true();
			return 0;
		}
		if (strcasecmp(text, "false") == 0) {
			*out = json_false();
			return 0;
		}
		return cli_failf(f, CLI_EXIT_USAGE, true,
		                 "argument --%s: invalid boolean value: '%s'", opt + 2, text);
	default:
		*out = json_string(text);
		if (*out == NULL)
			return cli_failf(
			    f, CLI_EXIT_USAGE, false,
			    "Error parsing parameter '%s': the value is not valid UTF-8", opt);
		return 0;
	}
}

static bool is_complex(const cli_shape *s)
{
	return s->kind == CLI_LIST || s->kind == CLI_MAP || s->kind == CLI_STRUCT ||
	       s->kind == CLI_ANY;
}

int cli_option_json(const char *opt, const char *member, const cli_shape *shape,
                    char *const *values, int n, json_t **out, cli_fail *f)
{
	*out = NULL;
	char **texts = calloc((size_t)n, sizeof(*texts));
	if (texts == NULL)
		return cli_failf(f, CLI_EXIT_OTHER, false, "out of memory");
	int rc = 0;
	for (int i = 0; i < n && rc == 0; i++)
		rc = cli_param_text(opt, values[i], &texts[i], f);
	if (rc != 0)
		goto out;

	if (shape->kind != CLI_LIST) {
		if (is_complex(shape))
			rc = complex_value(opt, shape, member, texts[0], out, f);
		else
			rc = scalar_value(opt, shape, texts[0], out, f);
		goto out;
	}
	if (n == 1 && starts_with_any(texts[0], "[")) {
		rc = parse_json(opt, texts[0], out, f);
		goto out;
	}
	json_t *arr = json_array();
	for (int i = 0; i < n; i++) {
		json_t *v;
		char path[128];
		snprintf(path, sizeof(path), "%s[%d]", member, i);
		if (is_complex(shape->elem))
			rc = complex_value(opt, shape->elem, path, texts[i], &v, f);
		else
			rc = scalar_value(opt, shape->elem, texts[i], &v, f);
		if (rc != 0) {
			json_decref(arr);
			goto out;
		}
		json_array_append_new(arr, v);
	}
	*out = arr;
out:
	for (int i = 0; i < n; i++)
		free(texts[i]);
	free(texts);
	return rc;
}
