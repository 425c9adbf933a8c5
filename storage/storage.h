/*
 * storage.h -- the contract of Shoal's storage engine (prefix st_).
 *
 * The engine keeps DynamoDB tables as sorted item collections in one LMDB
 * environment and implements DynamoDB's item operations with their exact
 * semantics: conditions, update expressions, ReturnValues, Query and Scan with
 * pagination, and DynamoDB's limits.  It does no networking; the replicated
 * state machine in node/ calls the write functions at apply time on every
 * replica, so they are deterministic functions of (old state, request).
 *
 * Memory: every st_value handed in is borrowed for the duration of the call.
 * Every st_value, string or array handed out is allocated in the caller's
 * sh_arena and stays valid until that arena is reset or finalised; nothing
 * handed out points into LMDB memory.
 *
 * Errors: functions return a code from common/errors.h (SHOAL_OK == 0) and on
 * failure write a message into `errmsg` (SH_ERRMSG_SIZE bytes, may be NULL).
 * Client errors (SHOAL_E_VALIDATION, SHOAL_E_CONDITION_FAILED, ...) carry the
 * message DynamoDB would send; environmental ones (SHOAL_E_NOMEM, SHOAL_E_IO,
 * SHOAL_E_FULL) say what failed.
 *
 * The formats (key encoding, value encoding) are documented byte by byte at
 * the top of storage/keyenc.c and storage/codec.c.
 */
#ifndef SHOAL_STORAGE_H
#define SHOAL_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/arena.h"
#include "../common/errors.h"

/* ------------------------------------------------------------------------ */
/* Limits (DynamoDB's)                                                       */
/* ------------------------------------------------------------------------ */

#define ST_MAX_ITEM_SIZE   (400 * 1024)      /* bytes, by st_item_size's rules */
#define ST_MAX_PK_SIZE     2048              /* partition key value, bytes */
#define ST_MAX_SK_SIZE     1024              /* sort key value, bytes */
#define ST_MAX_DEPTH       32                /* nesting of M and L */
#define ST_MAX_EXPR_SIZE   4096              /* bytes, each expression */
#define ST_MAX_IN_OPERANDS 100               /* right-hand operands of IN */
#define ST_MAX_PAGE_BYTES  (1024 * 1024)     /* Query/Scan data read per page */
#define ST_MAX_NAME_SIZE   65535             /* attribute name, bytes */
#define ST_MAX_TXN_ITEMS   100               /* actions of a transaction */
#define ST_MAX_TXN_BYTES   (4 * 1024 * 1024) /* a TransactWriteItems request */
#define ST_NUM_MAX_DIGITS  38                /* significant decimal digits */
#define ST_NUM_MAX_TEXT    200               /* buffer for any formatted number */
#define ST_TABLE_NAME_MIN  3
#define ST_TABLE_NAME_MAX  255

/* ------------------------------------------------------------------------ */
/* Values                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum st_type {
	ST_NONE = 0, /* "no value": an absent attribute, never stored */
	ST_S,        /* string: UTF-8 bytes in str */
	ST_N,        /* number: canonical decimal text in str (see st_num_*) */
	ST_B,        /* binary: raw bytes in str */
	ST_BOOL,     /* boolean in boolean */
	ST_NULL,     /* null; boolean is true */
	ST_M,        /* map: attrs sorted by name (memcmp), names unique */
	ST_L,        /* list: values in order */
	ST_SS,       /* string set: members of type ST_S, sorted, unique, n >= 1 */
	ST_NS,       /* number set: members of type ST_N, sorted numerically, unique */
	ST_BS,       /* binary set: members of type ST_B, sorted, unique */
} st_type;

typedef struct st_value st_value;
typedef struct st_attr st_attr;

struct st_value {
	st_type type;
	union {
		struct {
			const char *ptr; /* not necessarily NUL-terminated */
			uint32_t len;
		} str;        /* S, N, B */
		bool boolean; /* BOOL, NULL */
		struct {
			st_value *v;
			uint32_t n;
		} list; /* L, SS, NS, BS */
		struct {
			st_attr *a;
			uint32_t n;
		} map; /* M */
	} u;
};

struct st_attr {
	const char *name; /* UTF-8, not necessarily NUL-terminated */
	uint32_t name_len;
	st_value value;
};

/* An item is an st_value of type ST_M whose attrs are its attributes. */

/* The two-letter DynamoDB name of a type ("S", "NS", "NULL", ...), "" for ST_NONE. */
const char *st_type_name(st_type t);
/* Parses "S", "N", ... back; ST_NONE if unknown. */
st_type st_type_parse(const char *s, size_t len);

/* Constructors for tests and callers that build values (strings are copied
 * into the arena).  They return NULL when out of memory. */
st_value *st_new_s(sh_arena *a, const char *s);
st_value *st_new_n(sh_arena *a,
                   const char *text); /* text must be canonical-able; NULL if invalid */
st_value *st_new_b(sh_arena *a, const void *p, size_t n);
st_value *st_new_map(sh_arena *a, uint32_t capacity); /* empty M with room for capacity attrs */

/* Sets (inserts or replaces) attribute `name` of map `m`, keeping attrs
 * sorted; `v` is copied shallowly (its children are shared).  Returns
 * SHOAL_E_NOMEM on failure. */
int st_map_set(sh_arena *a, st_value *m, const char *name, size_t name_len, const st_value *v);
/* Removes attribute `name` if present. */
void st_map_remove(st_value *m, const char *name, size_t name_len);
/* The attribute's value, or NULL when absent. Binary search: m must be sorted. */
const st_value *st_map_get(const st_value *m, const char *name, size_t name_len);

/* Deep copy of src into dst, all memory from the arena. */
int st_value_copy(sh_arena *a, const st_value *src, st_value *dst);

/*
 * Validates a value that came from a client and puts it in canonical form in
 * place (memory for rewritten parts comes from the arena): numbers are parsed
 * and re-written canonically; sets are sorted and checked for duplicates
 * (after canonicalisation: "1" and "1.0" are duplicates) and emptiness; maps
 * are sorted and checked for duplicate names; nesting deeper than
 * ST_MAX_DEPTH is refused (an M passed here is a container: its attributes
 * are level 1; any other value counts itself as level 1).  Errors are SHOAL_E_VALIDATION with
 * DynamoDB's message, or SHOAL_E_NOMEM.
 */
int st_value_normalize(sh_arena *a, st_value *v, char *errmsg);

/* DynamoDB equality: same type and same value (numbers numerically, sets as
 * sets, maps and lists deeply). Both must be normalised. */
bool st_value_equal(const st_value *a, const st_value *b);

/* Ordering of two scalar values of the same type S, N or B (UTF-8 bytes,
 * numeric, unsigned bytes): <0, 0, >0.  Asserts on other types. */
int st_value_cmp(const st_value *a, const st_value *b);

/* Size of a value by DynamoDB's rules (S: UTF-8 length; N: (significant
 * digits + 1) / 2 + 1; B: length; BOOL/NULL: 1; M/L: 3 + per element 1 +
 * element (+ name length for M); sets: sum of members). */
size_t st_value_size(const st_value *v);
/* Size of an item: sum over attributes of name length + value size. */
size_t st_item_size(const st_value *item);

/* ------------------------------------------------------------------------ */
/* Numbers: DynamoDB decimals                                                */
/* ------------------------------------------------------------------------ */

/*
 * A decimal of up to 38 significant digits with magnitude 1E-130 to
 * 9.9999999999999999999999999999999999999E+125, or zero.  Value =
 * sign * 0.d[0]d[1]...d[ndigits-1] * 10^exp, with d[0] != 0 and
 * d[ndigits-1] != 0 (normalised), or ndigits == 0 for zero (sign 0).
 */
typedef struct st_num {
	int8_t sign;                  /* -1, 0, +1 */
	int16_t exp;                  /* adjusted exponent, see above */
	uint8_t ndigits;              /* 0..38 */
	uint8_t d[ST_NUM_MAX_DIGITS]; /* digit values 0..9 */
} st_num;

/* Parses DynamoDB number text ("-1.50", "1e3", "+0.0001", ".5", "5.").
 * SHOAL_E_VALIDATION with DynamoDB's message for syntax errors, more than 38
 * significant digits ("Attempting to store more than 38 significant digits
 * in a Number"), overflow ("Number overflow. Attempting to store a number
 * with magnitude larger than supported range") or underflow ("Number
 * underflow. Attempting to store a number with magnitude smaller than
 * supported range"). */
int st_num_parse(const char *s, size_t len, st_num *out, char *errmsg);
/* Writes canonical text (NUL-terminated) into buf of ST_NUM_MAX_TEXT bytes;
 * returns its length.  Canonical text is the same for equal numbers. */
size_t st_num_format(const st_num *n, char *buf);
int st_num_cmp(const st_num *a, const st_num *b);
/* Exact a + b and a - b; SHOAL_E_VALIDATION on overflow, underflow or a
 * result needing more than 38 significant digits (DynamoDB's messages). */
int st_num_add(const st_num *a, const st_num *b, st_num *out, char *errmsg);
int st_num_sub(const st_num *a, const st_num *b, st_num *out, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Tables                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct st_key_attr {
	const char *name; /* NULL: no such key (a table without a sort key) */
	st_type type;     /* ST_S, ST_N or ST_B */
} st_key_attr;

typedef struct st_key_schema {
	st_key_attr hash;  /* partition key, always present */
	st_key_attr range; /* sort key, name NULL if none */
} st_key_schema;

typedef enum st_projection_type {
	ST_PROJ_ALL = 0,
	ST_PROJ_KEYS_ONLY,
	ST_PROJ_INCLUDE,
} st_projection_type;

typedef enum st_index_status {
	ST_INDEX_CREATING = 0,
	ST_INDEX_ACTIVE,
	ST_INDEX_DELETING,
} st_index_status;

/* Capacity of a table or a GSI, as DynamoDB's ProvisionedThroughput and
 * OnDemandThroughput (units per second; 0: not set).  The node's capacity
 * module (node/capacity.c) turns them into per-partition token buckets. */
typedef struct st_throughput {
	uint64_t rcu, wcu;         /* provisioned: PROVISIONED tables and their GSIs */
	uint64_t max_rcu, max_wcu; /* OnDemandThroughput maximums (PAY_PER_REQUEST); 0: none */
} st_throughput;

typedef enum st_billing {
	ST_BILLING_PAY_PER_REQUEST = 0,
	ST_BILLING_PROVISIONED,
} st_billing;

/* DynamoDB Streams: a table's StreamSpecification and its latest stream
 * (storage/stream.h has the records).  StreamViewType codes are stored. */
typedef enum st_stream_view {
	ST_VIEW_NONE = 0,
	ST_VIEW_KEYS_ONLY,
	ST_VIEW_NEW_IMAGE,
	ST_VIEW_OLD_IMAGE,
	ST_VIEW_NEW_AND_OLD_IMAGES,
} st_stream_view;

/* A table's earlier stream, replaced by a newer one (UpdateTable enabled a
 * stream again): still readable, as DISABLED, until its records are past
 * the retention (DynamoDB keeps a stream 24 hours after it is replaced). */
typedef struct st_past_stream {
	int64_t label_ms;    /* its label */
	int64_t ended_ms;    /* group 0's time it was disabled */
	st_stream_view view; /* its view type */
} st_past_stream;
/* The most past streams a table keeps (older ones, or ones ended more than
 * the retention ago, are forgotten when another is added). */
#define ST_STREAM_PAST_MAX 8

typedef struct st_stream_spec {
	bool enabled;        /* records are written for the table's changes */
	st_stream_view view; /* of the latest stream (kept after it is disabled) */
	/* The latest stream's creation time (ms since the epoch; group 0's
	 * clock): its StreamLabel and ARN.  0: the table never had a stream. */
	int64_t label_ms;
	/* Group 0's time of the last change of the specification (0: none):
	 * a data group keeps the newer of two definitions' (st_table_redefine). */
	int64_t changed_ms;
	/* The table's earlier streams, newest first (they travel with the
	 * rest: changed_ms decides for all). */
	st_past_stream past[ST_STREAM_PAST_MAX];
	uint32_t n_past;
} st_stream_spec;
/* The stream of label_ms of a table's definition: its latest (*enabled as
 * the table's) or a past one (disabled) that ended no more than
 * retention_ms before now_ms; false when it has no such stream. */
bool st_stream_spec_find(const st_stream_spec *s, int64_t label_ms, int64_t now_ms,
                         int64_t retention_ms, bool *enabled, st_stream_view *view);
/* The same for a deleted table's streams (deleted at deleted_ms): all of
 * them disabled, the latest one ended at the deletion. */
bool st_stream_spec_find_dropped(const st_stream_spec *s, int64_t deleted_ms, int64_t label_ms,
                                 int64_t now_ms, int64_t retention_ms, st_stream_view *view);

typedef struct st_index_def {
	const char *name;
	uint16_t id; /* 1..; 0 is the base table. Assigned by the engine if 0. */
	bool local;  /* LSI (same hash key as the table) or GSI */
	st_key_schema key;
	st_projection_type projection;
	const char **include; /* NonKeyAttributes for ST_PROJ_INCLUDE */
	uint32_t n_include;
	uint32_t write_shards; /* GSI write sharding, >= 1 */
	st_index_status status;
	st_throughput tp; /* GSIs; LSIs share the table's */
	/* GSIs: changes of tp, as the table's (st_table_def) */
	int64_t last_increase_ms, last_decrease_ms;
	uint32_t decreases_today;
	int64_t decreases_day;
} st_index_def;

/* A tag of a table (TagResource, CreateTable's Tags): key 1..128
 * characters, value 0..256, at most ST_MAX_TAGS per table, checked by
 * st_tags_check. */
typedef struct st_tag {
	const char *key;
	const char *value;
} st_tag;

#define ST_MAX_TAGS      50
#define ST_TAG_KEY_MAX   128 /* characters (code points) */
#define ST_TAG_VALUE_MAX 256

/* TableClass: ST_CLASS_NONE when CreateTable and UpdateTable never named
 * one (DescribeTable then has no TableClassSummary). */
typedef enum st_table_class {
	ST_CLASS_NONE = 0,
	ST_CLASS_STANDARD,
	ST_CLASS_STANDARD_IA,
} st_table_class;

typedef struct st_table_def {
	const char *name;
	uint32_t id; /* 0: assigned by the engine (next free id) */
	st_key_schema key;
	st_key_attr *attrs; /* AttributeDefinitions */
	uint32_t n_attrs;
	st_index_def *indexes;
	uint32_t n_indexes;
	int64_t created_ms; /* CreationDateTime, ms since the epoch; set by the caller */
	/* The id the next index created by UpdateTable gets: every id below it
	 * is in use or retired (ids are never reused).  0 on input: max index
	 * id + 1; a larger value given (by group 0) is kept. */
	uint32_t next_index_id;
	/* Capacity (BillingMode, ProvisionedThroughput, OnDemandThroughput) and
	 * what DescribeTable reports of its changes (ms since the epoch, 0:
	 * never; decreases counted per UTC day `decreases_day`, days since the
	 * epoch). */
	st_billing billing;
	st_throughput tp;
	int64_t last_increase_ms, last_decrease_ms;
	uint32_t decreases_today;
	int64_t decreases_day;
	int64_t billing_changed_ms; /* LastUpdateToPayPerRequestDateTime */
	/* Group 0's time of the last change of billing or throughput (0: none
	 * since CreateTable): a data group keeps the newer of two definitions'
	 * capacity (st_table_redefine). */
	int64_t capacity_ms;
	/* Group 0's metadata (data groups keep what CreateTable gave them and
	 * never read it): DeletionProtectionEnabled, TableClass, Tags. */
	bool deletion_protection;
	st_table_class table_class;
	int64_t class_changed_ms; /* TableClassSummary.LastUpdateDateTime (0: never updated) */
	st_tag *tags;
	uint32_t n_tags;
	st_stream_spec stream; /* StreamSpecification (all zero: never had a stream) */
	/* Time to live (UpdateTimeToLive): the attribute holding each item's
	 * expiry time, NULL while TTL is disabled; ttl_ms is group 0's time of
	 * the last UpdateTimeToLive (0: never), and a data group keeps the newer
	 * of two definitions' setting (st_table_redefine).  Data groups read it:
	 * their leaders expire items (node/ttl.c). */
	const char *ttl_attr;
	int64_t ttl_ms;
} st_table_def;

typedef struct st_table_info {
	st_table_def def;
	uint64_t item_count;
	uint64_t size_bytes; /* sum of st_item_size of the base items */
} st_table_info;

/* ------------------------------------------------------------------------ */
/* The environment                                                           */
/* ------------------------------------------------------------------------ */

typedef struct st_env st_env;

typedef struct st_env_options {
	uint64_t map_size;   /* LMDB map size in bytes; 0: 64 GiB */
	bool nosync;         /* MDB_NOSYNC: durability comes from elsewhere (the Raft
	                      * log); call st_env_sync to make LMDB durable */
	uint32_t page_bytes; /* Query/Scan page limit; 0: ST_MAX_PAGE_BYTES */
	/* Item collection limit of tables with LSIs (base items + LSI entries of
	 * one partition-key value); 0: 10 GB as DynamoDB.  Tests set it small. */
	uint64_t collection_limit;
	/* With nosync: the environment can be rebuilt from elsewhere (the
	 * Raft snapshot and log), so after a machine crash it is emptied at
	 * open rather than trusted (storage/env_trust.c has the rule). */
	bool rebuildable;
} st_env_options;

/* Opens (creating if needed) the environment in directory `path`, which must
 * exist. opts may be NULL for defaults. */
int st_env_open(const char *path, const st_env_options *opts, st_env **out, char *errmsg);
void st_env_close(st_env *env);
/* How long DynamoDB Streams records are kept (stream.h); ms <= 0: 24
 * hours (the default).  Must be the same on every replica of a group (it
 * comes from the cluster file): trimming is part of the replicated state.
 * Set before the first write. */
void st_env_set_stream_retention(st_env *env, int64_t ms);
/* How long after a change of a table's Time to Live setting another change
 * is refused (DynamoDB: one hour, ValidationException "Time to live has
 * been modified multiple times within a fixed interval"); ms < 0: the
 * default ST_TTL_CHANGE_INTERVAL_MS, 0: no limit.  Like the retention, the
 * same on every replica (cluster file): group 0 applies the rule at apply
 * time with the Raft entry's time. */
void st_env_set_ttl_change_interval(st_env *env, int64_t ms);
/* Flushes LMDB to disk (mdb_env_sync with force). */
int st_env_sync(st_env *env, char *errmsg);
/* The data file's bytes up to its last used page (free pages inside
 * included: the file never shrinks); 0 if LMDB cannot say.  Cheap: LMDB's
 * meta page. */
uint64_t st_env_used(st_env *env);
/* With nosync the environment writes through a writable map whose file
 * blocks are preallocated ahead of use (env.c): every write transaction
 * begins with 4 MiB (and 1/64 of the data) allocated past the last used
 * page, and each write of the engine reserves what it may add before it
 * writes.  Before loading a snapshot (st_load_*, which reserves nothing),
 * reserve `bytes` past the last used page.  SHOAL_E_FULL when the disk
 * cannot hold them (nothing written); a no-op without nosync. */
int st_env_reserve(st_env *env, uint64_t bytes, char *errmsg);
/* Rebuildable environments: why the data found at open was not trusted and
 * was removed (NULL if it was trusted or there was none), so that the owner
 * rebuilds it before serving. */
const char *st_env_rebuilt(const st_env *env);
/* Asks for the environment to be emptied and rebuilt at its next open (its
 * data was found wrong); durable when it returns. */
int st_env_mark_rebuild(st_env *env, char *errmsg);
/* The Raft index recorded by the last committed st_txn_set_applied (0 if none). */
uint64_t st_env_applied(st_env *env);

/* ------------------------------------------------------------------------ */
/* Write transactions                                                        */
/* ------------------------------------------------------------------------ */

/*
 * Every write happens inside an st_txn (one LMDB write transaction), so that
 * the state machine can apply a batch of commands and record the applied Raft
 * index atomically with them.
 *
 * A write function that fails with a client error (validation, condition
 * failed, not found, ...) has changed nothing and the transaction stays
 * usable.  One that fails with an environmental error (NOMEM, IO, FULL) may
 * have written part of its change: the transaction is then poisoned, every
 * later call returns the same error and the caller must st_txn_abort.
 */
typedef struct st_txn st_txn;

int st_txn_begin(st_env *env, st_txn **out, char *errmsg);
/* Records the Raft index of the entry being applied; stored with the data. */
void st_txn_set_applied(st_txn *txn, uint64_t index);
/* Commits and frees the transaction, in every case. On failure nothing of
 * the transaction is visible. */
int st_txn_commit(st_txn *txn, char *errmsg);
void st_txn_abort(st_txn *txn);

/* Catalog writes. */
/* A definition as st_table_create would store it, without an environment
 * (for components that must agree with the catalog: the router's cache,
 * the TableDefine converter): checked as CreateTable checks it, key types
 * from AttributeDefinitions, index ids that are 0 assigned exactly as the
 * catalog assigns them, next_index_id past every id.  Strings are shared
 * with src; arrays are in a.  SHOAL_E_VALIDATION, SHOAL_E_NOMEM. */
int st_table_def_stored(const st_table_def *src, sh_arena *a, st_table_def *out, char *errmsg);
/* The next index id of a definition: its next_index_id, raised past every
 * index id (1 when none). */
uint32_t st_table_def_next_index_id(const st_table_def *d);
int st_table_create(st_txn *txn, const st_table_def *def, char *errmsg);
/* Removes the table and all its items and index entries. */
int st_table_delete(st_txn *txn, const char *name, char *errmsg);
/* Group 0's DeleteTable: st_table_delete, but a table with
 * DeletionProtectionEnabled is refused (SHOAL_E_VALIDATION, DynamoDB's
 * message) and left as it is.  Data groups use st_table_delete: their copy
 * of the flag is CreateTable's and never read. */
int st_table_delete_unprotected(st_txn *txn, const char *name, char *errmsg);

/* Time to live (ttl.c).  Whether an item whose TTL attribute holds v (NULL:
 * absent) is expired at now_ms (ms since the epoch): v is a Number of
 * seconds since the epoch, earlier than now and not more than
 * ST_TTL_MAX_PAST_S before it (DynamoDB ignores older ones, and values that
 * are not Numbers).  The one decision, used by the scanner to find
 * candidates and by the apply of a TTL delete to confirm one. */
#define ST_TTL_MAX_PAST_S         (5LL * 365 * 86400)
#define ST_TTL_CHANGE_INTERVAL_MS (3600LL * 1000)
bool st_ttl_expired(const st_value *v, int64_t now_ms);
/* The same for an item (an ST_M) of a table whose TTL attribute is attr
 * (NULL: TTL disabled, never expired). */
bool st_ttl_item_expired(const st_value *item, const char *attr, int64_t now_ms);

/* Tags (catalog_tags.c).  st_tags_check: each tag of a request (Key 1..128
 * characters, Value 0..256, DynamoDB's characters, no "aws:" prefix), no key
 * twice, at most ST_MAX_TAGS.  st_tags_change: old's tags without the keys
 * in remove, with set's added or replacing the value of the same key, into
 * *out (a's memory; strings shared); set is checked as st_tags_check does,
 * and the result may have at most ST_MAX_TAGS.  SHOAL_E_VALIDATION with a
 * message naming the tag, SHOAL_E_NOMEM. */
int st_tags_check(const st_tag *tags, uint32_t n, char *errmsg);
int st_tags_change(const st_tag *old, uint32_t n_old, const st_tag *set, uint32_t n_set,
                   const char *const *remove, uint32_t n_remove, sh_arena *a, st_tag **out,
                   uint32_t *n_out, char *errmsg);

typedef enum st_return_values {
	ST_RV_NONE = 0,
	ST_RV_ALL_OLD,
	ST_RV_UPDATED_OLD,
	ST_RV_ALL_NEW,
	ST_RV_UPDATED_NEW,
} st_return_values;

/* Parses "NONE", "ALL_OLD", ...; -1 if unknown. */
int st_return_values_parse(const char *s);

/* Expression attribute names (an M of S values, "#n" -> "name") and values
 * (an M, ":v" -> value), shared by every expression of one request; either
 * may be NULL.  Every name and value given must be used by some expression
 * of the request, as DynamoDB requires. */
typedef struct st_expr_attrs {
	const st_value *names;
	const st_value *values;
} st_expr_attrs;

typedef struct st_put_req {
	const char *table;
	const st_value *item;  /* ST_M */
	const char *condition; /* ConditionExpression or NULL */
	st_expr_attrs attrs;
	st_return_values return_values;    /* NONE or ALL_OLD */
	bool return_old_on_condition_fail; /* ReturnValuesOnConditionCheckFailure */
} st_put_req;

typedef struct st_update_req {
	const char *table;
	const st_value *key; /* ST_M with exactly the key attributes */
	const char *update;  /* UpdateExpression or NULL (then: create the key-only item) */
	const char *condition;
	st_expr_attrs attrs;
	st_return_values return_values; /* any */
	bool return_old_on_condition_fail;
} st_update_req;

typedef struct st_delete_req {
	const char *table;
	const st_value *key;
	const char *condition;
	st_expr_attrs attrs;
	st_return_values return_values; /* NONE or ALL_OLD */
	bool return_old_on_condition_fail;
	/* A delete by the TTL service (node/ttl.c; CommandOp.ttl_expire): done
	 * only when the item is expired at the transaction's time by the
	 * table's TTL setting at that time (st_ttl_expired), else
	 * SHOAL_E_CONDITION and nothing changes.  A change log that records
	 * the delete names the TTL service as its author (DynamoDB Streams'
	 * userIdentity {Type "Service", PrincipalId "dynamodb.amazonaws.com"}). */
	bool ttl;
} st_delete_req;

/* The entry writes of one secondary index caused by one base write, for
 * ReturnConsumedCapacity (proto/wire.h turns sizes into units): at most one
 * delete of the old entry and one put of the new one (an entry whose key
 * changed is both).  Sizes are st_item_size of the projected entries. */
typedef struct st_index_write {
	const char *name; /* the index's name (arena) */
	bool local;       /* LSI; else GSI (written asynchronously, charged here) */
	bool del, put;
	size_t del_size, put_size;
} st_index_write;

typedef struct st_write_result {
	/* ReturnValues: an ST_M, or NULL when nothing is returned (NONE, or no
	 * old item, or nothing updated). */
	st_value *attributes;
	/* Set when the condition failed and ReturnValuesOnConditionCheckFailure
	 * was ALL_OLD and an item existed. */
	st_value *old_item;
	/* Capacity figures of a successful write: st_item_size of the item
	 * before and after it (0: no such item), and the index entries it wrote
	 * (n_index_writes of them, arena; NULL when none). */
	size_t old_size, new_size;
	st_index_write *index_writes;
	uint32_t n_index_writes;
	/* ReturnItemCollectionMetrics, for a table with local secondary
	 * indexes (coll_attr NULL otherwise): the item collection's partition
	 * key -- attribute name (arena) and value (in the request's item or
	 * key, or the arena) -- and its size in bytes (base items and LSI
	 * entries) after the write.  Set for every successful put, update or
	 * delete, also one that changes nothing; never for a ConditionCheck. */
	const char *coll_attr;
	const st_value *coll_pk;
	uint64_t coll_size;
	/* Planning reached the item (its lock, its image, the condition): a
	 * failure from then on is the item's (a transaction's cancellation
	 * reason); before, the request's (the whole transaction refused). */
	bool item_stage;
} st_write_result;

int st_put(st_txn *txn, const st_put_req *req, sh_arena *a, st_write_result *res, char *errmsg);
int st_update(st_txn *txn, const st_update_req *req, sh_arena *a, st_write_result *res,
              char *errmsg);
int st_delete(st_txn *txn, const st_delete_req *req, sh_arena *a, st_write_result *res,
              char *errmsg);

/* ------------------------------------------------------------------------ */
/* Transactions (txn.c)                                                      */
/* ------------------------------------------------------------------------ */

/* TransactWriteItems' ConditionCheck: the key and a condition, no write. */
typedef struct st_check_req {
	const char *table;
	const st_value *key;
	const char *condition; /* required */
	st_expr_attrs attrs;
	bool return_old_on_condition_fail;
} st_check_req;

typedef enum st_txn_action_kind {
	ST_TXA_CHECK,
	ST_TXA_PUT,
	ST_TXA_UPDATE,
	ST_TXA_DELETE
} st_txn_action_kind;

/* One action of a transaction. */
typedef struct st_txn_action {
	st_txn_action_kind kind;
	union {
		st_check_req check;
		st_put_req put;
		st_update_req update;
		st_delete_req del;
	} u;
} st_txn_action;

/* What became of one action: code SHOAL_OK, or why it cancelled the
 * transaction (SHOAL_E_CONDITION_FAILED with old_item when asked for,
 * SHOAL_E_TXN_CONFLICT, SHOAL_E_VALIDATION, SHOAL_E_COLLECTION_LIMIT, ...;
 * message in the arena); res: the write's figures when applied. */
typedef struct st_txn_result {
	int code;
	const char *message;
	st_value *old_item;
	st_write_result res;
} st_txn_result;

/* Runs the actions all or nothing: every one is planned (validation, a
 * transaction in progress on its item, its condition, its new image, its
 * index changes) before any is applied.  SHOAL_OK: all applied;
 * SHOAL_E_TXN_CANCELED: nothing written, results[i] says why each failed
 * (code SHOAL_OK for those that could have gone); SHOAL_E_VALIDATION for
 * two actions on one item; environmental errors poison txn.  Every write
 * (st_put, st_update, st_delete, st_transact) on an item locked by a
 * prepared transaction is SHOAL_E_TXN_CONFLICT "Transaction is ongoing for
 * the item".  Memory from a. */
int st_transact(st_txn *txn, const st_txn_action *acts, uint32_t n, sh_arena *a,
                st_txn_result *results, char *errmsg);

/* st_transact's planning alone: the same answer, nothing written. */
int st_txn_plan(st_txn *txn, const st_txn_action *acts, uint32_t n, sh_arena *a,
                st_txn_result *results, char *errmsg);

#define ST_TXN_ID_LEN    16
#define ST_TXN_MAX_PARTS 100

/* A participant's prepared transaction. */
typedef struct st_prepared {
	uint8_t id[ST_TXN_ID_LEN];
	uint32_t coord_group; /* the group holding its record (the decision) */
	int64_t created_ms;   /* st_txn_set_time of the prepare */
	uint32_t n_locks;
	const uint8_t *blob; /* the actions as the caller gave them (arena) */
	size_t len;
} st_prepared;

/* Two-phase commit, a participant's side.  prepare: the actions planned as
 * st_transact plans them; when all could go, each item is locked for id and
 * the transaction kept (coord_group, the time, blob: the caller's encoding
 * of the actions); nothing else is written.  A prepare of an id already
 * prepared holds (SHOAL_OK).  release: the decision came (commit or
 * abort): the locks and the record go, *out is what was prepared (found
 * false: nothing was, e.g. the decision came twice); a commit then applies
 * the actions with st_transact in the same LMDB transaction.  get: the
 * prepared transaction id, if any.  list: every prepared transaction (ids,
 * groups, times; no blobs), read-only (recovery). */
int st_txn_prepare(st_txn *txn, const uint8_t id[ST_TXN_ID_LEN], uint32_t coord_group,
                   const st_txn_action *acts, uint32_t n, const void *blob, size_t len, sh_arena *a,
                   st_txn_result *results, char *errmsg);
int st_txn_release(st_txn *txn, const uint8_t id[ST_TXN_ID_LEN], sh_arena *a, st_prepared *out,
                   bool *found, char *errmsg);
int st_txn_prepared_get(st_txn *txn, const uint8_t id[ST_TXN_ID_LEN], sh_arena *a, st_prepared *out,
                        bool *found, char *errmsg);
int st_txn_prepared_list(st_env *env, sh_arena *a, st_prepared **out, uint32_t *n, char *errmsg);

typedef enum st_txn_state {
	ST_TXN_PREPARING = 1, /* prepares under way: no decision yet */
	ST_TXN_COMMITTED = 2,
	ST_TXN_ABORTED = 3,
} st_txn_state;

/* The coordinator's record of a transaction (in the group of its first
 * item): the decision, who takes part and who has applied the decision,
 * a digest of the request (a retry with the same ClientRequestToken must
 * be the same request), and the answer a retry gets (caller's bytes). */
typedef struct st_txn_record {
	uint8_t id[ST_TXN_ID_LEN];
	st_txn_state state;
	int64_t created_ms;
	int64_t expires_ms; /* 0: kept; else dropped by st_txn_expire after it */
	uint8_t digest[16];
	uint32_t n_parts;
	uint32_t parts[ST_TXN_MAX_PARTS];
	bool acked[ST_TXN_MAX_PARTS];
	const uint8_t *outcome; /* arena (get, list) or the caller's (put) */
	size_t outcome_len;
} st_txn_record;

/* get: found false when there is none; put: creates or replaces; list:
 * the open records -- those without an expiry (PREPARING, or decided and
 * not yet acknowledged by every participant) -- read-only (recovery). */
int st_txn_record_get(st_txn *txn, const uint8_t id[ST_TXN_ID_LEN], sh_arena *a, st_txn_record *out,
                      bool *found, char *errmsg);
int st_txn_record_put(st_txn *txn, const st_txn_record *r, char *errmsg);
int st_txn_record_list(st_env *env, sh_arena *a, st_txn_record **out, uint32_t *n, char *errmsg);

/* Single-item writes made idempotent by a token: the first answer (the
 * caller's bytes), kept until expires_ms. */
int st_write_token_get(st_txn *txn, const uint8_t token[16], sh_arena *a, const uint8_t **outcome,
                       size_t *len, bool *found, char *errmsg);
int st_write_token_put(st_txn *txn, const uint8_t token[16], int64_t expires_ms,
                       const void *outcome, size_t len, char *errmsg);
/* The transaction's replicated time (st_txn_set_time; 0 if none). */
int64_t st_txn_time(const st_txn *txn);
/* Drops records (transaction records with an expiry, write tokens) whose
 * time has passed by now_ms, at most max of them. */
int st_txn_expire(st_txn *txn, int64_t now_ms, uint32_t max, uint32_t *removed, char *errmsg);
/* The earliest expiry of a record or token (*any false: none). */
int st_txn_next_expiry(st_env *env, int64_t *ms, bool *any, char *errmsg);

/* One-shot forms: begin, write, commit. */
int st_put_item(st_env *env, const st_put_req *req, sh_arena *a, st_write_result *res,
                char *errmsg);
int st_update_item(st_env *env, const st_update_req *req, sh_arena *a, st_write_result *res,
                   char *errmsg);
int st_delete_item(st_env *env, const st_delete_req *req, sh_arena *a, st_write_result *res,
                   char *errmsg);

/* ------------------------------------------------------------------------ */
/* Reads (each opens its own LMDB read transaction: a consistent snapshot)    */
/* ------------------------------------------------------------------------ */

int st_table_describe(st_env *env, const char *name, sh_arena *a, st_table_info *out, char *errmsg);
/* The table whose id is `id` (SHOAL_E_NOT_FOUND if there is none): a walk
 * of the catalog, for the rare caller that has only the id (a partition
 * move defining the table at a group that lacks it, node/pmove.c). */
int st_table_describe_id(st_env *env, uint32_t id, sh_arena *a, st_table_info *out, char *errmsg);
/* The id of table `name` (SHOAL_E_NOT_FOUND if there is none): a cheap
 * check of a router's cached id. */
int st_table_id(st_env *env, const char *name, uint32_t *id, char *errmsg);
/* Table names in order, after exclusive_start (NULL: from the first), at most
 * limit (1..100).  *last is the last name returned when more may follow, else
 * NULL. */
int st_table_list(st_env *env, const char *exclusive_start, uint32_t limit, sh_arena *a,
                  const char ***names, uint32_t *n, const char **last, char *errmsg);

typedef struct st_get_req {
	const char *table;
	const st_value *key;
	const char *projection; /* ProjectionExpression or NULL */
	const st_value *names;  /* ExpressionAttributeNames or NULL */
} st_get_req;

/* *item is the item (projected), or NULL when there is none. */
int st_get_item(st_env *env, const st_get_req *req, sh_arena *a, st_value **item, char *errmsg);
/* The same, also giving *size: st_item_size of the whole stored item before
 * projection (0 when there is none), what ReturnConsumedCapacity charges. */
int st_get_item_sized(st_env *env, const st_get_req *req, sh_arena *a, st_value **item,
                      size_t *size, char *errmsg);

/* TransactGetItems at one group: every get in one read transaction (a
 * snapshot), each with its item (projected; NULL: none), the stored size,
 * whether a prepared transaction holds it (locked) and its write version:
 * a number that changes whenever a write of the item is applied (in
 * memory; meaningful only against another read of the same *instance).
 * A reader that sees the same version twice, with reads serialised with
 * the applies of writes, knows the item did not change in between.  A
 * client error (validation, unknown table) is the whole request's. */
typedef struct st_txn_get {
	st_get_req req; /* in */
	st_value *item; /* out */
	size_t size;
	bool locked;
	uint64_t version;
} st_txn_get;

int st_txn_get_items(st_env *env, st_txn_get *gets, uint32_t n, sh_arena *a, uint64_t *instance,
                     char *errmsg);

typedef enum st_select {
	ST_SELECT_DEFAULT = 0, /* ALL_ATTRIBUTES, or SPECIFIC_ATTRIBUTES with a projection */
	ST_SELECT_ALL_ATTRIBUTES,
	ST_SELECT_ALL_PROJECTED_ATTRIBUTES,
	ST_SELECT_SPECIFIC_ATTRIBUTES,
	ST_SELECT_COUNT,
} st_select;

/* Parses "ALL_ATTRIBUTES", ...; -1 if unknown. */
int st_select_parse(const char *s);

typedef struct st_query_req {
	const char *table;
	const char *index;         /* IndexName or NULL for the table */
	const char *key_condition; /* KeyConditionExpression, required */
	const char *filter;        /* FilterExpression or NULL */
	const char *projection;    /* ProjectionExpression or NULL */
	st_expr_attrs attrs;
	bool forward;   /* ScanIndexForward (default true) */
	uint32_t limit; /* 0: none; counts items evaluated (read) */
	st_select select;
	const st_value *exclusive_start_key; /* ST_M or NULL */
	bool consistent;                     /* ConsistentRead (validated, storage is local) */
	/* Query on a GSI with WriteShards > 1: the write shard to read
	 * (0..WriteShards-1); the router asks every shard and merges (index.h). */
	uint32_t shard;
} st_query_req;

typedef struct st_scan_req {
	const char *table;
	const char *index;
	const char *filter;
	const char *projection;
	st_expr_attrs attrs;
	uint32_t limit;
	st_select select;
	const st_value *exclusive_start_key;
	bool consistent;
	uint32_t segment;        /* 0..total_segments-1 */
	uint32_t total_segments; /* 0: not segmented; else 1..1000000 */
	/* Restricts the scan to partition-key hashes in [hash_lo, hash_hi]
	 * (inclusive); the router uses it to scan one partition. 0 and 0 mean
	 * the whole range. */
	uint64_t hash_lo, hash_hi;
} st_scan_req;

typedef struct st_page {
	st_value *items;              /* array of count items (ST_M); NULL with Select COUNT */
	uint32_t count;               /* items returned (after the filter) */
	uint32_t scanned;             /* items evaluated (before the filter) */
	st_value *last_evaluated_key; /* ST_M or NULL when the range is exhausted */
	/* Sum of st_item_size of the items evaluated (read, before the filter):
	 * what ReturnConsumedCapacity charges for the page. */
	uint64_t bytes_read;
	/* Query: the partition key value read (arena memory), which names the
	 * partition's hot key; NULL for Scan. */
	const st_value *pk;
} st_page;

int st_query(st_env *env, const st_query_req *req, sh_arena *a, st_page *out, char *errmsg);
int st_scan(st_env *env, const st_scan_req *req, sh_arena *a, st_page *out, char *errmsg);

/* ------------------------------------------------------------------------ */
/* Placement                                                                 */
/* ------------------------------------------------------------------------ */

/* The 64-bit placement hash of a partition-key value of a table: the high 64
 * bits of the XXH3-128 digest of the table id and the key's canonical bytes
 * (fixed seed; see keyenc.c).  The same hash
 * orders items in LMDB, so a hash range is one contiguous key range. */
uint64_t st_key_hash(uint32_t table_id, const st_value *pk);

/* Group 0's copy of the cluster map (clustermap.c; issue 14): the map
 * decoded into *out (sh_map_fini it) and *found true, or *found false and
 * *out untouched when none is stored yet (a stored map that does not decode
 * -- a peer's snapshot brings it unchecked -- is SHOAL_E_INTERNAL); and the
 * apply of a change -- a compare-and-set on the epoch, SHOAL_E_WRONG_EPOCH if
 * the stored map (the birth map, epoch 1, when none) is not prev_epoch's. */
struct sh_map; /* common/cluster_map.h */
int st_cluster_map_load(st_env *env, struct sh_map *out, bool *found, char *errmsg);
/* Only the stored map's epoch (0: none stored), without copying it. */
int st_cluster_map_epoch(st_env *env, uint64_t *epoch, char *errmsg);
/* Whether the stored map has a move of a partition of table under way (a
 * pending to_group).  A change that begins a move of a table with a GSI
 * being created is refused (SHOAL_E_IN_USE), and so is UpdateTable creating
 * a GSI while a move of the table is under way: a backfill and a move of
 * one table never overlap. */
int st_cluster_map_moving(st_txn *txn, uint32_t table, bool *moving, char *errmsg);
int st_cluster_map_set(st_txn *txn, uint64_t prev_epoch, const uint8_t *buf, size_t len,
                       char *errmsg);

#endif
