/*
 * disk.c -- a node whose disk filled up heals itself once there is room
 * again (issue 17, "disk full").
 *
 * What a full disk does to a node.  Its LMDB environments preallocate ahead
 * of every write (storage/env.c, "Writable map"): an apply that cannot get
 * its room fails before writing anything, and the group's state machine
 * fails for good (node/fsm.h: a sticky failure, the replica stops serving
 * and hands leadership away, `shoal status` shows the error).  raft_uv, when
 * a segment cannot be written or prepared, marks itself errored and writes
 * nothing more (and node/raftio.c keeps raft 0.15 from hearing of the failed
 * write, which it mishandles).  Neither recovers in place: both stop rather
 * than drift from their peers, which keep the group going if they are a
 * majority.  After an
 * operator freed space, restarting the node was the cure -- the LMDB
 * environment is trusted (same boot, storage/env_trust.c), raft reloads its
 * log, and the replica catches up.
 *
 * This file does that restart itself.  Once a second (node_disk_tick, from
 * the loop's check handle) it looks at the file system of the data
 * directory (statvfs) and at the groups' failures:
 *
 *   state   event                                            next
 *   -----   ----------------------------------------------   -----
 *   OK      free < NODE_DISK_LOW, or a group failed FULL     LOW    (logged)
 *   LOW     free >= NODE_DISK_RECOVER                        -      restart in
 *                                                                   place
 *                                                                   (node_restart)
 *
 * A node that saw its disk full restarts when room came back even if no
 * group failed yet: raft_uv's errored state cannot be seen from outside,
 * and a restart costs a few seconds of one replica.  The recover threshold
 * (64 MiB, or three Raft segments if more: what one group prepares ahead)
 * keeps the restarted node from filling the disk again at once.
 *
 * Loop thread only.
 */
#include <inttypes.h>
#include <sys/statvfs.h>

#include "node/node.h"

#define NODE_DISK_LOW       (4ull << 20)
#define NODE_DISK_RECOVER   (64ull << 20)
#define NODE_DISK_PERIOD_NS 1000000000ull

/* Bytes free for the node in its data directory's file system, or
 * UINT64_MAX if it cannot be told. */
static uint64_t disk_free(const node *n)
{
	struct statvfs sv;
	if (statvfs(n->dir, &sv) != 0)
		return UINT64_MAX;
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* A hosted group's replica failed for want of space (its state machine,
 * or its Raft log: node/raftio.c). */
static bool group_failed_full(node *n)
{
	for (uint32_t g = 0; g < sh_cluster_group_cap(n->conf); g++)
		if (n->groups[g] != NULL && node_group_failure(n->groups[g]) == SHOAL_E_FULL)
			return true;
	return false;
}

void node_disk_tick(node *n)
{
	uint64_t now = node_now_ns();
	if (now < n->disk_next_ns)
		return;
	n->disk_next_ns = now + NODE_DISK_PERIOD_NS;
	uint64_t free_bytes = disk_free(n);
	if (free_bytes == UINT64_MAX)
		return;
	if (!n->disk_low) {
		bool full = group_failed_full(n);
		if (free_bytes >= NODE_DISK_LOW && !full)
			return;
		n->disk_low = true;
		node_logf(NODE_LOG_ERROR,
		          "node %u: disk full in %s (%" PRIu64 " bytes free%s): replicas that "
		          "cannot write stop; the node restarts itself once %llu MiB are free",
		          n->id, n->dir, free_bytes,
		          full ? ", a group failed for want of space" : "",
		          NODE_DISK_RECOVER >> 20);
		return;
	}
	uint64_t per_group = (uint64_t)3 * (n->conf->raft_segment_mb != 0 ? n->conf->raft_segment_mb
	                                                                  : NODE_RAFT_SEGMENT_MB)
	                     << 20;
	uint64_t need = NODE_DISK_RECOVER > per_group ? NODE_DISK_RECOVER : per_group;
	if (free_bytes < need)
		return;
	node_logf(NODE_LOG_WARN,
	          "node %u: %" PRIu64 " bytes free again in %s: restarting in place to recover "
	          "its replicas",
	          n->id, free_bytes, n->dir);
	node_restart(n);
}
