/*
 * member.c -- one Raft membership change of a group, on its leader
 * (NodeRequest.member_change; issue 14's replica moves).  The executor on
 * group 0's leader (node/elastic.c) asks for them; each action is "make it
 * so", so asking again for what already holds answers OK and a new group-0
 * leader can repeat a step it found unfinished.
 *
 *   action    configuration before          raft calls                   answered
 *   --------  ----------------------------  ---------------------------  -----------------
 *   ADD       absent                        raft_add (spare), then       both committed
 *                                           raft_assign(RAFT_STANDBY)
 *             spare                         raft_assign(RAFT_STANDBY)    committed
 *             standby or voter              --                           OK at once
 *   PROMOTE   standby or spare              raft_assign(RAFT_VOTER):     committed (raft
 *                                           raft catches it up in        answers NOCONNECTION
 *                                           rounds first                 if it cannot)
 *             voter                         --                           OK at once
 *             absent                        --                           NOT_FOUND
 *   REMOVE    present                       raft_remove                  committed
 *             absent                        --                           OK at once
 *   TRANSFER  node leads already (itself)   --                           OK at once
 *             a voter                       raft_transfer                once a leader is
 *                                                                        known: OK if it is
 *                                                                        node, else UNAVAILABLE
 *
 * Raft allows one configuration change at a time (membershipCan-
 * ChangeConfiguration: RAFT_CANTCHANGE while an entry is uncommitted or a
 * promotion catches up) and one leadership transfer.  A second change
 * asked while one is in flight here, or while raft refuses, is answered
 * SHOAL_E_UNAVAILABLE with the reason: retryable, nothing changed.
 *
 * Everything runs on the loop: the server queues the waiter (kind MEMBER,
 * node_group_submit), node_group_flush hands it to node_member_start, and
 * raft's change / transfer callbacks (or node_member_publish, which
 * watches a transfer's outcome) complete it.  A waiter is completed exactly
 * once: g->member_w is cleared before it is.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "node/group_int.h"

/* How long a TRANSFER waits, after raft handed leadership over, to learn
 * who leads now. */
#define MEMBER_TRANSFER_WAIT_MS 3000

static const char *action_name(int a)
{
	switch (a) {
	case SHOAL__MEMBER_CHANGE__ACTION__ADD:
		return "add";
	case SHOAL__MEMBER_CHANGE__ACTION__PROMOTE:
		return "promote";
	case SHOAL__MEMBER_CHANGE__ACTION__REMOVE:
		return "remove";
	case SHOAL__MEMBER_CHANGE__ACTION__TRANSFER:
		return "transfer";
	default:
		return "none";
	}
}

/* Completes the change in progress (clears g->member_w first). */
static void member_done(node_group *g, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void member_done(node_group *g, int code, const char *fmt, ...)
{
	node_waiter *w = g->member_w;
	char msg[SH_ERRMSG_SIZE] = "";
	if (w == NULL)
		return;
	g->member_w = NULL;
	g->member_add_assign = false;
	g->member_transfer_wait = false;
	if (fmt != NULL) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
	}
	node_logf(code == SHOAL_OK ? NODE_LOG_INFO : NODE_LOG_WARN,
	          "group %u: membership %s of node %u: %s%s%s", g->id,
	          action_name(w->member_action), w->member_node,
	          code == SHOAL_OK ? "done" : shoal_err_name(code), msg[0] != '\0' ? ": " : "",
	          msg);
	node_group_finish(g, w, code, code == SHOAL_E_NOT_LEADER ? node_group_current_leader(g) : 0,
	                  msg, NULL, 0);
}

/* A raft error code from starting a change, as ours. */
static int change_refused(node_group *g, int rv, const char *what)
{
	int code = rv == RAFT_NOTLEADER          ? SHOAL_E_NOT_LEADER
	           : rv == RAFT_NOMEM            ? SHOAL_E_NOMEM
	           : rv == RAFT_BADID            ? SHOAL_E_VALIDATION
	           : rv == RAFT_DUPLICATEID      ? SHOAL_E_VALIDATION
	           : rv == RAFT_DUPLICATEADDRESS ? SHOAL_E_VALIDATION
	                                         : SHOAL_E_UNAVAILABLE;
	const char *m = raft_errmsg(&g->raft);
	member_done(g, code, "%s: %s%s%s", what, raft_strerror(rv),
	            m != NULL && m[0] != '\0' ? ": " : "", m != NULL ? m : "");
	return code;
}

static const struct raft_server *find(node_group *g, uint32_t id)
{
	struct raft *r = &g->raft;
	for (unsigned i = 0; i < r->configuration.n; i++)
		if (r->configuration.servers[i].id == id)
			return &r->configuration.servers[i];
	return NULL;
}

static void change_cb(struct raft_change *req, int status);

static void assign_standby(node_group *g)
{
	g->member_add_assign = false;
	g->change.data = g;
	int rv =
	    raft_assign(&g->raft, &g->change, g->member_w->member_node, RAFT_STANDBY, change_cb);
	if (rv != 0)
		change_refused(g, rv, "raft_assign(standby)");
}

/* raft's change callback: the configuration entry committed (status 0),
 * or the change failed (leadership lost, a promotion that could not catch
 * up: RAFT_NOCONNECTION, the group closing). */
static void change_cb(struct raft_change *req, int status)
{
	node_group *g = req->data;
	if (g->member_w == NULL)
		return;
	if (status != 0) {
		member_done(g, SHOAL_E_UNAVAILABLE,
		            "%s (the change may or may not have landed; "
		            "asking again is safe)",
		            raft_strerror(status));
		return;
	}
	if (g->member_add_assign) {
		/* raft_add committed the node as a spare: now a standby, so
		 * that it receives the log (raft 0.15 replicates to standbys
		 * and voters only). */
		assign_standby(g);
		return;
	}
	member_done(g, SHOAL_OK, NULL);
}

static void transfer_cb(struct raft_transfer *req)
{
	node_group *g = req->data;
	if (g->member_w == NULL ||
	    g->member_w->member_action != SHOAL__MEMBER_CHANGE__ACTION__TRANSFER)
		return;
	if (raft_state(&g->raft) == RAFT_LEADER) {
		member_done(g, SHOAL_E_UNAVAILABLE, "node %u did not take the leadership in time",
		            g->member_w->member_node);
		return;
	}
	/* This replica stepped down; who won is known once its first
	 * AppendEntries arrives (node_member_publish). */
	g->member_transfer_wait = true;
	g->member_deadline_ns = node_now_ns() + (uint64_t)MEMBER_TRANSFER_WAIT_MS * 1000000u;
}

void node_member_publish(node_group *g)
{
	if (g->member_w == NULL || !g->member_transfer_wait)
		return;
	uint32_t target = g->member_w->member_node;
	uint32_t leader = node_group_current_leader(g);
	if (leader == target)
		member_done(g, SHOAL_OK, NULL);
	else if (leader != 0)
		member_done(g, SHOAL_E_UNAVAILABLE, "node %u leads group %u, not node %u", leader,
		            g->id, target);
	else if (node_now_ns() > g->member_deadline_ns)
		member_done(g, SHOAL_E_UNAVAILABLE, "no leader known after the transfer to node %u",
		            target);
}

void node_member_start(node_group *g, node_waiter *w)
{
	struct raft *r = &g->raft;
	char msg[SH_ERRMSG_SIZE];
	if (g->member_w != NULL) {
		snprintf(msg, sizeof(msg),
		         "group %u: a membership change (%s of node %u) is in progress; try again",
		         g->id, action_name(g->member_w->member_action), g->member_w->member_node);
		node_group_finish(g, w, SHOAL_E_UNAVAILABLE, 0, msg, NULL, 0);
		return;
	}
	g->member_w = w;
	if (raft_state(r) != RAFT_LEADER) {
		member_done(g, SHOAL_E_NOT_LEADER, "node %u is not the leader of group %u",
		            g->node->id, g->id);
		return;
	}
	uint32_t id = w->member_node;
	const struct raft_server *sv = find(g, id);
	g->change.data = g;
	int rv;
	switch (w->member_action) {
	case SHOAL__MEMBER_CHANGE__ACTION__ADD: {
		if (sv != NULL && (sv->role == RAFT_VOTER || sv->role == RAFT_STANDBY)) {
			member_done(g, SHOAL_OK, NULL);
			return;
		}
		if (sv != NULL) { /* a spare: left half-added */
			assign_standby(g);
			return;
		}
		char address[SH_ADDR_MAX];
		if (w->member_address[0] != '\0')
			snprintf(address, sizeof(address), "%s", w->member_address);
		else if (!sh_place_raft_address(g->node->place, id, g->id, address)) {
			member_done(g, SHOAL_E_VALIDATION,
			            "node %u is not in this node's cluster map and the request "
			            "names no address",
			            id);
			return;
		}
		g->member_add_assign = true;
		rv = raft_add(r, &g->change, id, address, change_cb);
		if (rv != 0)
			change_refused(g, rv, "raft_add");
		else
			node_logf(NODE_LOG_INFO, "group %u: adding node %u (%s) as a standby",
			          g->id, id, address);
		return;
	}
	case SHOAL__MEMBER_CHANGE__ACTION__PROMOTE:
		if (sv == NULL) {
			member_done(g, SHOAL_E_NOT_FOUND,
			            "node %u is not in group %u's configuration (ADD it first)", id,
			            g->id);
			return;
		}
		if (sv->role == RAFT_VOTER) {
			member_done(g, SHOAL_OK, NULL);
			return;
		}
		rv = raft_assign(r, &g->change, id, RAFT_VOTER, change_cb);
		if (rv != 0)
			change_refused(g, rv, "raft_assign(voter)");
		else
			node_logf(NODE_LOG_INFO, "group %u: promoting node %u to voter", g->id, id);
		return;
	case SHOAL__MEMBER_CHANGE__ACTION__REMOVE:
		if (sv == NULL) {
			member_done(g, SHOAL_OK, NULL);
			return;
		}
		rv = raft_remove(r, &g->change, id, change_cb);
		if (rv != 0)
			change_refused(g, rv, "raft_remove");
		else
			node_logf(NODE_LOG_INFO, "group %u: removing node %u", g->id, id);
		return;
	case SHOAL__MEMBER_CHANGE__ACTION__TRANSFER:
		if (id == g->node->id) {
			member_done(g, SHOAL_OK, NULL);
			return;
		}
		if (sv == NULL || sv->role != RAFT_VOTER) {
			member_done(g, SHOAL_E_VALIDATION,
			            "node %u is not a voter of group %u: it cannot lead", id,
			            g->id);
			return;
		}
		if (r->transfer != NULL) {
			member_done(g, SHOAL_E_UNAVAILABLE,
			            "group %u: a leadership transfer is in progress; try again",
			            g->id);
			return;
		}
		g->mtransfer.data = g;
		rv = raft_transfer(r, &g->mtransfer, id, transfer_cb);
		if (rv != 0)
			change_refused(g, rv, "raft_transfer");
		else
			node_logf(NODE_LOG_INFO, "group %u: handing leadership to node %u", g->id,
			          id);
		return;
	default:
		member_done(g, SHOAL_E_VALIDATION, "member_change without an action");
		return;
	}
}
