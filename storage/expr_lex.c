/*
 * expr_lex.c -- DynamoDB's expression lexer and its syntax-error message.
 *
 * The tokens are those of the grammar AWS publishes with its DAX client
 * (DynamoDbGrammar / Tokens.g4), which DynamoDB's own messages agree with:
 *
 *   WS        [ \t\n\r]+
 *   operators =  <>  <  <=  >  >=  +  -   and ( ) [ ] , .
 *   keywords  IN BETWEEN NOT AND OR SET ADD DELETE REMOVE, any case, in
 *             every kind of expression ("SET" is never an attribute name)
 *   INDEX     0 | [1-9][0-9]*          ("007" is three tokens)
 *   ID        [a-zA-Z][a-zA-Z0-9_]*    (so "_a" starts with an unknown "_")
 *   #name     '#' [a-zA-Z0-9_]+
 *   :value    ':' [a-zA-Z0-9_]+
 *   STRING    "..." or '...' (a token no rule accepts)
 *   UNKNOWN   any other single character (one UTF-8 sequence)
 *
 * Whitespace is kept as tokens because DynamoDB's "near" context counts it.
 * The context of a syntax error is the source text from the token before the
 * offending one to the token after it, where a whitespace token pulls in the
 * token beyond it; at the end of the text the offending token is "<EOF>".
 * Observed messages this reproduces:
 *   "INVALID SYNTAX HERE"    token: "INVALID", near: "INVALID SYNTAX"
 *   "a-b"                    token: "-",       near: "a-b"
 *   "set _something = :s"    token: "_",       near: "set _something"
 *   "SET MyStr[ 3 "          token: "<EOF>",   near: "3 "
 *   "  RESET NonExistent v"  token: "RESET",   near: "  RESET NonExistent"
 */
#include <string.h>

#include "expr_int.h"

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_id_char(char c)
{
	return is_alpha(c) || is_digit(c) || c == '_';
}

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static const struct {
	const char *word;
	uint8_t kind;
} keywords[] = {
    {"IN", TK_IN},   {"BETWEEN", TK_BETWEEN}, {"NOT", TK_NOT},
    {"AND", TK_AND}, {"OR", TK_OR},           {"SET", TK_SET},
    {"ADD", TK_ADD}, {"DELETE", TK_DELETE},   {"REMOVE", TK_REMOVE},
};

static uint8_t keyword(const char *s, size_t n)
{
	for (size_t i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++) {
		const char *w = keywords[i].word;
		if (strlen(w) != n)
			continue;
		size_t j = 0;
		while (j < n && (s[j] & ~0x20) == w[j])
			j++;
		if (j == n)
			return keywords[i].kind;
	}
	return TK_ID;
}

/* Length of the UTF-8 sequence starting at s (1 for a stray byte). */
static size_t utf8_len(const char *s, size_t avail)
{
	unsigned char c = (unsigned char)s[0];
	size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
	if (n > avail)
		return 1;
	for (size_t i = 1; i < n; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			return 1;
	return n;
}

/* One token at text[i]: its kind and length. */
static uint8_t next_token(const char *t, size_t len, size_t i, size_t *n)
{
	char c = t[i];
	char d = i + 1 < len ? t[i + 1] : '\0';
	*n = 1;
	if (is_ws(c)) {
		while (i + *n < len && is_ws(t[i + *n]))
			(*n)++;
		return TK_WS;
	}
	if (is_alpha(c)) {
		while (i + *n < len && is_id_char(t[i + *n]))
			(*n)++;
		return keyword(t + i, *n);
	}
	if (c == '0')
		return TK_INDEX;
	if (is_digit(c)) {
		while (i + *n < len && is_digit(t[i + *n]))
			(*n)++;
		return TK_INDEX;
	}
	if ((c == '#' || c == ':') && i + 1 < len && is_id_char(d)) {
		while (i + *n < len && is_id_char(t[i + *n]))
			(*n)++;
		return c == '#' ? TK_NAME : TK_VALUE;
	}
	if (c == '"' || c == '\'') {
		for (size_t j = i + 1; j < len; j++) {
			if (t[j] == '\\' && j + 1 < len && t[j + 1] == c) {
				j++;
				continue;
			}
			if (t[j] == c) {
				*n = j - i + 1;
				return TK_STRING;
			}
		}
		return TK_UNKNOWN;
	}
	switch (c) {
	case '=':
		return TK_EQ;
	case '<':
		if (d == '=' || d == '>') {
			*n = 2;
			return d == '=' ? TK_LE : TK_NE;
		}
		return TK_LT;
	case '>':
		if (d == '=') {
			*n = 2;
			return TK_GE;
		}
		return TK_GT;
	case '+':
		return TK_PLUS;
	case '-':
		return TK_MINUS;
	case '(':
		return TK_LPAREN;
	case ')':
		return TK_RPAREN;
	case '[':
		return TK_LBRACK;
	case ']':
		return TK_RBRACK;
	case ',':
		return TK_COMMA;
	case '.':
		return TK_DOT;
	default:
		*n = utf8_len(t + i, len - i);
		return TK_UNKNOWN;
	}
}

int st_expr_lex(sh_arena *a, const char *text, size_t len, st_tok **toks, uint32_t *ntoks)
{
	/* Every token is at least one byte, plus the EOF. */
	st_tok *v = sh_arena_alloc(a, (len + 1) * sizeof(*v));
	if (v == NULL)
		return SHOAL_E_NOMEM;
	uint32_t n = 0;
	size_t i = 0;
	while (i < len) {
		size_t tl;
		v[n].kind = next_token(text, len, i, &tl);
		v[n].start = (uint32_t)i;
		v[n].len = (uint32_t)tl;
		n++;
		i += tl;
	}
	v[n].kind = TK_EOF;
	v[n].start = (uint32_t)len;
	v[n].len = 0;
	*toks = v;
	*ntoks = n + 1;
	return SHOAL_OK;
}

int st_expr_syntax_error(const char *kind_name, const char *text, const st_tok *toks,
                         uint32_t ntoks, uint32_t i, char *errmsg)
{
	const st_tok *t = &toks[i];
	uint32_t start = t->start, end = t->start + t->len;
	if (i >= 1) {
		uint32_t j = i - 1;
		if (toks[j].kind == TK_WS && j >= 1)
			j--;
		start = toks[j].start;
	}
	if (t->kind != TK_EOF && i + 1 < ntoks && toks[i + 1].kind != TK_EOF) {
		uint32_t k = i + 1;
		if (toks[k].kind == TK_WS && k + 1 < ntoks && toks[k + 1].kind != TK_EOF)
			k++;
		end = toks[k].start + toks[k].len;
	}
	if (t->kind == TK_EOF)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "Invalid %s: Syntax error; token: \"<EOF>\", near: \"%.*s\"",
		               kind_name, (int)(end - start), text + start);
	return sh_errf(errmsg, SHOAL_E_VALIDATION,
	               "Invalid %s: Syntax error; token: \"%.*s\", near: \"%.*s\"", kind_name,
	               (int)t->len, text + t->start, (int)(end - start), text + start);
}
