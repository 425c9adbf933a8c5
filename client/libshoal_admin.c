/*
 * libshoal_admin.c -- Shoal's own administration calls (shoal.h "Cluster
 * administration"): the Admin operation's JSON body built and its answer
 * read with jansson, through shoal_call_json like any operation.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/libshoal_int.h"

static int admin_call_ex(shoal_client *c, json_t *body, uint64_t *map_epoch, uint32_t *group,
                         shoal_error *err)
{
	if (body == NULL) {
		lib_set_err(err, SHOAL_E_NOMEM, SHOAL_SRC_LOCAL, "out of memory");
		return SHOAL_E_NOMEM;
	}
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (text == NULL) {
		lib_set_err(err, SHOAL_E_NOMEM, SHOAL_SRC_LOCAL, "out of memory");
		return SHOAL_E_NOMEM;
	}
	char *out = NULL;
	int rc = shoal_call_json(c, "Admin", text, &out, err);
	free(text);
	if (rc == SHOAL_OK && (map_epoch != NULL || group != NULL)) {
		json_t *resp = json_loads(out, 0, NULL);
		json_t *e = json_object_get(resp, "MapEpoch");
		json_t *g = json_object_get(resp, "GroupId");
		if (map_epoch != NULL)
			*map_epoch = json_is_integer(e) ? (uint64_t)json_integer_value(e) : 0;
		if (group != NULL)
			*group = json_is_integer(g) ? (uint32_t)json_integer_value(g) : 0;
		json_decref(resp);
	}
	shoal_free(out);
	return rc;
}

static int admin_call(shoal_client *c, json_t *body, uint64_t *map_epoch, shoal_error *err)
{
	return admin_call_ex(c, body, map_epoch, NULL, err);
}

int shoal_admin_add_group(shoal_client *c, uint32_t group_id, const uint32_t *nodes,
                          uint32_t n_nodes, uint32_t *group_out, uint64_t *map_epoch,
                          shoal_error *err)
{
	json_t *spec = json_object(), *list = json_array();
	json_t *body = json_pack("{s:o}", "AddGroup", spec);
	if (group_id != 0 && spec != NULL)
		json_object_set_new(spec, "GroupId", json_integer(group_id));
	for (uint32_t k = 0; k < n_nodes && list != NULL; k++)
		json_array_append_new(list, json_integer(nodes[k]));
	if (n_nodes > 0 && spec != NULL && list != NULL)
		json_object_set(spec, "Nodes", list);
	if (spec == NULL || list == NULL) {
		json_decref(body);
		body = NULL;
	}
	json_decref(list);
	return admin_call_ex(c, body, map_epoch, group_out, err);
}

int shoal_admin_add_node(shoal_client *c, uint32_t node_id, const char *raft, const char *rpc,
                         uint64_t *map_epoch, shoal_error *err)
{
	if (raft == NULL || rpc == NULL) {
		lib_set_err(err, SHOAL_E_VALIDATION, SHOAL_SRC_LOCAL,
		            "shoal_admin_add_node: raft and rpc are required");
		return SHOAL_E_VALIDATION;
	}
	return admin_call(c,
	                  json_pack("{s:{s:I,s:s,s:s}}", "AddNode", "Id", (json_int_t)node_id,
	                            "Raft", raft, "Rpc", rpc),
	                  map_epoch, err);
}

int shoal_admin_drain_node(shoal_client *c, uint32_t node_id, uint64_t *map_epoch, shoal_error *err)
{
	return admin_call(c, json_pack("{s:I}", "DrainNode", (json_int_t)node_id), map_epoch, err);
}

/* Hashes travel as "0x..." text: a JSON integer stops at 2^63-1. */
static int partition_call(shoal_client *c, const char *action, const char *what,
                          const char *table_name, uint64_t h, uint32_t to_group,
                          uint64_t *map_epoch, shoal_error *err)
{
	char hex[24];
	snprintf(hex, sizeof(hex), "0x%016" PRIx64, h);
	json_t *body = table_name != NULL
	                   ? json_pack("{s:{s:s,s:s}}", action, "TableName", table_name, what, hex)
	                   : json_pack("{s:{s:b,s:s}}", action, "GsiSpace", 1, what, hex);
	json_t *change = json_object_get(body, action);
	if (body != NULL && to_group != 0 &&
	    json_object_set_new(change, "ToGroup", json_integer(to_group)) != 0) {
		json_decref(body);
		body = NULL;
	}
	return admin_call(c, body, map_epoch, err);
}

int shoal_admin_move_partition(shoal_client *c, const char *table_name, uint64_t hash,
                               uint32_t to_group, uint64_t *map_epoch, shoal_error *err)
{
	/* to_group 0 (no ToGroup) goes as is: group 0 says whether it may
	 * hold table data.  table_name NULL: the GSI space. */
	return partition_call(c, "MovePartition", "Hash", table_name, hash, to_group, map_epoch,
	                      err);
}

int shoal_admin_split_partition(shoal_client *c, const char *table_name, uint64_t at,
                                uint32_t to_group, uint64_t *map_epoch, shoal_error *err)
{
	return partition_call(c, "SplitPartition", "At", table_name, at, to_group, map_epoch, err);
}
