/*
 * route.h -- what a router needs from the storage engine to place a request
 * on a partition without a node (prefix st_; implemented in storage/route.c).
 *
 * The router hashes a request's partition-key value (st_key_hash) to find the
 * partition and its storage group.  For GetItem/PutItem/UpdateItem/DeleteItem
 * and the batches the value is an attribute of the Key or Item; for Query it
 * is the equality on the hash key in the KeyConditionExpression, which only
 * the engine's expression parser can extract.  These functions run the same
 * checks as the engine does before it would touch LMDB (st_route_key is
 * keycheck.c's, st_query_route read_query.c's own prepare step), so an
 * error found here is the one the owning node would have answered.
 *
 * No LMDB, no I/O: pure functions of the request and a key schema, safe on
 * any thread.
 *
 * Memory: inputs are borrowed for the call; *pk and *sk point into `key` (for
 * st_route_key) or into arena `a` (for st_query_route) and live as long as
 * those.
 */
#ifndef SHOAL_STORAGE_ROUTE_H
#define SHOAL_STORAGE_ROUTE_H

#include <stdbool.h>

#include "storage.h"

/*
 * Checks a normalised Key (item == false: exactly the key attributes, as for
 * GetItem/UpdateItem/DeleteItem and ExclusiveStartKey) or Item (item ==
 * true: PutItem, other attributes allowed) against a key schema with
 * DynamoDB's messages ("The provided key element does not match the schema",
 * "One or more parameter values were invalid: Missing the key PK in the
 * item", type mismatches, empty or oversized key values), and hands out the
 * partition-key value and the sort-key value (*sk NULL without a sort key;
 * sk may be NULL).  SHOAL_E_VALIDATION.
 */
int st_route_key(const st_key_schema *ks, const st_value *key, bool item, const st_value **pk,
                 const st_value **sk, char *errmsg);

/*
 * Where a Query reads, for a router that has no table data: the checks
 * st_query makes before it opens the table (TableName, Select,
 * ExpressionAttributeNames/Values rules, parsing KeyConditionExpression,
 * FilterExpression and ProjectionExpression, unused placeholders,
 * ExclusiveStartKey values) -- the same code, so the first error found here
 * is the one the node would answer -- then the key condition against the
 * key schema of table t, or of its index x (resolved by the caller; NULL:
 * the table), and the placement hashes it reads: one (the table, an LSI, a
 * GSI without write shards) or one per write shard of a GSI with
 * WriteShards > 1 (hash[s] for shard s).  pk is the value compared with "="
 * to the hash key, normalised.  Memory from a.  ValidationExceptions as
 * st_query returns them, or SHOAL_E_NOMEM.
 */
typedef struct st_query_route_plan {
	const st_value *pk;
	uint32_t n;     /* placement hashes: 1, or the GSI's write shards */
	uint64_t *hash; /* [n] */
} st_query_route_plan;
int st_query_route(const st_query_req *req, const st_table_def *t, const st_index_def *x,
                   sh_arena *a, st_query_route_plan *out, char *errmsg);

#endif
