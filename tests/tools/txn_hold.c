/*
 * txn_hold -- plays a router that dies right after the prepares of a
 * cross-group transaction (router/txn.c, "Crashes": "prepares sent, some
 * applied"): it sends the prepare of a TransactWriteItems to every data
 * group of a cluster and exits without a decision.  The items stay locked
 * -- single-item writes get TransactionConflictException, transactions a
 * TransactionConflict reason, TransactGetItems is cancelled -- until the
 * groups' recovery (node/txn_recover.c) aborts the transaction, about
 * NODE_TXN_RECOVER_MS later.  Tests use it to see both.
 *
 *   txn_hold --cluster CLUSTER.INI --transact-items JSON
 *
 * JSON is TransactWriteItems' TransactItems (as `shoal transact-write-items`
 * takes it; "file://PATH" reads a file).  Every group gets the whole list
 * as its part (a node does not check where an item lives), so the group
 * that owns each item locks it; the first data group holds the record.
 * Exit status 0 when every data group prepared, 1 otherwise (printed).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "common/arena.h"
#include "common/cluster.h"
#include "common/tls.h"
#include "proto/wire.h"
#include "proto/wire_api.h"
#include "storage/storage.h"

static int usage(void)
{
	fprintf(stderr, "usage: txn_hold --cluster CLUSTER.INI --transact-items JSON\n");
	return 2;
}

/* Sends nr to node n; the answer's status (or -1 when none came). */
/* The cluster's TLS, as a member (router.pem), when the file has [tls]. */
static sh_tls *tls;

static int send_to(const sh_node_conf *n, Shoal__NodeRequest *nr, uint32_t *state)
{
	char url[SH_ADDR_MAX + 8];
	if (!sh_tls_url(tls != NULL, n->rpc, url, sizeof(url)))
		return -1;
	nng_socket s;
	if (nng_req0_open(&s) != 0)
		return -1;
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 5000);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 5000);
	int rc = -1;
	size_t len = shoal__node_request__get_packed_size(nr);
	uint8_t *buf = malloc(len + 1);
	void *rb = NULL;
	size_t rl = 0;
	char err[SH_ERRMSG_SIZE];
	nng_tls_config *cfg = tls != NULL ? sh_tls_client_for(tls, n->id, err) : NULL;
	if (buf != NULL && (tls == NULL || cfg != NULL) && sh_tls_dial(s, url, cfg, 0) == 0) {
		shoal__node_request__pack(nr, buf);
		if (nng_send(s, buf, len, 0) == 0 && nng_recv(s, &rb, &rl, NNG_FLAG_ALLOC) == 0) {
			Shoal__NodeResponse *r = shoal__node_response__unpack(NULL, rl, rb);
			if (r != NULL && r->response != NULL) {
				rc = wire_code_from_status((int)r->response->status);
				*state = r->txn_state;
			}
			if (r != NULL)
				shoal__node_response__free_unpacked(r, NULL);
			nng_free(rb, rl);
		}
	}
	free(buf);
	nng_close(s);
	return rc;
}

int main(int argc, char **argv)
{
	const char *conf_path = NULL, *items = NULL;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--cluster") == 0)
			conf_path = argv[i + 1];
		else if (strcmp(argv[i], "--transact-items") == 0)
			items = argv[i + 1];
		else
			return usage();
	}
	if (conf_path == NULL || items == NULL)
		return usage();
	char msg[SH_ERRMSG_SIZE];
	sh_cluster_conf conf;
	if (sh_cluster_load(conf_path, &conf, msg) != SHOAL_OK) {
		fprintf(stderr, "txn_hold: %s\n", msg);
		return 2;
	}
	static sh_tls tls_store;
	if (conf.tls_dir[0] != '\0') {
		if (sh_tls_load(&tls_store, conf.tls_dir, "router", NULL, msg) != SHOAL_OK) {
			fprintf(stderr, "txn_hold: %s\n", msg);
			return 2;
		}
		tls = &tls_store;
	}
	json_error_t je;
	json_t *list = strncmp(items, "file://", 7) == 0 ? json_load_file(items + 7, 0, &je)
	                                                 : json_loads(items, 0, &je);
	if (list == NULL) {
		fprintf(stderr, "txn_hold: --transact-items: %s\n", je.text);
		return 2;
	}
	json_t *body = json_pack("{s:o}", "TransactItems", list);
	sh_arena a;
	sh_arena_init(&a);
	Shoal__Request *req;
	if (wire_api_request_from_json(&a, "TransactWriteItems", body, &req, msg) != SHOAL_OK) {
		fprintf(stderr, "txn_hold: %s\n", msg);
		return 2;
	}
	const Shoal__TransactWriteItemsRequest *tw = req->transact_write_items;

	/* The data groups, in partition order; the first holds the record. */
	uint32_t groups[SH_MAX_GROUPS], ng = 0;
	for (uint32_t p = 0; p < sh_cluster_partitions(&conf); p++) {
		uint32_t g = sh_cluster_partition_group(&conf, p);
		bool seen = false;
		for (uint32_t k = 0; k < ng; k++)
			seen = seen || groups[k] == g;
		if (!seen)
			groups[ng++] = g;
	}
	uint8_t id[16], attempt[16];
	if (getrandom(id, 16, 0) != 16 || getrandom(attempt, 16, 0) != 16)
		return 2;
	uint32_t *pos = sh_arena_calloc(&a, tw->n_transact_items + 1, sizeof(*pos));
	for (size_t i = 0; i < tw->n_transact_items; i++)
		pos[i] = (uint32_t)i;

	int failed = 0;
	for (uint32_t k = 0; k < ng; k++) {
		Shoal__TxnWrite w = SHOAL__TXN_WRITE__INIT;
		w.id = (ProtobufCBinaryData){16, id};
		w.attempt = (ProtobufCBinaryData){16, attempt};
		w.actions = tw->transact_items;
		w.n_actions = tw->n_transact_items;
		w.positions = pos;
		w.n_positions = tw->n_transact_items;
		w.coord_group = groups[0];
		w.request_actions = (uint32_t)tw->n_transact_items;
		if (k == 0) {
			w.participants = groups;
			w.n_participants = ng;
		}
		Shoal__NodeRequest nr = SHOAL__NODE_REQUEST__INIT;
		nr.group = groups[k];
		nr.txn_write = &w;
		int rc = -1;
		uint32_t state = 0;
		for (uint32_t n = 0; n < conf.n_nodes && rc != SHOAL_OK; n++)
			if (sh_cluster_hosts(&conf, conf.nodes[n].id, groups[k]))
				rc = send_to(&conf.nodes[n], &nr, &state);
		if (rc == SHOAL_OK)
			printf("group %u: prepared\n", groups[k]);
		else
			printf("group %u: not prepared (%s)\n", groups[k],
			       rc < 0 ? "no answer" : shoal_err_name(rc));
		failed += rc != SHOAL_OK;
	}
	json_decref(body);
	sh_arena_fini(&a);
	return failed == 0 ? 0 : 1;
}
