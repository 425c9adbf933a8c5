/* PROVISIONED tables: capacity in the catalog record (old versions still
 * read), its validation, UpdateTable's capacity rules (storage/
 * catalog_capacity.c), the TableDefine converter and the description. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "proto/wire.h"
#include "storage/catalog.h"
#include "storage/engine.h"
#include "storage/index.h"
#include "storage/storage.h"
#include "tests/lib/tl_store.h"

#define DAY  86400000LL
#define HOUR 3600000LL
/* Thursday, October 8, 2026, 00:00:00 UTC */
#define T0 1791417600000LL

static void setup(void)
{
	tl_store_open("provisioned", &(st_env_options){.nosync = true});
}

/* ------------------------------------------------------------------------ */
/* Definitions                                                               */
/* ------------------------------------------------------------------------ */

typedef struct tdef {
	st_table_def def;
	st_key_attr attrs[4];
	st_index_def idx[4];
} tdef;

/* PK (S) + SK (N), GSI "gsi" on G, LSI "lsi" on PK/L; PAY_PER_REQUEST. */
static void tdef_init(tdef *t, const char *name)
{
	memset(t, 0, sizeof(*t));
	t->def.name = name;
	t->def.key.hash = (st_key_attr){"PK", ST_S};
	t->def.key.range = (st_key_attr){"SK", ST_N};
	t->attrs[0] = (st_key_attr){"PK", ST_S};
	t->attrs[1] = (st_key_attr){"SK", ST_N};
	t->attrs[2] = (st_key_attr){"G", ST_S};
	t->attrs[3] = (st_key_attr){"L", ST_S};
	t->def.attrs = t->attrs;
	t->def.n_attrs = 4;
	t->def.indexes = t->idx;
	t->def.n_indexes = 2;
	t->def.created_ms = T0 - 5 * DAY;
	t->idx[0] = (st_index_def){.name = "gsi",
	                           .id = 1,
	                           .key = {{"G", ST_S}, {NULL, ST_NONE}},
	                           .projection = ST_PROJ_ALL,
	                           .write_shards = 1,
	                           .status = ST_INDEX_ACTIVE};
	t->idx[1] = (st_index_def){.name = "lsi",
	                           .id = 2,
	                           .local = true,
	                           .key = {{"PK", ST_S}, {"L", ST_S}},
	                           .projection = ST_PROJ_KEYS_ONLY,
	                           .write_shards = 1,
	                           .status = ST_INDEX_ACTIVE};
}

/* PROVISIONED 5/5, the GSI 3/3. */
static void tdef_prov(tdef *t, const char *name)
{
	tdef_init(t, name);
	t->def.billing = ST_BILLING_PROVISIONED;
	t->def.tp = (st_throughput){5, 5, 0, 0};
	t->idx[0].tp = (st_throughput){3, 3, 0, 0};
}

static void create_ok(const st_table_def *def)
{
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	int rc = st_table_create(txn, def, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "create %s: %s", def->name, tl_msg);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
}

static st_table_def described(const char *name)
{
	st_table_info info;
	int rc = st_table_describe(tl_env, name, &tl_arena, &info, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	return info.def;
}

/* ------------------------------------------------------------------------ */
/* The record                                                                */
/* ------------------------------------------------------------------------ */

START_TEST(test_codec_round_trip)
{
	tdef t;
	tdef_prov(&t, "Prov");
	t.def.id = 7;
	t.def.last_increase_ms = T0 + 1;
	t.def.last_decrease_ms = T0 + 2;
	t.def.decreases_today = 3;
	t.def.decreases_day = T0 / DAY;
	t.def.billing_changed_ms = T0 - DAY;
	t.def.capacity_ms = T0 + 2;
	t.idx[0].last_increase_ms = T0 + 10;
	t.idx[0].last_decrease_ms = T0 + 11;
	t.idx[0].decreases_today = 2;
	t.idx[0].decreases_day = T0 / DAY;
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(st_catalog_encode(&tl_arena, &t.def, 4, 100, &buf, &len), SHOAL_OK);
	ck_assert_uint_eq(buf[0], 4);
	st_table_info info;
	ck_assert_int_eq(st_catalog_decode("Prov", buf, len, &tl_arena, &info, tl_msg), SHOAL_OK);
	const st_table_def *d = &info.def;
	ck_assert_int_eq(d->billing, ST_BILLING_PROVISIONED);
	ck_assert_uint_eq(d->tp.rcu, 5);
	ck_assert_uint_eq(d->tp.wcu, 5);
	ck_assert_int_eq(d->last_increase_ms, T0 + 1);
	ck_assert_int_eq(d->last_decrease_ms, T0 + 2);
	ck_assert_uint_eq(d->decreases_today, 3);
	ck_assert_int_eq(d->decreases_day, T0 / DAY);
	ck_assert_int_eq(d->billing_changed_ms, T0 - DAY);
	ck_assert_int_eq(d->capacity_ms, T0 + 2);
	ck_assert_uint_eq(d->indexes[0].tp.rcu, 3);
	ck_assert_uint_eq(d->indexes[0].tp.wcu, 3);
	ck_assert_int_eq(d->indexes[0].last_increase_ms, T0 + 10);
	ck_assert_int_eq(d->indexes[0].last_decrease_ms, T0 + 11);
	ck_assert_uint_eq(d->indexes[0].decreases_today, 2);
	ck_assert_uint_eq(d->indexes[1].tp.rcu, 0);
	ck_assert_uint_eq(info.item_count, 4);

	/* On-demand maximums. */
	tdef_init(&t, "Odt");
	t.def.tp = (st_throughput){0, 0, 100, 0};
	t.idx[0].tp = (st_throughput){0, 0, 0, 40};
	ck_assert_int_eq(st_catalog_encode(&tl_arena, &t.def, 0, 0, &buf, &len), SHOAL_OK);
	ck_assert_int_eq(st_catalog_decode("Odt", buf, len, &tl_arena, &info, tl_msg), SHOAL_OK);
	ck_assert_int_eq(info.def.billing, ST_BILLING_PAY_PER_REQUEST);
	ck_assert_uint_eq(info.def.tp.max_rcu, 100);
	ck_assert_uint_eq(info.def.tp.max_wcu, 0);
	ck_assert_uint_eq(info.def.indexes[0].tp.max_wcu, 40);

	/* A billing mode byte this build does not know is damage. */
	buf[len - 89] = 2; /* TCAP (77) and META (12: no tags) end the record */
	ck_assert_int_eq(st_catalog_decode("Odt", buf, len, &tl_arena, &info, tl_msg),
	                 SHOAL_E_INTERNAL);
	ck_assert_str_eq(tl_msg, "corrupt catalog record for table Odt: billing mode");
}
END_TEST

/* Version 2 and 1 records (before capacity; before the next index id) read
 * as PAY_PER_REQUEST with nothing set: built from a version 3 record by
 * cutting the fields out, as the older builds wrote them. */
START_TEST(test_codec_old_versions)
{
	tdef t;
	tdef_init(&t, "Old");
	t.def.n_indexes = 1; /* the GSI last, so its CAP sits before the counter */
	t.def.n_attrs = 3;
	t.def.id = 3;
	uint8_t *v3;
	size_t len;
	ck_assert_int_eq(st_catalog_encode(&tl_arena, &t.def, 9, 900, &v3, &len), SHOAL_OK);
	/* Version 3: version 4 without its META (12 bytes when there are no
	 * tags): no deletion protection, class or tags. */
	len -= 12;
	v3[0] = 3;
	st_table_info info3;
	ck_assert_int_eq(st_catalog_decode("Old", v3, len, &tl_arena, &info3, tl_msg), SHOAL_OK);
	ck_assert(!info3.def.deletion_protection);
	ck_assert_uint_eq(info3.def.n_tags, 0);
	ck_assert_int_eq(info3.def.table_class, ST_CLASS_NONE);
	/* ... index CAP (60) | next index id (2) | TCAP (77) */
	ck_assert_uint_gt(len, 139);
	uint8_t v2[512];
	size_t n2 = 0;
	memcpy(v2, v3, len - 139);
	n2 = len - 139;
	memcpy(v2 + n2, v3 + len - 79, 2);
	n2 += 2;
	v2[0] = 2;
	st_table_info info;
	int rc = st_catalog_decode("Old", v2, n2, &tl_arena, &info, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(info.def.billing, ST_BILLING_PAY_PER_REQUEST);
	ck_assert_uint_eq(info.def.tp.rcu + info.def.tp.wcu + info.def.tp.max_rcu, 0);
	ck_assert_int_eq(info.def.capacity_ms, 0);
	ck_assert_int_eq(info.def.billing_changed_ms, 0);
	ck_assert_uint_eq(info.def.n_indexes, 1);
	ck_assert_str_eq(info.def.indexes[0].name, "gsi");
	ck_assert_uint_eq(info.def.indexes[0].tp.rcu, 0);
	ck_assert_uint_eq(info.def.next_index_id, 2);
	ck_assert_uint_eq(info.item_count, 9);
	/* Version 1: without the next index id either. */
	uint8_t v1[512];
	memcpy(v1, v2, n2 - 2);
	v1[0] = 1;
	rc = st_catalog_decode("Old", v1, n2 - 2, &tl_arena, &info, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	ck_assert_uint_eq(info.def.next_index_id, 2);
	ck_assert_int_eq(info.def.billing, ST_BILLING_PAY_PER_REQUEST);
	/* A version 2 record with version 3's fields is refused, not misread. */
	v3[0] = 2;
	ck_assert_int_eq(st_catalog_decode("Old", v3, len, &tl_arena, &info, tl_msg),
	                 SHOAL_E_INTERNAL);

	/* An old record in the catalog: described, then rewritten as version 4
	 * by an UpdateTable that sets a maximum. */
	MDB_txn *mt;
	ck_assert_int_eq(mdb_txn_begin(tl_env->env, NULL, 0, &mt), 0);
	MDB_val k = {3, "Old"}, v = {n2, v2};
	ck_assert_int_eq(mdb_put(mt, tl_env->catalog, &k, &v, 0), 0);
	ck_assert_int_eq(mdb_txn_commit(mt), 0);
	st_table_def d = described("Old");
	ck_assert_int_eq(d.billing, ST_BILLING_PAY_PER_REQUEST);
	st_table_update_req u = {.name = "Old", .cap = {.set_max_rcu = true, .max_rcu = 50}};
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, T0);
	rc = st_table_update(txn, &u, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	d = described("Old");
	ck_assert_uint_eq(d.tp.max_rcu, 50);
	ck_assert_int_eq(d.capacity_ms, T0);
	ck_assert_int_eq(d.created_ms, t.def.created_ms);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Validation of a definition                                                */
/* ------------------------------------------------------------------------ */

static void stored_err(const st_table_def *def, const char *want)
{
	st_table_def out;
	int rc = st_table_def_stored(def, &tl_arena, &out, tl_msg);
	ck_assert_msg(rc == SHOAL_E_VALIDATION, "%s: %s", shoal_err_name(rc), tl_msg);
	ck_assert_str_eq(tl_msg, want);
}

START_TEST(test_check_def)
{
	tdef t;
	tdef_prov(&t, "Prov");
	st_table_def out;
	ck_assert_int_eq(st_table_def_stored(&t.def, &tl_arena, &out, tl_msg), SHOAL_OK);
	t.def.tp.wcu = 0;
	stored_err(&t.def, "One or more parameter values were invalid: ReadCapacityUnits and "
	                   "WriteCapacityUnits must both be specified when BillingMode is "
	                   "PROVISIONED");
	tdef_prov(&t, "Prov");
	t.idx[0].tp.rcu = 0;
	stored_err(&t.def, "One or more parameter values were invalid: ProvisionedThroughput is "
	                   "not specified for index: gsi");
	tdef_prov(&t, "Prov");
	t.def.tp.max_wcu = 9;
	stored_err(&t.def, "One or more parameter values were invalid: MaxWriteRequestUnits for "
	                   "OnDemandThroughput cannot be specified when table BillingMode is "
	                   "PROVISIONED.");
	tdef_prov(&t, "Prov");
	t.idx[0].tp.max_rcu = 9;
	stored_err(&t.def, "One or more parameter values were invalid: MaxReadRequestUnits for "
	                   "OnDemandThroughput for index : gsi cannot be specified when the table "
	                   "BillingMode is PROVISIONED");
	tdef_init(&t, "Ppr");
	t.def.tp.rcu = 1;
	stored_err(&t.def, "One or more parameter values were invalid: Neither ReadCapacityUnits "
	                   "nor WriteCapacityUnits can be specified when BillingMode is "
	                   "PAY_PER_REQUEST");
	tdef_init(&t, "Ppr");
	t.idx[0].tp.wcu = 1;
	stored_err(&t.def, "One or more parameter values were invalid: ProvisionedThroughput "
	                   "should not be specified for index: gsi when BillingMode is "
	                   "PAY_PER_REQUEST");
	/* An LSI shares the table's capacity: whatever it carries is dropped. */
	tdef_prov(&t, "Prov");
	t.idx[1].tp = (st_throughput){7, 7, 0, 0};
	t.idx[1].decreases_today = 2;
	ck_assert_int_eq(st_table_def_stored(&t.def, &tl_arena, &out, tl_msg), SHOAL_OK);
	ck_assert_uint_eq(out.indexes[1].tp.rcu, 0);
	ck_assert_uint_eq(out.indexes[1].decreases_today, 0);
	ck_assert_uint_eq(out.indexes[0].tp.rcu, 3);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* UpdateTable's capacity rules                                              */
/* ------------------------------------------------------------------------ */

/* st_catalog_update_capacity on a copy of old (indexes copied). */
static int upd(const st_table_def *old, const st_table_update_req *req, int64_t now,
               st_table_def *d, bool *changed)
{
	*d = *old;
	d->indexes = sh_arena_memdup(&tl_arena, old->indexes, old->n_indexes * sizeof(*d->indexes));
	tl_msg[0] = '\0';
	return st_catalog_update_capacity(old, req, now, d, changed, tl_msg);
}

static void upd_err(const st_table_def *old, const st_table_update_req *req, int64_t now, int code,
                    const char *want)
{
	st_table_def d;
	bool changed;
	int rc = upd(old, req, now, &d, &changed);
	ck_assert_msg(rc == code, "%s (%s)", shoal_err_name(rc), tl_msg);
	ck_assert_str_eq(tl_msg, want);
}

static st_table_def upd_ok(const st_table_def *old, const st_table_update_req *req, int64_t now)
{
	st_table_def d;
	bool changed;
	int rc = upd(old, req, now, &d, &changed);
	ck_assert_msg(rc == SHOAL_OK, "%s (%s)", shoal_err_name(rc), tl_msg);
	ck_assert(changed);
	ck_assert_int_ge(d.capacity_ms, now);
	ck_assert_int_gt(d.capacity_ms, old->capacity_ms);
	return d;
}

#define TP(r, w)                                                                                   \
	{                                                                                          \
		.set_tp = true, .rcu = (r), .wcu = (w)                                             \
	}

START_TEST(test_update_rules)
{
	tdef p, o;
	tdef_prov(&p, "Prov");
	tdef_init(&o, "Ppr");

	/* The same units: "will not change", for the table and for a GSI. */
	st_table_update_req same = {.name = "Prov", .cap = TP(5, 5)};
	upd_err(&p.def, &same, T0, SHOAL_E_VALIDATION,
	        "The provisioned throughput for the table will not change. The requested value "
	        "equals the current value. Current ReadCapacityUnits provisioned for the table: 5. "
	        "Requested ReadCapacityUnits: 5. Current WriteCapacityUnits provisioned for the "
	        "table: 5. Requested WriteCapacityUnits: 5. Refer to the Amazon DynamoDB Developer "
	        "Guide for current limits and how to request higher limits.");
	same.set_billing = true; /* BillingMode PROVISIONED with them: the same */
	same.billing = ST_BILLING_PROVISIONED;
	upd_err(&p.def, &same, T0, SHOAL_E_VALIDATION,
	        "The provisioned throughput for the table will not change. The requested value "
	        "equals the current value. Current ReadCapacityUnits provisioned for the table: 5. "
	        "Requested ReadCapacityUnits: 5. Current WriteCapacityUnits provisioned for the "
	        "table: 5. Requested WriteCapacityUnits: 5. Refer to the Amazon DynamoDB Developer "
	        "Guide for current limits and how to request higher limits.");
	st_index_capacity_req gsame = {"gsi", TP(3, 3)};
	st_table_update_req g = {.name = "Prov", .update = &gsame, .n_update = 1};
	upd_err(&p.def, &g, T0, SHOAL_E_VALIDATION,
	        "The provisioned throughput for the index gsi will not change. The requested value "
	        "equals the current value. Current ReadCapacityUnits provisioned for index gsi: 3. "
	        "Requested ReadCapacityUnits: 3. Current WriteCapacityUnits provisioned for index "
	        "gsi: 3. Requested WriteCapacityUnits: 3. Refer to the Amazon DynamoDB Developer "
	        "Guide for current limits and how to request higher limits.");
	/* GSI Updates name a GSI. */
	st_index_capacity_req gnone = {"nope", TP(3, 4)};
	g.update = &gnone;
	upd_err(&p.def, &g, T0, SHOAL_E_NOT_FOUND,
	        "Requested resource not found: Index: nope not found");
	st_index_capacity_req glsi = {"lsi", TP(3, 4)};
	g.update = &glsi;
	upd_err(&p.def, &g, T0, SHOAL_E_VALIDATION,
	        "Cannot update an index that is not a GlobalSecondaryIndex: lsi");

	/* Units on a PAY_PER_REQUEST table, without switching. */
	st_table_update_req on_ppr = {.name = "Ppr", .cap = TP(5, 5)};
	upd_err(&o.def, &on_ppr, T0, SHOAL_E_VALIDATION,
	        "One or more parameter values were invalid: Neither ReadCapacityUnits nor "
	        "WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST");
	st_index_capacity_req gup = {"gsi", TP(3, 4)};
	st_table_update_req g_ppr = {.name = "Ppr", .update = &gup, .n_update = 1};
	upd_err(&o.def, &g_ppr, T0, SHOAL_E_VALIDATION,
	        "One or more parameter values were invalid: The only Updates for index: gsi when "
	        "TableThroughputMode is PAY_PER_REQUEST can be to OnDemandThroughput, "
	        "WarmThroughput");
	/* OnDemandThroughput on a PROVISIONED table. */
	st_table_update_req odt_prov = {.name = "Prov",
	                                .cap = {.set_max_wcu = true, .max_wcu = 10}};
	upd_err(&p.def, &odt_prov, T0, SHOAL_E_VALIDATION,
	        "One or more parameter values were invalid: MaxWriteRequestUnits for "
	        "OnDemandThroughput cannot be specified when the table BillingMode is PROVISIONED");
	st_index_capacity_req godt = {"gsi", {.set_max_rcu = true, .max_rcu = 10}};
	st_table_update_req godt_prov = {.name = "Prov", .update = &godt, .n_update = 1};
	upd_err(&p.def, &godt_prov, T0, SHOAL_E_VALIDATION,
	        "One or more parameter values were invalid: MaxReadRequestUnits for "
	        "OnDemandThroughput for index : gsi cannot be specified when the table BillingMode "
	        "is PROVISIONED");

	/* Switch to PROVISIONED: every GSI needs units. */
	st_table_update_req sw = {.name = "Ppr",
	                          .set_billing = true,
	                          .billing = ST_BILLING_PROVISIONED,
	                          .cap = TP(10, 20)};
	upd_err(
	    &o.def, &sw, T0, SHOAL_E_VALIDATION,
	    "One or more parameter values were invalid: ProvisionedThroughput must be specified "
	    "for index: gsi");
	o.def.tp.max_rcu = 100; /* maximums go with the switch */
	o.idx[0].tp.max_wcu = 100;
	sw.update = &gup;
	sw.n_update = 1;
	st_table_def d = upd_ok(&o.def, &sw, T0 + 5);
	ck_assert_int_eq(d.billing, ST_BILLING_PROVISIONED);
	ck_assert_uint_eq(d.tp.rcu, 10);
	ck_assert_uint_eq(d.tp.wcu, 20);
	ck_assert_uint_eq(d.tp.max_rcu, 0);
	ck_assert_uint_eq(d.indexes[0].tp.rcu, 3);
	ck_assert_uint_eq(d.indexes[0].tp.wcu, 4);
	ck_assert_uint_eq(d.indexes[0].tp.max_wcu, 0);
	ck_assert_uint_eq(d.indexes[1].tp.rcu, 0); /* the LSI */
	ck_assert_int_eq(d.last_increase_ms, 0);
	ck_assert_int_eq(d.billing_changed_ms, 0);
	ck_assert_int_eq(d.capacity_ms, T0 + 5);

	/* And back: units cleared, LastUpdateToPayPerRequestDateTime set; a
	 * maximum in the same request. */
	st_table_update_req back = {.name = "Ppr",
	                            .set_billing = true,
	                            .billing = ST_BILLING_PAY_PER_REQUEST,
	                            .cap = {.set_max_rcu = true, .max_rcu = 70}};
	st_table_def d2 = upd_ok(&d, &back, T0 + 3); /* a clock behind: capacity_ms still grows */
	ck_assert_int_eq(d2.billing, ST_BILLING_PAY_PER_REQUEST);
	ck_assert_uint_eq(d2.tp.rcu + d2.tp.wcu + d2.indexes[0].tp.rcu + d2.indexes[0].tp.wcu, 0);
	ck_assert_uint_eq(d2.tp.max_rcu, 70);
	ck_assert_int_eq(d2.billing_changed_ms, T0 + 3);
	ck_assert_int_eq(d2.capacity_ms, T0 + 6);
	/* A GSI Update with units while switching to PAY_PER_REQUEST. */
	back.update = &gup;
	back.n_update = 1;
	upd_err(&d, &back, T0, SHOAL_E_VALIDATION,
	        "One or more parameter values were invalid: Neither ReadCapacityUnits nor "
	        "WriteCapacityUnits can be specified for index: gsi when BillingMode is "
	        "PAY_PER_REQUEST");
	/* BillingMode PAY_PER_REQUEST re-sent: accepted, nothing changes. */
	st_table_update_req again = {
	    .name = "Ppr", .set_billing = true, .billing = ST_BILLING_PAY_PER_REQUEST};
	bool changed = true;
	ck_assert_int_eq(upd(&d2, &again, T0 + 9, &d, &changed), SHOAL_OK);
	ck_assert(!changed);
	ck_assert_int_eq(d.capacity_ms, d2.capacity_ms);

	/* OnDemandThroughput: set one, remove with -1, per GSI too. */
	st_index_capacity_req gmax = {"gsi", {.set_max_wcu = true, .max_wcu = 40}};
	st_table_update_req odt = {
	    .name = "Ppr",
	    .cap = {.set_max_rcu = true, .max_rcu = -1, .set_max_wcu = true, .max_wcu = 30},
	    .update = &gmax,
	    .n_update = 1};
	d = upd_ok(&d2, &odt, T0 + 10);
	ck_assert_uint_eq(d.tp.max_rcu, 0);
	ck_assert_uint_eq(d.tp.max_wcu, 30);
	ck_assert_uint_eq(d.indexes[0].tp.max_wcu, 40);
	ck_assert_uint_eq(d.indexes[0].tp.max_rcu, 0);

	/* New GSIs follow the mode the table ends in. */
	st_index_def c = p.idx[0];
	c.name = "gsi2";
	c.tp = (st_throughput){0};
	st_table_update_req cr = {.name = "Prov", .create = &c, .n_create = 1};
	upd_err(
	    &p.def, &cr, T0, SHOAL_E_VALIDATION,
	    "One or more parameter values were invalid: ProvisionedThroughput must be specified "
	    "for index: gsi2");
	c.tp = (st_throughput){1, 1, 0, 0};
	cr.name = "Ppr";
	upd_err(&o.def, &cr, T0, SHOAL_E_VALIDATION,
	        "One or more parameter values were invalid: ProvisionedThroughput should not be "
	        "specified for index: gsi2 when BillingMode is PAY_PER_REQUEST");
}
END_TEST

START_TEST(test_increase_decrease)
{
	tdef p;
	tdef_prov(&p, "Prov");
	st_table_def d = p.def;
	/* An increase: LastIncreaseDateTime only. */
	st_table_update_req r = {.name = "Prov", .cap = TP(6, 5)};
	d = upd_ok(&d, &r, T0 + HOUR);
	ck_assert_int_eq(d.last_increase_ms, T0 + HOUR);
	ck_assert_int_eq(d.last_decrease_ms, 0);
	ck_assert_uint_eq(st_decreases_today(d.decreases_today, d.decreases_day, T0 + HOUR), 0);
	/* Read down, write up: one decrease, and an increase. */
	r.cap = (st_capacity_req)TP(4, 9);
	d = upd_ok(&d, &r, T0 + 2 * HOUR);
	ck_assert_int_eq(d.last_increase_ms, T0 + 2 * HOUR);
	ck_assert_int_eq(d.last_decrease_ms, T0 + 2 * HOUR);
	ck_assert_uint_eq(d.decreases_today, 1);
	/* Three more decreases at once: 4 a day are free. */
	for (int i = 0; i < 3; i++) {
		r.cap = (st_capacity_req)TP(3 - (uint64_t)i, 9);
		d = upd_ok(&d, &r, T0 + 2 * HOUR + 1 + i);
	}
	ck_assert_uint_eq(d.decreases_today, 4);
	ck_assert_uint_eq(d.tp.rcu, 1);
	/* The fifth within the hour: LimitExceededException, nothing changed. */
	r.cap = (st_capacity_req)TP(1, 8);
	upd_err(&d, &r, T0 + 2 * HOUR + 1000, SHOAL_E_LIMIT_EXCEEDED,
	        "Subscriber limit exceeded: Provisioned throughput decreases are limited within a "
	        "given UTC day. After the first 4 decreases, each subsequent decrease in the same "
	        "UTC day can be performed at most once every 3600 seconds. Number of decreases "
	        "today: 4. Last decrease at Thursday, October 8, 2026 at 2:00:00 AM Coordinated "
	        "Universal Time. Next decrease can be made at Thursday, October 8, 2026 at 3:00:00 "
	        "AM Coordinated Universal Time.");
	/* An increase is always allowed. */
	r.cap = (st_capacity_req)TP(2, 9);
	d = upd_ok(&d, &r, T0 + 2 * HOUR + 2000);
	ck_assert_uint_eq(d.decreases_today, 4);
	/* An hour after the last decrease: the fifth, then the sixth waits. */
	r.cap = (st_capacity_req)TP(1, 9);
	d = upd_ok(&d, &r, T0 + 3 * HOUR + 10);
	ck_assert_uint_eq(d.decreases_today, 5);
	r.cap = (st_capacity_req)TP(1, 1);
	upd_err(&d, &r, T0 + 3 * HOUR + 11, SHOAL_E_LIMIT_EXCEEDED,
	        "Subscriber limit exceeded: Provisioned throughput decreases are limited within a "
	        "given UTC day. After the first 4 decreases, each subsequent decrease in the same "
	        "UTC day can be performed at most once every 3600 seconds. Number of decreases "
	        "today: 5. Last decrease at Thursday, October 8, 2026 at 3:00:00 AM Coordinated "
	        "Universal Time. Next decrease can be made at Thursday, October 8, 2026 at 4:00:00 "
	        "AM Coordinated Universal Time.");
	/* Late in the day the next one is at midnight, when the count starts again. */
	st_table_def late = d;
	late.last_decrease_ms = T0 + DAY - HOUR / 2;
	upd_err(&late, &r, T0 + DAY - HOUR / 4, SHOAL_E_LIMIT_EXCEEDED,
	        "Subscriber limit exceeded: Provisioned throughput decreases are limited within a "
	        "given UTC day. After the first 4 decreases, each subsequent decrease in the same "
	        "UTC day can be performed at most once every 3600 seconds. Number of decreases "
	        "today: 5. Last decrease at Thursday, October 8, 2026 at 11:30:00 PM Coordinated "
	        "Universal Time. Next decrease can be made at Friday, October 9, 2026 at 12:00:00 "
	        "AM Coordinated Universal Time.");
	d = upd_ok(&late, &r, T0 + DAY + 1);
	ck_assert_uint_eq(d.decreases_today, 1);
	ck_assert_int_eq(d.decreases_day, (T0 + DAY) / DAY);
	/* Described the next day: none today. */
	ck_assert_uint_eq(st_decreases_today(d.decreases_today, d.decreases_day, T0 + 2 * DAY), 0);
	ck_assert_uint_eq(st_decreases_today(d.decreases_today, d.decreases_day, T0 + DAY + 5), 1);

	/* A GSI has its own budget; a table refusal leaves the GSI alone. */
	st_table_def g = p.def;
	st_index_capacity_req gd = {"gsi", TP(2, 3)};
	st_table_update_req gr = {.name = "Prov", .update = &gd, .n_update = 1};
	g = upd_ok(&g, &gr, T0 + 1);
	ck_assert_uint_eq(g.indexes[0].decreases_today, 1);
	ck_assert_int_eq(g.indexes[0].last_decrease_ms, T0 + 1);
	ck_assert_uint_eq(g.decreases_today, 0);
	ck_assert_int_eq(g.last_decrease_ms, 0);
	gd.cap = (st_capacity_req)TP(9, 9);
	g = upd_ok(&g, &gr, T0 + 2);
	ck_assert_int_eq(g.indexes[0].last_increase_ms, T0 + 2);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Through the catalog: group 0's update, a data group's redefinition        */
/* ------------------------------------------------------------------------ */

START_TEST(test_update_stored)
{
	tdef p;
	tdef_prov(&p, "Prov");
	create_ok(&p.def);
	st_table_def d = described("Prov");
	ck_assert_int_eq(d.billing, ST_BILLING_PROVISIONED);
	ck_assert_uint_eq(d.indexes[0].tp.wcu, 3);

	st_index_capacity_req gu = {"gsi", TP(8, 2)};
	st_table_update_req u = {.name = "Prov", .cap = TP(10, 5), .update = &gu, .n_update = 1};
	st_txn *txn;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	st_txn_set_time(txn, T0 + 77); /* the proposer's clock */
	int rc = st_table_update(txn, &u, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	/* Refused changes leave the transaction usable and the table as it was. */
	rc = st_table_update(txn, &u, tl_msg);
	ck_assert_int_eq(rc, SHOAL_E_VALIDATION);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	d = described("Prov");
	ck_assert_uint_eq(d.tp.rcu, 10);
	ck_assert_int_eq(d.last_increase_ms, T0 + 77);
	ck_assert_uint_eq(d.indexes[0].tp.rcu, 8);
	ck_assert_uint_eq(d.indexes[0].tp.wcu, 2);
	ck_assert_int_eq(d.indexes[0].last_decrease_ms, T0 + 77);
	ck_assert_uint_eq(d.indexes[0].decreases_today, 1);
	ck_assert_int_eq(d.capacity_ms, T0 + 77);

	/* A data group: a define older than what it has keeps its capacity ... */
	st_table_def older = p.def;
	older.id = d.id;
	older.capacity_ms = T0 + 10;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	rc = st_table_redefine(txn, &older, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	d = described("Prov");
	ck_assert_uint_eq(d.tp.rcu, 10);
	ck_assert_uint_eq(d.indexes[0].tp.rcu, 8);
	ck_assert_int_eq(d.capacity_ms, T0 + 77);
	/* ... a newer one replaces it. */
	st_table_def newer = p.def;
	newer.id = d.id;
	newer.billing = ST_BILLING_PAY_PER_REQUEST;
	newer.tp = (st_throughput){0, 0, 0, 12};
	p.idx[0].tp = (st_throughput){0};
	newer.billing_changed_ms = T0 + 99;
	newer.capacity_ms = T0 + 99;
	ck_assert_int_eq(st_txn_begin(tl_env, &txn, tl_msg), SHOAL_OK);
	rc = st_table_redefine(txn, &newer, tl_msg);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(st_txn_commit(txn, tl_msg), SHOAL_OK);
	d = described("Prov");
	ck_assert_int_eq(d.billing, ST_BILLING_PAY_PER_REQUEST);
	ck_assert_uint_eq(d.tp.rcu, 0);
	ck_assert_uint_eq(d.tp.max_wcu, 12);
	ck_assert_int_eq(d.billing_changed_ms, T0 + 99);
	ck_assert_int_eq(d.capacity_ms, T0 + 99);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Protobuf: TableDefine, UpdateTable, descriptions                          */
/* ------------------------------------------------------------------------ */

START_TEST(test_table_define)
{
	tdef p;
	tdef_prov(&p, "Prov");
	p.def.id = 4;
	p.def.last_increase_ms = T0 + 1;
	p.def.last_decrease_ms = T0 + 2;
	p.def.decreases_today = 2;
	p.def.decreases_day = T0 / DAY;
	p.def.billing_changed_ms = T0 - 7;
	p.def.capacity_ms = T0 + 2;
	p.idx[0].last_decrease_ms = T0 + 3;
	p.idx[0].decreases_today = 1;
	p.idx[0].decreases_day = T0 / DAY;
	st_table_def stored;
	ck_assert_int_eq(st_table_def_stored(&p.def, &tl_arena, &stored, tl_msg), SHOAL_OK);
	Shoal__TableDefine *td;
	ck_assert_int_eq(wire_table_define_to_pb(&tl_arena, &stored, &td, tl_msg), SHOAL_OK);
	ck_assert_str_eq(td->def->billing_mode, "PROVISIONED");
	ck_assert_int_eq(td->def->provisioned_throughput->read_capacity_units, 5);
	ck_assert_ptr_null(td->def->on_demand_throughput);
	/* Through the wire, as group 0 sends it. */
	size_t len = shoal__table_define__get_packed_size(td);
	uint8_t *buf = sh_arena_alloc(&tl_arena, len);
	shoal__table_define__pack(td, buf);
	Shoal__TableDefine *back = shoal__table_define__unpack(NULL, len, buf);
	ck_assert_ptr_nonnull(back);
	st_table_def d;
	int rc = wire_table_define_from_pb(&tl_arena, back, &d, tl_msg);
	shoal__table_define__free_unpacked(back, NULL);
	ck_assert_msg(rc == SHOAL_OK, "%s", tl_msg);
	ck_assert_int_eq(d.billing, ST_BILLING_PROVISIONED);
	ck_assert_uint_eq(d.tp.rcu, 5);
	ck_assert_uint_eq(d.tp.wcu, 5);
	ck_assert_int_eq(d.last_increase_ms, T0 + 1);
	ck_assert_int_eq(d.last_decrease_ms, T0 + 2);
	ck_assert_uint_eq(d.decreases_today, 2);
	ck_assert_int_eq(d.decreases_day, T0 / DAY);
	ck_assert_int_eq(d.billing_changed_ms, T0 - 7);
	ck_assert_int_eq(d.capacity_ms, T0 + 2);
	const st_index_def *g = st_table_index(&d, "gsi");
	ck_assert_uint_eq(g->tp.rcu, 3);
	ck_assert_int_eq(g->last_decrease_ms, T0 + 3);
	ck_assert_uint_eq(g->decreases_today, 1);

	/* PAY_PER_REQUEST with maximums. */
	tdef o;
	tdef_init(&o, "Ppr");
	o.def.tp.max_wcu = 33;
	o.idx[0].tp.max_rcu = 44;
	ck_assert_int_eq(st_table_def_stored(&o.def, &tl_arena, &stored, tl_msg), SHOAL_OK);
	ck_assert_int_eq(wire_table_define_to_pb(&tl_arena, &stored, &td, tl_msg), SHOAL_OK);
	ck_assert_str_eq(td->def->billing_mode, "PAY_PER_REQUEST");
	ck_assert_ptr_null(td->def->provisioned_throughput);
	ck_assert(!WIRE_HAS(td->def->on_demand_throughput, max_read_request_units));
	ck_assert_int_eq(td->def->on_demand_throughput->max_write_request_units, 33);
	ck_assert_int_eq(wire_table_define_from_pb(&tl_arena, td, &d, tl_msg), SHOAL_OK);
	ck_assert_int_eq(d.billing, ST_BILLING_PAY_PER_REQUEST);
	ck_assert_uint_eq(d.tp.max_wcu, 33);
	ck_assert_uint_eq(st_table_index(&d, "gsi")->tp.max_rcu, 44);
}
END_TEST

START_TEST(test_description)
{
	tdef p;
	tdef_prov(&p, "Prov");
	int64_t now = (int64_t)time(NULL) * 1000;
	p.def.last_increase_ms = now - 5000;
	p.def.last_decrease_ms = now - 1000;
	p.def.decreases_today = 2;
	p.def.decreases_day = now / DAY;
	p.idx[0].decreases_today = 3;
	p.idx[0].decreases_day = now / DAY - 1; /* yesterday's */
	st_table_info info = {0};
	info.def = p.def;
	Shoal__TableDescription *td;
	ck_assert_int_eq(wire_table_desc_to_pb(&tl_arena, &info, "ACTIVE", &td, tl_msg), SHOAL_OK);
	ck_assert_ptr_null(td->billing_mode_summary); /* never PAY_PER_REQUEST */
	ck_assert_ptr_null(td->on_demand_throughput);
	ck_assert_int_eq(td->provisioned_throughput->read_capacity_units, 5);
	ck_assert_int_eq(td->provisioned_throughput->number_of_decreases_today, 2);
	ck_assert_int_eq(td->provisioned_throughput->last_increase_date_time, now - 5000);
	ck_assert_int_eq(td->provisioned_throughput->last_decrease_date_time, now - 1000);
	ck_assert_uint_eq(td->n_global_secondary_indexes, 1);
	Shoal__GlobalSecondaryIndexDescription *g = td->global_secondary_indexes[0];
	ck_assert_int_eq(g->provisioned_throughput->write_capacity_units, 3);
	ck_assert_int_eq(g->provisioned_throughput->number_of_decreases_today, 0);
	ck_assert_ptr_null(g->on_demand_throughput);
	/* Read back (the client's and router's caches). */
	st_table_info back;
	ck_assert_int_eq(wire_table_desc_from_pb(&tl_arena, td, &back, NULL, tl_msg), SHOAL_OK);
	ck_assert_int_eq(back.def.billing, ST_BILLING_PROVISIONED);
	ck_assert_uint_eq(back.def.tp.wcu, 5);
	ck_assert_uint_eq(back.def.indexes[back.def.n_indexes - 1].tp.rcu, 3);

	/* Switched to PROVISIONED once: the summary says when it was on demand. */
	info.def.billing_changed_ms = now - DAY;
	ck_assert_int_eq(wire_table_desc_to_pb(&tl_arena, &info, "ACTIVE", &td, tl_msg), SHOAL_OK);
	ck_assert_str_eq(td->billing_mode_summary->billing_mode, "PROVISIONED");
	ck_assert_int_eq(td->billing_mode_summary->last_update_to_pay_per_request_date_time,
	                 now - DAY);

	/* PAY_PER_REQUEST: zeros, OnDemandThroughput with -1 for no maximum,
	 * the summary's time the creation time. */
	tdef o;
	tdef_init(&o, "Ppr");
	o.def.tp.max_rcu = 100;
	o.idx[0].tp.max_wcu = 9;
	o.def.last_decrease_ms = now - 9;
	o.def.decreases_today = 1;
	o.def.decreases_day = now / DAY;
	info.def = o.def;
	ck_assert_int_eq(wire_table_desc_to_pb(&tl_arena, &info, "ACTIVE", &td, tl_msg), SHOAL_OK);
	ck_assert_str_eq(td->billing_mode_summary->billing_mode, "PAY_PER_REQUEST");
	ck_assert_int_eq(td->billing_mode_summary->last_update_to_pay_per_request_date_time,
	                 o.def.created_ms);
	ck_assert_int_eq(td->provisioned_throughput->read_capacity_units, 0);
	ck_assert_int_eq(td->provisioned_throughput->number_of_decreases_today, 0);
	ck_assert_int_eq(td->on_demand_throughput->max_read_request_units, 100);
	ck_assert_int_eq(td->on_demand_throughput->max_write_request_units, -1);
	g = td->global_secondary_indexes[0];
	ck_assert_int_eq(g->on_demand_throughput->max_read_request_units, -1);
	ck_assert_int_eq(g->on_demand_throughput->max_write_request_units, 9);
	ck_assert_int_eq(wire_table_desc_from_pb(&tl_arena, td, &back, NULL, tl_msg), SHOAL_OK);
	ck_assert_int_eq(back.def.billing, ST_BILLING_PAY_PER_REQUEST);
	ck_assert_uint_eq(back.def.tp.max_rcu, 100);
	ck_assert_uint_eq(back.def.tp.max_wcu, 0);
}
END_TEST

static Suite *provisioned_suite(void)
{
	return tl_suite("provisioned", setup, tl_store_close, 0,
	                TL_TESTS(test_codec_round_trip, test_codec_old_versions, test_check_def,
	                         test_update_rules, test_increase_decrease, test_update_stored,
	                         test_table_define, test_description));
}

TL_MAIN(provisioned_suite)
