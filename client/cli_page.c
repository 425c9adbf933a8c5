/*
 * cli_page.c -- calls and the AWS CLI's pagination.
 *
 * `aws dynamodb query` / `scan` / `list-tables` page through the whole
 * result by default (botocore's PageIterator, merged by build_full_result):
 *
 *   page 1 ---LastEvaluatedKey---> page 2 ---> ... ---> no LastEvaluatedKey
 *   merged: Items concatenated, Count and ScannedCount added, ConsumedCapacity
 *   from the first page (null when absent), no LastEvaluatedKey.
 *
 * --page-size N sets Limit on every underlying call.  --max-items N stops
 * after N items and prints "NextToken": base64 of {"ExclusiveStartKey": <the
 * key that started the page where it stopped, or null>,
 * "boto_truncate_amount": <items of that page already printed>} (botocore's
 * format), or just {"ExclusiveStartKey": <LastEvaluatedKey>} when it stopped
 * on a page boundary.  --starting-token resumes: the page is requested again
 * from its key and the first boto_truncate_amount items are skipped.
 *
 * One deliberate difference from botocore: Count is the number of items
 * printed (botocore leaves a truncated page's Count as the service sent it).
 */
#include <stdlib.h>
#include <string.h>

#include "client/cli_int.h"
#include "common/arena.h"
#include "proto/wire.h"

int cli_call(const cli_caller *c, const char *operation, const json_t *body, json_t **out,
             shoal_error *err)
{
	*out = NULL;
	char *text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (text == NULL) {
		snprintf(err->message, sizeof(err->message), "out of memory");
		err->code = SHOAL_E_NOMEM;
		err->source = SHOAL_SRC_LOCAL;
		snprintf(err->exception, sizeof(err->exception), "%s",
		         shoal_exception_name(SHOAL_E_NOMEM));
		return SHOAL_E_NOMEM;
	}
	if (c->debug != NULL)
		fprintf(c->debug, "%s request: %s\n", operation, text);
	char *resp = NULL;
	int rc = c->call(c->ctx, operation, text, &resp, err);
	free(text);
	if (c->debug != NULL) {
		if (rc == SHOAL_OK)
			fprintf(c->debug, "%s response: %s\n", operation, resp);
		else
			fprintf(c->debug, "%s error: %s (%s): %s\n", operation, err->exception,
			        shoal_err_name(rc), err->message);
	}
	if (rc != SHOAL_OK)
		return rc;
	json_error_t je;
	*out = json_loads(resp, JSON_DECODE_ANY, &je);
	shoal_free(resp);
	if (*out == NULL || !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		err->code = SHOAL_E_INTERNAL;
		err->source = SHOAL_SRC_PROTOCOL;
		snprintf(err->exception, sizeof(err->exception), "%s",
		         shoal_exception_name(SHOAL_E_INTERNAL));
		snprintf(err->message, sizeof(err->message), "malformed response JSON: %s",
		         je.text);
		return SHOAL_E_INTERNAL;
	}
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Tokens                                                                    */
/* ------------------------------------------------------------------------ */

char *cli_token_encode(const char *input_token, const json_t *value, long long truncate)
{
	json_t *tok = json_object();
	json_object_set_new(tok, input_token, value != NULL ? json_deep_copy(value) : json_null());
	if (truncate > 0)
		json_object_set_new(tok, "boto_truncate_amount", json_integer(truncate));
	char *text = json_dumps(tok, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(tok);
	if (text == NULL)
		return NULL;
	size_t n = strlen(text);
	char *b64 = malloc(wire_b64_encoded_len(n) + 1);
	if (b64 != NULL)
		wire_b64_encode(text, n, b64);
	free(text);
	return b64;
}

int cli_token_decode(const char *token, const char *input_token, json_t **value,
                     long long *truncate)
{
	*value = NULL;
	*truncate = 0;
	sh_arena a;
	sh_arena_init(&a);
	uint8_t *raw;
	size_t len;
	int rc = -1;
	if (wire_b64_decode(&a, token, strlen(token), &raw, &len, NULL) != SHOAL_OK)
		goto out;
	json_t *tok = json_loadb((const char *)raw, len, 0, NULL);
	if (tok == NULL)
		goto out;
	json_t *v = json_object_get(tok, input_token);
	json_t *t = json_object_get(tok, "boto_truncate_amount");
	/* Nothing but the two members, of the right types. */
	size_t members = (v != NULL) + (t != NULL);
	if (v == NULL || json_object_size(tok) != members ||
	    (t != NULL && (!json_is_integer(t) || json_integer_value(t) < 0))) {
		json_decref(tok);
		goto out;
	}
	*value = json_incref(v);
	*truncate = t != NULL ? json_integer_value(t) : 0;
	json_decref(tok);
	rc = 0;
out:
	sh_arena_fini(&a);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Pagination                                                                */
/* ------------------------------------------------------------------------ */

typedef struct paging_keys {
	const char *input_token;  /* request member of the continuation */
	const char *output_token; /* response member of the continuation */
	const char *results[3];   /* merged members; [0] is the primary (counted) one */
	int n_results;
	const char *non_aggregate; /* from the first page only; NULL: none */
} paging_keys;

static const paging_keys items_keys = {"ExclusiveStartKey",
                                       "LastEvaluatedKey",
                                       {"Items", "Count", "ScannedCount"},
                                       3,
                                       "ConsumedCapacity"};
static const paging_keys tables_keys = {
    "ExclusiveStartTableName", "LastEvaluatedTableName", {"TableNames", NULL, NULL}, 1, NULL};

/* botocore: an empty string (or, here, an empty key) is no token. */
static bool is_token(const json_t *v)
{
	if (v == NULL || json_is_null(v))
		return false;
	if (json_is_string(v))
		return json_string_length(v) > 0;
	if (json_is_object(v))
		return json_object_size(v) > 0;
	return true;
}

static void merge_page(json_t *result, const json_t *page, const paging_keys *k)
{
	for (int i = 0; i < k->n_results; i++) {
		json_t *v = json_object_get(page, k->results[i]);
		if (v == NULL)
			continue;
		json_t *have = json_object_get(result, k->results[i]);
		if (have == NULL) {
			json_object_set_new(result, k->results[i], json_deep_copy(v));
		} else if (json_is_array(have) && json_is_array(v)) {
			json_array_extend(have, v);
		} else if (json_is_integer(have) && json_is_integer(v)) {
			json_object_set_new(
			    result, k->results[i],
			    json_integer(json_integer_value(have) + json_integer_value(v)));
		}
	}
}

/* Items were cut: Count follows (see the top of the file). */
static void fix_count(json_t *page, const paging_keys *k)
{
	json_t *items = json_object_get(page, k->results[0]);
	if (k == &items_keys && json_is_array(items) && json_object_get(page, "Count") != NULL)
		json_object_set_new(page, "Count",
		                    json_integer((json_int_t)json_array_size(items)));
}

int cli_paginate(const cli_caller *c, const cli_cmd *cmd, const json_t *body,
                 const cli_paging_opts *po, json_t **out, shoal_error *err, cli_fail *f)
{
	const paging_keys *k = cmd->paging == CLI_PAGING_TABLES ? &tables_keys : &items_keys;
	*out = NULL;
	json_t *req = json_deep_copy(body);
	json_t *cur = json_null(); /* the token that started the current page */
	long long skip = 0;
	int rc = SHOAL_OK;
	if (po->starting_token != NULL) {
		json_t *v;
		if (cli_token_decode(po->starting_token, k->input_token, &v, &skip) < 0) {
			cli_failf(f, CLI_EXIT_USAGE, false, "Bad starting token: %s",
			          po->starting_token);
			json_decref(req);
			json_decref(cur);
			return -1;
		}
		if (!json_is_null(v))
			json_object_set(req, k->input_token, v);
		json_decref(cur);
		cur = v;
	}
	if (po->page_size > 0)
		json_object_set_new(req, "Limit", json_integer(po->page_size));

	json_t *result = json_object();
	json_t *non_aggregate = NULL;
	json_t *prev_next = NULL;
	char *resume = NULL;
	long long total = 0;
	bool first = true;
	for (;;) {
		json_t *page;
		rc = cli_call(c, cmd->operation, req, &page, err);
		if (rc != SHOAL_OK)
			goto fail;
		json_t *items = json_object_get(page, k->results[0]);
		long long first_skip = 0;
		if (first) {
			if (skip > 0 && json_is_array(items)) {
				size_t drop = (size_t)skip < json_array_size(items)
				                  ? (size_t)skip
				                  : json_array_size(items);
				for (size_t i = 0; i < drop; i++)
					json_array_remove(items, 0);
				first_skip = skip;
				fix_count(page, k);
			}
			if (k->non_aggregate != NULL) {
				json_t *v = json_object_get(page, k->non_aggregate);
				non_aggregate = v != NULL ? json_incref(v) : json_null();
			}
			first = false;
		}
		long long n = json_is_array(items) ? (long long)json_array_size(items) : 0;
		if (po->max_items > 0 && total + n > po->max_items) {
			long long keep = po->max_items - total;
			while ((long long)json_array_size(items) > keep)
				json_array_remove(items, json_array_size(items) - 1);
			fix_count(page, k);
			merge_page(result, page, k);
			resume = cli_token_encode(k->input_token, cur, keep + first_skip);
			json_decref(page);
			break;
		}
		merge_page(result, page, k);
		total += n;
		json_t *next = json_object_get(page, k->output_token);
		if (!is_token(next)) {
			json_decref(page);
			break;
		}
		if (po->max_items > 0 && total == po->max_items) {
			resume = cli_token_encode(k->input_token, next, 0);
			json_decref(page);
			break;
		}
		if (prev_next != NULL && json_equal(prev_next, next)) {
			char *t = json_dumps(next, JSON_COMPACT | JSON_ENCODE_ANY);
			snprintf(err->message, sizeof(err->message),
			         "The same next token was received twice: {'%s': %s}",
			         k->input_token, t != NULL ? t : "?");
			free(t);
			err->code = SHOAL_E_INTERNAL;
			err->source = SHOAL_SRC_PROTOCOL;
			snprintf(err->exception, sizeof(err->exception), "%s",
			         shoal_exception_name(SHOAL_E_INTERNAL));
			json_decref(page);
			rc = SHOAL_E_INTERNAL;
			goto fail;
		}
		json_decref(prev_next);
		prev_next = json_incref(next);
		json_object_set(req, k->input_token, next);
		json_decref(cur);
		cur = json_incref(next);
		json_decref(page);
	}
	if (non_aggregate != NULL)
		json_object_set_new(result, k->non_aggregate, non_aggregate);
	if (resume != NULL) {
		json_object_set_new(result, "NextToken", json_string(resume));
		free(resume);
	}
	json_decref(prev_next);
	json_decref(cur);
	json_decref(req);
	*out = result;
	return SHOAL_OK;

fail:
	json_decref(non_aggregate);
	json_decref(prev_next);
	json_decref(result);
	json_decref(cur);
	json_decref(req);
	return rc;
}
