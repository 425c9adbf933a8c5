/*
 * catalog_tags.c -- a table's tags: validation and changes, with
 * DynamoDB's rules (developer guide, "Tagging restrictions"): a key of 1..128
 * characters, a value of 0..256, letters, digits, white space and
 * + - = . _ : / @ only, no key beginning with "aws:" (reserved for AWS), at
 * most 50 tags per table, one tag per key (tagging an existing key changes
 * its value).
 *
 * Characters are Unicode code points of UTF-8 text (the HTTP and native
 * decoders have checked the encoding).  Every non-ASCII code point counts as
 * a letter: Shoal has no Unicode category table, so a non-ASCII symbol that
 * DynamoDB would refuse is accepted.
 */
#include <stdio.h>
#include <string.h>

#include "catalog.h"

/* Code points of UTF-8 text s (valid by the caller's checks). */
static size_t code_points(const char *s)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
		n += (*p & 0xc0) != 0x80;
	return n;
}

static bool char_ok(unsigned char c)
{
	return c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || strchr(" \t\n\r+-=._:/@", c) != NULL;
}

static bool chars_ok(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
		if (!char_ok(*p))
			return false;
	return true;
}

#define TAG_CHARS "letters, digits, white space and + - = . _ : / @"

static int check_one(const st_tag *t, uint32_t i, char *errmsg)
{
	if (t->key == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value null at 'tags.%u.member.key' "
		               "failed to satisfy constraint: Member must not be null",
		               i + 1);
	if (t->value == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value null at 'tags.%u.member.value' "
		               "failed to satisfy constraint: Member must not be null",
		               i + 1);
	size_t klen = code_points(t->key), vlen = code_points(t->value);
	if (klen < 1)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "1 validation error detected: Value '' at 'tags.%u.member.key' failed "
		    "to satisfy constraint: Member must have length greater than or "
		    "equal to 1",
		    i + 1);
	if (klen > ST_TAG_KEY_MAX)
		return sh_errf(
		    errmsg, SHOAL_E_VALIDATION,
		    "1 validation error detected: Value '%.40s...' at 'tags.%u.member.key' "
		    "failed to satisfy constraint: Member must have length less than "
		    "or equal to %d",
		    t->key, i + 1, ST_TAG_KEY_MAX);
	if (vlen > ST_TAG_VALUE_MAX)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "1 validation error detected: Value '%.40s...' at "
		               "'tags.%u.member.value' failed to satisfy constraint: Member must "
		               "have length less than or equal to %d",
		               t->value, i + 1, ST_TAG_VALUE_MAX);
	if (strncmp(t->key, "aws:", 4) == 0)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: Tag key %s: the prefix "
		               "aws: is reserved for AWS-assigned tags",
		               t->key);
	if (!chars_ok(t->key))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: Tag key %s has a "
		               "character that is not allowed (allowed: " TAG_CHARS ")",
		               t->key);
	if (!chars_ok(t->value))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "One or more parameter values were invalid: The value of tag %s has "
		               "a character that is not allowed (allowed: " TAG_CHARS ")",
		               t->key);
	return SHOAL_OK;
}

static int too_many(uint32_t n, char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_VALIDATION,
	               "One or more parameter values were invalid: The table would have %u tags, "
	               "more than the tag limit of %d",
	               n, ST_MAX_TAGS);
}

int st_tags_check(const st_tag *tags, uint32_t n, char *errmsg)
{
	for (uint32_t i = 0; i < n; i++) {
		int rc = check_one(&tags[i], i, errmsg);
		if (rc != SHOAL_OK)
			return rc;
		for (uint32_t j = 0; j < i; j++)
			if (strcmp(tags[i].key, tags[j].key) == 0)
				return sh_errf(
				    errmsg, SHOAL_E_VALIDATION,
				    "One or more parameter values were invalid: Duplicate "
				    "tag key: %s",
				    tags[i].key);
	}
	if (n > ST_MAX_TAGS)
		return too_many(n, errmsg);
	return SHOAL_OK;
}

int st_tags_change(const st_tag *old, uint32_t n_old, const st_tag *set, uint32_t n_set,
                   const char *const *remove, uint32_t n_remove, sh_arena *a, st_tag **out,
                   uint32_t *n_out, char *errmsg)
{
	int rc = st_tags_check(set, n_set, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	st_tag *t = sh_arena_calloc(a, n_old + n_set + 1, sizeof(*t));
	if (t == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "tags: out of memory");
	uint32_t n = 0;
	for (uint32_t i = 0; i < n_old; i++) {
		bool gone = false;
		for (uint32_t j = 0; j < n_remove && !gone; j++)
			gone = remove[j] != NULL && strcmp(remove[j], old[i].key) == 0;
		for (uint32_t j = 0; j < n_set && !gone; j++)
			gone = strcmp(set[j].key, old[i].key) == 0;
		if (!gone)
			t[n++] = old[i];
	}
	for (uint32_t j = 0; j < n_set; j++)
		t[n++] = set[j];
	if (n > ST_MAX_TAGS)
		return too_many(n, errmsg);
	*out = t;
	*n_out = n;
	return SHOAL_OK;
}
