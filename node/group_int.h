/*
 * group_int.h -- the Raft group's internals, shared by node/group.c (its
 * lifecycle, group commit, status) and node/member.c (membership changes).
 * node.h has the contract.  Loop thread unless a field says otherwise.
 */
#ifndef SHOAL_NODE_GROUP_INT_H
#define SHOAL_NODE_GROUP_INT_H

#include "node/node.h"

typedef enum group_state {
	GROUP_INIT,
	GROUP_RUNNING,
	GROUP_CLOSING,
	GROUP_CLOSED,
} group_state;

struct node_group {
	node *node;
	uint32_t id;
	char dir[SH_PATH_MAX];
	char address[SH_ADDR_MAX];

	/* Loop thread. */
	group_state state;
	struct raft raft;
	struct raft_io io;  /* raft_uv's */
	node_raftio raftio; /* in front of it, given to raft */
	struct raft_uv_transport transport;
	bool io_init, transport_init;
	node_fsm *fsm;
	void (*close_cb)(node_group *g);
	struct raft_transfer transfer;
	bool transferring;
	uint32_t preferred;         /* the replica that should lead (the map's first voter) */
	uint64_t leading_since_ns;  /* when this replica became leader (0: it is not) */
	uint64_t next_rebalance_ns; /* no handing back to the preferred replica before */
	uint32_t rebalance_wait_ms; /* wait after the next try (doubles) */
	size_t tuned_for;           /* entry size the snapshot counts were set for */
	size_t tuned_budget;        /* ... and the in-memory log's budget */
	int seen_role;
	uint64_t seen_term;
	uint32_t seen_leader;
	bool seen_prevote;
	bool seen_failed;
	uint32_t inflight; /* Commands proposed, apply_cb not yet called;
	                    * written on the loop under mu, read under mu */
	bool flush_due;    /* a slot freed: flush at the next publish */
	uint32_t barriers; /* barriers issued, barrier_cb not yet called */
	bool bootstrap;    /* node_group_open_ex: raft_bootstrap allowed */

	/* Membership changes (member.c): at most one at a time. */
	node_waiter *member_w; /* the change in progress, or NULL */
	struct raft_change change;
	struct raft_transfer mtransfer;
	bool member_add_assign;    /* ADD: raft_add done, raft_assign(STANDBY) next */
	bool member_transfer_wait; /* TRANSFER: raft stepped down, wait for a leader */
	uint64_t member_deadline_ns;

	/* Who holds the struct (node_group_acquire) and when raft closed. */
	atomic_uint users;
	uint64_t closed_ns;

	/* The leader's Raft configuration and progress as of the last publish
	 * (node_group_members); members_n 0 when not leading.  members_mu. */
	pthread_mutex_t members_mu;
	uint32_t members_n;
	struct group_member {
		uint32_t id;
		int role;
		uint64_t match;
		char address[SH_ADDR_MAX];
	} members[SH_MAP_GROUP_REPLICAS + 4];
	uint64_t members_last_index;
	uint64_t members_cfg_index; /* the configuration the addresses are of */

	/* Queues (mu). */
	pthread_mutex_t mu;
	bool closing;
	node_waiter *wq_head, *wq_tail; /* writes */
	node_waiter *bq_head, *bq_tail; /* barrier waits */
	node_waiter *mq_head, *mq_tail; /* membership changes */

	/* Published status: written on the loop, read anywhere. */
	atomic_int role;
	_Atomic uint64_t term, commit, applied;
	atomic_uint leader;
	atomic_uint_fast64_t pending;
	_Atomic uint64_t snapshot_index, entry_bytes;
	atomic_uint snapshot_threshold;
	atomic_bool failed;
	/* Its storage was emptied at open (a machine crash, a rebuild asked
	 * for): set until it has caught up with a leader (publish). */
	atomic_bool rebuilding;
	atomic_int failed_code; /* node_fsm_failed's code once failed */
	pthread_mutex_t err_mu;
	char error[SH_ERRMSG_SIZE];
};

/* group.c: completes a waiter (loop); the chain form completes each. */
void node_group_finish(node_group *g, node_waiter *w, int code, uint32_t leader, const char *msg,
                       uint8_t *resp, size_t resp_len);
/* The leader this replica believes in (0: unknown).  Loop. */
uint32_t node_group_current_leader(node_group *g);

#endif
