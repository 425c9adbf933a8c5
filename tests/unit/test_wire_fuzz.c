/* Hostile input: random bytes, truncations and byte flips of valid packed
 * requests, messages nested 100000 deep, garbled DynamoDB JSON.  Every case
 * must end in SHOAL_OK or a clean error with a message -- never a crash, a
 * hang or a leak (run under ASan).  Seeded: SHOAL_SEED reproduces a run. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "proto/wire.h"
#include "tests/lib/tl_values.h"
#include "tests/lib/tl_wire.h"

#define N_SAMPLES 8

static uint64_t rng;

static void setup(void)
{
	tl_arena_setup();
	rng = tl_seed();
}

static uint64_t rnd(uint64_t n)
{
	return n == 0 ? 0 : tl_rand(&rng) % n;
}

/* ------------------------------------------------------------------------ */
/* Valid requests to start from                                              */
/* ------------------------------------------------------------------------ */

typedef struct sample {
	uint8_t *buf;
	size_t len;
} sample;

static sample samples[N_SAMPLES];

static st_value *parse_item(const char *text)
{
	st_value *v = sh_arena_alloc(&tl_arena, sizeof(*v));
	char msg[SH_ERRMSG_SIZE];
	ck_assert_msg(wire_item_from_text(&tl_arena, text, strlen(text), v, msg) == SHOAL_OK, "%s",
	              msg);
	return v;
}

static void pack_sample(int i, Shoal__Request *req)
{
	char msg[SH_ERRMSG_SIZE];
	req->request_id = (uint64_t)i + 1;
	ck_assert_int_eq(wire_pack(&tl_arena, &req->base, &samples[i].buf, &samples[i].len, msg),
	                 SHOAL_OK);
}

static void make_samples(void)
{
	char msg[SH_ERRMSG_SIZE];
	st_value *item =
	    parse_item("{\"pk\":{\"S\":\"user#1\"},\"sk\":{\"N\":\"12.5\"},\"b\":{\"B\":\"AP8Q\"},"
	               "\"m\":{\"M\":{\"l\":{\"L\":[{\"BOOL\":true},{\"NULL\":true},{\"SS\":[\"a\","
	               "\"b\"]}]}}},"
	               "\"ns\":{\"NS\":[\"1\",\"2\"]},\"bs\":{\"BS\":[\"QQ==\"]}}");
	st_value *key = parse_item("{\"pk\":{\"S\":\"user#1\"},\"sk\":{\"N\":\"12.5\"}}");
	st_value *values = parse_item("{\":v\":{\"S\":\"x\"},\":n\":{\"N\":\"1\"}}");
	st_value names;
	ck_assert_int_eq(wire_names_from_text(&tl_arena, "{\"#a\":\"b\"}", 10, &names, msg),
	                 SHOAL_OK);
	int i = 0;

	Shoal__Request req = SHOAL__REQUEST__INIT;
	st_put_req put = {.table = "things",
	                  .item = item,
	                  .condition = "#a <> :v",
	                  .attrs = {&names, values},
	                  .return_values = ST_RV_ALL_OLD};
	req.op_case = SHOAL__REQUEST__OP_PUT_ITEM;
	ck_assert_int_eq(wire_put_req_to_pb(&tl_arena, &put, &req.put_item, msg), SHOAL_OK);
	pack_sample(i++, &req);

	st_get_req get = {.table = "things", .key = key, .projection = "#a", .names = &names};
	req.op_case = SHOAL__REQUEST__OP_GET_ITEM;
	ck_assert_int_eq(wire_get_req_to_pb(&tl_arena, &get, &req.get_item, msg), SHOAL_OK);
	pack_sample(i++, &req);

	st_update_req upd = {.table = "things",
	                     .key = key,
	                     .update = "SET #a = :v ADD c :n",
	                     .attrs = {&names, values},
	                     .return_values = ST_RV_UPDATED_NEW};
	req.op_case = SHOAL__REQUEST__OP_UPDATE_ITEM;
	ck_assert_int_eq(wire_update_req_to_pb(&tl_arena, &upd, &req.update_item, msg), SHOAL_OK);
	pack_sample(i++, &req);

	st_delete_req del = {.table = "things", .key = key, .return_old_on_condition_fail = true};
	req.op_case = SHOAL__REQUEST__OP_DELETE_ITEM;
	ck_assert_int_eq(wire_delete_req_to_pb(&tl_arena, &del, &req.delete_item, msg), SHOAL_OK);
	pack_sample(i++, &req);

	st_query_req q = {.table = "things",
	                  .index = "by-sk",
	                  .key_condition = "pk = :v",
	                  .filter = "c > :n",
	                  .attrs = {NULL, values},
	                  .forward = false,
	                  .limit = 10,
	                  .select = ST_SELECT_COUNT,
	                  .exclusive_start_key = key};
	req.op_case = SHOAL__REQUEST__OP_QUERY;
	ck_assert_int_eq(wire_query_req_to_pb(&tl_arena, &q, &req.query, msg), SHOAL_OK);
	pack_sample(i++, &req);

	st_scan_req s = {.table = "things", .segment = 1, .total_segments = 3, .limit = 5};
	req.op_case = SHOAL__REQUEST__OP_SCAN;
	ck_assert_int_eq(wire_scan_req_to_pb(&tl_arena, &s, &req.scan, msg), SHOAL_OK);
	pack_sample(i++, &req);

	st_index_def gsi = {.name = "by-g",
	                    .key = {{"g", ST_S}, {"sk", ST_N}},
	                    .projection = ST_PROJ_KEYS_ONLY,
	                    .write_shards = 4};
	st_key_attr attrs[] = {{"pk", ST_S}, {"sk", ST_N}, {"g", ST_S}};
	st_table_def def = {.name = "things",
	                    .key = {{"pk", ST_S}, {"sk", ST_N}},
	                    .attrs = attrs,
	                    .n_attrs = 3,
	                    .indexes = &gsi,
	                    .n_indexes = 1};
	req.op_case = SHOAL__REQUEST__OP_CREATE_TABLE;
	ck_assert_int_eq(wire_create_table_to_pb(&tl_arena, &def, &req.create_table, msg),
	                 SHOAL_OK);
	pack_sample(i++, &req);

	Shoal__ListTablesRequest lt = SHOAL__LIST_TABLES_REQUEST__INIT;
	WIRE_SET(&lt, limit, 5);
	WIRE_SET(&lt, exclusive_start_table_name, "abc");
	req.op_case = SHOAL__REQUEST__OP_LIST_TABLES;
	req.list_tables = &lt;
	pack_sample(i++, &req);
	ck_assert_int_eq(i, N_SAMPLES);
}

/* ------------------------------------------------------------------------ */
/* Decoding one buffer the way a server would                                */
/* ------------------------------------------------------------------------ */

static bool clean(int rc, const char *msg)
{
	if (rc == SHOAL_OK)
		return true;
	return (rc == SHOAL_E_SERIALIZATION || rc == SHOAL_E_VALIDATION) && msg[0] != '\0';
}

/* Unpacks, converts whatever operation it holds, re-packs it: returns the
 * unpack code. */
static int serve(const uint8_t *buf, size_t len)
{
	char msg[SH_ERRMSG_SIZE] = "";
	Shoal__Request *req;
	int rc = wire_unpack_request(NULL, buf, len, &req, msg);
	ck_assert_msg(clean(rc, msg), "unpack: %s: %s", shoal_err_name(rc), msg);
	if (rc != SHOAL_OK) {
		ck_assert_ptr_null(req);
		return rc;
	}
	sh_arena a;
	sh_arena_init(&a);
	int crc = SHOAL_OK;
	msg[0] = '\0';
	switch (req->op_case) {
	case SHOAL__REQUEST__OP_PUT_ITEM: {
		st_put_req r;
		crc = wire_put_req_from_pb(&a, req->put_item, &r, msg);
		break;
	}
	case SHOAL__REQUEST__OP_GET_ITEM: {
		st_get_req r;
		crc = wire_get_req_from_pb(&a, req->get_item, &r, msg);
		break;
	}
	case SHOAL__REQUEST__OP_UPDATE_ITEM: {
		st_update_req r;
		crc = wire_update_req_from_pb(&a, req->update_item, &r, msg);
		break;
	}
	case SHOAL__REQUEST__OP_DELETE_ITEM: {
		st_delete_req r;
		crc = wire_delete_req_from_pb(&a, req->delete_item, &r, msg);
		break;
	}
	case SHOAL__REQUEST__OP_QUERY: {
		st_query_req r;
		crc = wire_query_req_from_pb(&a, req->query, &r, msg);
		break;
	}
	case SHOAL__REQUEST__OP_SCAN: {
		st_scan_req r;
		crc = wire_scan_req_from_pb(&a, req->scan, &r, msg);
		break;
	}
	case SHOAL__REQUEST__OP_CREATE_TABLE: {
		st_table_def d;
		crc = wire_create_table_from_pb(&a, req->create_table, &d, msg);
		if (crc == SHOAL_OK) {
			/* What was accepted can be described. */
			st_table_info info = {.def = d};
			Shoal__TableDescription *td;
			crc = wire_table_desc_to_pb(&a, &info, "ACTIVE", &td, msg);
		}
		break;
	}
	case SHOAL__REQUEST__OP_LIST_TABLES: {
		const char *start;
		uint32_t limit;
		crc = wire_list_tables_from_pb(&a, req->list_tables, &start, &limit, msg);
		if (crc == SHOAL_OK)
			ck_assert(limit >= 1 && limit <= 100);
		break;
	}
	case SHOAL__REQUEST__OP_DESCRIBE_TABLE: {
		const char *name;
		crc = wire_describe_table_from_pb(&a, req->describe_table, &name, msg);
		break;
	}
	default:
		break;
	}
	ck_assert_msg(clean(crc, msg), "convert %s: %s: %s", wire_op_name(req->op_case),
	              shoal_err_name(crc), msg);
	/* Whatever was decoded packs again and decodes to the same size. */
	uint8_t *again;
	size_t again_len;
	ck_assert_int_eq(wire_pack(&a, &req->base, &again, &again_len, msg), SHOAL_OK);
	Shoal__Request *req2;
	ck_assert_int_eq(wire_unpack_request(NULL, again, again_len, &req2, msg), SHOAL_OK);
	ck_assert_uint_eq(protobuf_c_message_get_packed_size(&req2->base), again_len);
	wire_free_request(NULL, req2);
	wire_free_request(NULL, req);
	sh_arena_fini(&a);
	return rc;
}

START_TEST(test_samples_decode)
{
	make_samples();
	for (int i = 0; i < N_SAMPLES; i++)
		ck_assert_int_eq(serve(samples[i].buf, samples[i].len), SHOAL_OK);
}
END_TEST

START_TEST(test_mutations)
{
	make_samples();
	uint8_t *buf = sh_arena_alloc(&tl_arena, 4096);
	int ok = 0, refused = 0;
	for (int iter = 0; iter < 20000; iter++) {
		const sample *s = &samples[rnd(N_SAMPLES)];
		size_t len = s->len;
		ck_assert_uint_le(len, 2048);
		memcpy(buf, s->buf, len);
		switch (rnd(4)) {
		case 0: /* truncate */
			len = rnd(len);
			break;
		case 1: /* flip 1..8 bytes */
			for (uint64_t k = 1 + rnd(8); k > 0; k--)
				buf[rnd(len)] ^= (uint8_t)(1 + rnd(255));
			break;
		case 2: { /* splice a random run in the middle */
			size_t at = rnd(len), n = 1 + rnd(16);
			memmove(buf + at + n, buf + at, len - at);
			for (size_t k = 0; k < n; k++)
				buf[at + k] = (uint8_t)rnd(256);
			len += n;
			break;
		}
		default: /* set a length-ish byte to something large */
			buf[rnd(len)] = (uint8_t)(0x80 | rnd(128));
			break;
		}
		if (serve(buf, len) == SHOAL_OK)
			ok++;
		else
			refused++;
	}
	/* Both outcomes are exercised. */
	ck_assert_int_gt(ok, 100);
	ck_assert_int_gt(refused, 100);
}
END_TEST

START_TEST(test_random_bytes)
{
	uint8_t buf[512];
	for (int iter = 0; iter < 20000; iter++) {
		size_t len = rnd(sizeof(buf));
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)rnd(256);
		serve(buf, len);
	}
	/* Random bytes as a Response too. */
	for (int iter = 0; iter < 5000; iter++) {
		size_t len = rnd(sizeof(buf));
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)rnd(256);
		char msg[SH_ERRMSG_SIZE] = "";
		Shoal__Response *resp;
		int rc = wire_unpack_response(NULL, buf, len, &resp, msg);
		ck_assert_msg(clean(rc, msg), "%s", msg);
		if (rc == SHOAL_OK && resp->result_case == SHOAL__RESPONSE__RESULT_QUERY) {
			st_page page;
			rc = wire_query_resp_from_pb(&tl_arena, resp->query, &page, msg);
			ck_assert_msg(clean(rc, msg), "%s", msg);
		}
		wire_free_response(NULL, resp);
	}
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Deep nesting                                                              */
/* ------------------------------------------------------------------------ */

START_TEST(test_hostile_nesting)
{
	static const size_t depths[] = {100000, 20000, 1000, 200};
	for (int map = 0; map <= 1; map++) {
		for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
			size_t len;
			const uint8_t *buf = tl_nested_put(&tl_arena, map, depths[i], &len);
			char msg[SH_ERRMSG_SIZE];
			Shoal__Request *req;
			int rc = wire_unpack_request(NULL, buf, len, &req, msg);
			ck_assert_int_eq(rc, SHOAL_E_SERIALIZATION);
			ck_assert_ptr_null(req);
			ck_assert_msg(strstr(msg, "nested deeper than") != NULL, "%s", msg);
			/* Truncated anywhere, still a clean refusal. */
			for (int k = 0; k < 50; k++)
				ck_assert_int_ne(serve(buf, 1 + rnd(len - 1)), SHOAL_OK);
		}
	}
	/* Moderate nesting passes framing and is refused by the converter. */
	size_t len;
	const uint8_t *buf = tl_nested_put(&tl_arena, true, WIRE_MAX_VALUE_DEPTH + 2, &len);
	ck_assert_int_eq(serve(buf, len), SHOAL_OK); /* unpack OK, conversion refuses */
}
END_TEST

/* ------------------------------------------------------------------------ */
/* JSON                                                                      */
/* ------------------------------------------------------------------------ */

static void json_case(const char *text, size_t len)
{
	sh_arena a;
	sh_arena_init(&a);
	char msg[SH_ERRMSG_SIZE] = "";
	st_value v;
	int rc = wire_item_from_text(&a, text, len, &v, msg);
	ck_assert_msg(clean(rc, msg), "%s: %s", shoal_err_name(rc), msg);
	if (rc == SHOAL_OK) {
		/* Whatever was accepted can be written back (names with U+0000
		 * cannot be read, so everything read is writable), and the
		 * normaliser copes with it. */
		json_t *j;
		rc = wire_item_to_json(&v, &j, msg);
		ck_assert_msg(rc == SHOAL_OK, "%s", msg);
		json_decref(j);
		rc = st_value_normalize(&a, &v, msg);
		ck_assert_msg(clean(rc, msg), "%s", msg);
	}
	msg[0] = '\0';
	rc = wire_value_from_text(&a, text, len, &v, msg);
	ck_assert_msg(clean(rc, msg), "%s: %s", shoal_err_name(rc), msg);
	sh_arena_fini(&a);
}

START_TEST(test_json_garbage)
{
	static const char *seeds[] = {
	    "{\"pk\":{\"S\":\"a\"},\"n\":{\"N\":\"1.5\"},\"b\":{\"B\":\"QUJD\"}}",
	    "{\"m\":{\"M\":{\"x\":{\"L\":[{\"SS\":[\"a\"]},{\"NS\":[\"1\"]},{\"BS\":[\"QQ==\"]}]}}}"
	    "}",
	    "{\"t\":{\"BOOL\":true},\"u\":{\"NULL\":true},\"v\":{\"S\":\"\\u0000\\n\"}}",
	};
	static const char alphabet[] = "{}[]\":,\\ SNBLMOUL0123456789.eE+-truefalsenull=/AQ";
	char buf[512];
	for (int iter = 0; iter < 10000; iter++) {
		size_t len;
		if (rnd(4) == 0) {
			len = rnd(128);
			for (size_t i = 0; i < len; i++)
				buf[i] = rnd(3) == 0 ? (char)rnd(256)
				                     : alphabet[rnd(sizeof(alphabet) - 1)];
		} else {
			const char *s = seeds[rnd(3)];
			len = strlen(s);
			memcpy(buf, s, len);
			for (uint64_t k = 1 + rnd(4); k > 0; k--) {
				switch (rnd(3)) {
				case 0:
					buf[rnd(len)] = alphabet[rnd(sizeof(alphabet) - 1)];
					break;
				case 1:
					len = rnd(len + 1);
					break;
				default:
					if (len > 0)
						buf[rnd(len)] = (char)rnd(256);
					break;
				}
			}
		}
		json_case(buf, len);
	}
}
END_TEST

START_TEST(test_json_deep)
{
	size_t n = 200000;
	char *text = sh_malloc(2 * n + 8);
	/* Raw arrays and objects far past jansson's limit. */
	memset(text, '[', n);
	json_case(text, n);
	for (size_t i = 0; i < n / 6; i++)
		memcpy(text + 6 * i, "{\"a\":[", 6);
	json_case(text, n / 6 * 6);
	/* DynamoDB JSON nesting within jansson's limit, past the converter's. */
	size_t len = 0;
	for (int i = 0; i < 1000; i++)
		len += (size_t)sprintf(text + len, "{\"L\":[");
	len += (size_t)sprintf(text + len, "{\"NULL\":true}");
	for (int i = 0; i < 1000; i++)
		len += (size_t)sprintf(text + len, "]}");
	sh_arena a;
	sh_arena_init(&a);
	char msg[SH_ERRMSG_SIZE];
	st_value v;
	ck_assert_int_eq(wire_value_from_text(&a, text, len, &v, msg), SHOAL_E_VALIDATION);
	ck_assert_msg(strstr(msg, "Nesting Levels") != NULL, "%s", msg);
	sh_arena_fini(&a);
	sh_free(text);
}
END_TEST

static Suite *fuzz_suite(void)
{
	return tl_suite("wire_fuzz", setup, tl_arena_teardown, 120,
	                TL_TESTS(test_samples_decode, test_mutations, test_random_bytes,
	                         test_hostile_nesting, test_json_garbage, test_json_deep));
}

TL_MAIN(fuzz_suite)
