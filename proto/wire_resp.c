/*
 * wire_resp.c -- data-plane results: storage results -> protobuf responses
 * (node side), Query/Scan responses -> st_page (client and router side, where
 * pages from several partitions or index shards are merged), and failure
 * responses.
 *
 * Responses are built in the caller's arena like every *_to_pb; a NULL
 * st_value (no item, nothing returned, range exhausted) becomes an absent
 * message field, exactly what DynamoDB leaves out of its JSON.
 */
#include <string.h>

#include "proto/wire_int.h"

static int nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory building a response");
}

int wire_get_item_resp_to_pb(sh_arena *a, const st_value *item, Shoal__GetItemResponse **out,
                             char *errmsg)
{
	Shoal__GetItemResponse *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return nomem(errmsg);
	shoal__get_item_response__init(pb);
	int rc = wire_item_to_pb(a, item, &pb->item, errmsg);
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

int wire_put_item_resp_to_pb(sh_arena *a, const st_write_result *res, Shoal__PutItemResponse **out,
                             char *errmsg)
{
	Shoal__PutItemResponse *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return nomem(errmsg);
	shoal__put_item_response__init(pb);
	int rc = wire_item_to_pb(a, res->attributes, &pb->attributes, errmsg);
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

int wire_update_item_resp_to_pb(sh_arena *a, const st_write_result *res,
                                Shoal__UpdateItemResponse **out, char *errmsg)
{
	Shoal__UpdateItemResponse *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return nomem(errmsg);
	shoal__update_item_response__init(pb);
	int rc = wire_item_to_pb(a, res->attributes, &pb->attributes, errmsg);
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

int wire_delete_item_resp_to_pb(sh_arena *a, const st_write_result *res,
                                Shoal__DeleteItemResponse **out, char *errmsg)
{
	Shoal__DeleteItemResponse *pb = sh_arena_alloc(a, sizeof(*pb));
	if (pb == NULL)
		return nomem(errmsg);
	shoal__delete_item_response__init(pb);
	int rc = wire_item_to_pb(a, res->attributes, &pb->attributes, errmsg);
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

/* The fields Query and Scan responses share. */
typedef struct page_pb {
	Shoal__Item **items;
	size_t n_items;
	uint32_t count, scanned;
	Shoal__Item *last;
} page_pb;

static int page_to_pb(sh_arena *a, const st_page *page, page_pb *out, char *errmsg)
{
	uint32_t n = page->items != NULL ? page->count : 0;
	memset(out, 0, sizeof(*out));
	out->items = sh_arena_calloc(a, n, sizeof(*out->items));
	if (out->items == NULL)
		return nomem(errmsg);
	for (uint32_t i = 0; i < n; i++) {
		int rc = wire_item_to_pb(a, &page->items[i], &out->items[i], errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	out->n_items = n;
	out->count = page->count;
	out->scanned = page->scanned;
	return wire_item_to_pb(a, page->last_evaluated_key, &out->last, errmsg);
}

int wire_query_resp_to_pb(sh_arena *a, const st_page *page, Shoal__QueryResponse **out,
                          char *errmsg)
{
	Shoal__QueryResponse *pb = sh_arena_alloc(a, sizeof(*pb));
	page_pb p;
	if (pb == NULL)
		return nomem(errmsg);
	shoal__query_response__init(pb);
	int rc = page_to_pb(a, page, &p, errmsg);
	pb->items = p.items;
	pb->n_items = p.n_items;
	pb->count = p.count;
	pb->scanned_count = p.scanned;
	pb->last_evaluated_key = p.last;
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

int wire_scan_resp_to_pb(sh_arena *a, const st_page *page, Shoal__ScanResponse **out, char *errmsg)
{
	Shoal__ScanResponse *pb = sh_arena_alloc(a, sizeof(*pb));
	page_pb p;
	if (pb == NULL)
		return nomem(errmsg);
	shoal__scan_response__init(pb);
	int rc = page_to_pb(a, page, &p, errmsg);
	pb->items = p.items;
	pb->n_items = p.n_items;
	pb->count = p.count;
	pb->scanned_count = p.scanned;
	pb->last_evaluated_key = p.last;
	*out = rc == SHOAL_OK ? pb : NULL;
	return rc;
}

static int page_from_pb(sh_arena *a, Shoal__Item *const *items, size_t n_items, uint32_t count,
                        uint32_t scanned, const Shoal__Item *last, st_page *out, char *errmsg)
{
	memset(out, 0, sizeof(*out));
	if (n_items > UINT32_MAX)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION, "too many items in a page");
	if (n_items > 0) {
		out->items = sh_arena_calloc(a, n_items, sizeof(st_value));
		if (out->items == NULL)
			return nomem(errmsg);
		for (size_t i = 0; i < n_items; i++) {
			int rc = wire_item_from_pb(a, items[i], &out->items[i], errmsg);
			if (rc != SHOAL_OK)
				return rc;
		}
	}
	/* With Select COUNT there are no items but a count. */
	out->count = n_items > 0 ? (uint32_t)n_items : count;
	out->scanned = scanned;
	if (last != NULL) {
		out->last_evaluated_key = sh_arena_alloc(a, sizeof(st_value));
		if (out->last_evaluated_key == NULL)
			return nomem(errmsg);
		return wire_item_from_pb(a, last, out->last_evaluated_key, errmsg);
	}
	return SHOAL_OK;
}

int wire_query_resp_from_pb(sh_arena *a, const Shoal__QueryResponse *pb, st_page *out, char *errmsg)
{
	return page_from_pb(a, pb->items, pb->n_items, pb->count, pb->scanned_count,
	                    pb->last_evaluated_key, out, errmsg);
}

int wire_scan_resp_from_pb(sh_arena *a, const Shoal__ScanResponse *pb, st_page *out, char *errmsg)
{
	return page_from_pb(a, pb->items, pb->n_items, pb->count, pb->scanned_count,
	                    pb->last_evaluated_key, out, errmsg);
}

int wire_response_set_error(sh_arena *a, Shoal__Response *resp, int code, const char *message,
                            const st_value *old_item, char *errmsg)
{
	resp->status = wire_status_from_code(code);
	resp->result_case = SHOAL__RESPONSE__RESULT__NOT_SET;
	resp->item = NULL;
	const char *m = message != NULL ? message : "";
	char *copy = sh_arena_strndup(a, m, strlen(m));
	if (copy == NULL)
		return nomem(errmsg);
	resp->message = copy;
	if (code == SHOAL_E_CONDITION_FAILED && old_item != NULL)
		return wire_item_to_pb(a, old_item, &resp->item, errmsg);
	return SHOAL_OK;
}
