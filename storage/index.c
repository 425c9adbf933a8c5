/*
 * index.c -- secondary indexes (index.h).  Placeholder implementations that
 * let node/ and router/ build against the contract while the engine's index
 * maintenance is written; every entry point says it is not implemented.
 */
#include "index.h"

#include "common/errors.h"

static int todo(char *errmsg, const char *what)
{
	return sh_errf(errmsg, SHOAL_E_INTERNAL, "%s is not implemented yet", what);
}

uint64_t st_index_hash(uint32_t table_id, uint16_t index_id, uint32_t shard, const st_value *gsi_pk)
{
	(void)index_id;
	(void)shard;
	return st_key_hash(table_id, gsi_pk);
}

uint32_t st_index_shard(uint32_t table_id, const st_value *base_pk, const st_value *base_sk,
                        uint32_t n)
{
	(void)table_id;
	(void)base_pk;
	(void)base_sk;
	(void)n;
	return 0;
}

int st_index_entry_cmp(const st_table_def *t, const st_index_def *x, const st_value *a,
                       const st_value *b)
{
	(void)t;
	(void)x;
	(void)a;
	(void)b;
	return 0;
}

void st_txn_set_time(st_txn *txn, int64_t ms)
{
	(void)txn;
	(void)ms;
}

int st_outbox_get_info(st_env *env, st_outbox_info *out, char *errmsg)
{
	(void)env;
	(void)errmsg;
	*out = (st_outbox_info){0};
	return SHOAL_OK;
}

int st_outbox_read(st_env *env, uint64_t after, uint32_t max_n, size_t max_bytes, sh_arena *a,
                   st_delta **out, uint32_t *n, char *errmsg)
{
	(void)env, (void)after, (void)max_n, (void)max_bytes, (void)a, (void)errmsg;
	*out = NULL;
	*n = 0;
	return SHOAL_OK;
}

int st_outbox_trim(st_txn *txn, uint64_t upto, char *errmsg)
{
	(void)txn, (void)upto;
	return todo(errmsg, "st_outbox_trim");
}

int st_index_apply(st_txn *txn, uint32_t source_group, const st_delta *d, uint32_t n,
                   char *errmsg)
{
	(void)txn, (void)source_group, (void)d, (void)n;
	return todo(errmsg, "st_index_apply");
}

uint64_t st_index_applied_seq(st_env *env, uint32_t source_group)
{
	(void)env, (void)source_group;
	return 0;
}

int st_backfill_step(st_txn *txn, const char *table, uint16_t index_id, uint32_t max_items,
                     bool *done, char *errmsg)
{
	(void)txn, (void)table, (void)index_id, (void)max_items;
	*done = true;
	return todo(errmsg, "st_backfill_step");
}

int st_index_progress_list(st_env *env, sh_arena *a, st_index_progress **out, uint32_t *n,
                           char *errmsg)
{
	(void)env, (void)a, (void)errmsg;
	*out = NULL;
	*n = 0;
	return SHOAL_OK;
}

int st_table_update(st_txn *txn, const st_table_update_req *req, char *errmsg)
{
	(void)txn, (void)req;
	return todo(errmsg, "UpdateTable");
}

int st_index_activate(st_txn *txn, const char *table, const char *index, char *errmsg)
{
	(void)txn, (void)table, (void)index;
	return todo(errmsg, "st_index_activate");
}

int st_table_redefine(st_txn *txn, const st_table_def *def, char *errmsg)
{
	(void)txn, (void)def;
	return todo(errmsg, "st_table_redefine");
}

int st_page_finish(const st_table_def *t, const st_query_req *req, const st_value *items,
                   uint32_t n, sh_arena *a, st_page *out, char *errmsg)
{
	(void)t, (void)req, (void)items, (void)n, (void)a, (void)out;
	return todo(errmsg, "st_page_finish");
}

int st_index_last_key(const st_table_def *t, const st_index_def *x, const st_value *item,
                      sh_arena *a, st_value **out, char *errmsg)
{
	(void)t, (void)x, (void)item, (void)a, (void)out;
	return todo(errmsg, "st_index_last_key");
}
