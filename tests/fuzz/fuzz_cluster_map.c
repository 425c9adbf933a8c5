/*
 * fuzz_cluster_map -- the cluster map's decoder (common/cluster_map_codec.c,
 * sh_map_decode): the bytes group 0 will replicate as Raft entries and
 * snapshots, and that routers and nodes will receive, so they are read as
 * hostile.
 *
 * What decodes must be what the header promises: a map whose invariants
 * hold (sh_map_check), whose encoding is exactly the input (the format is
 * canonical), and whose lookups answer inside it: every partition's range
 * routes to its group.  A refusal is SerializationException with a message,
 * and leaves an empty map.
 *
 * Input: an encoded map.  Seeds: tests/fuzz/corpus/cluster_map/ (maps of a
 * cluster file with tables, splits, a pending move, a non-voter, a draining
 * node; tests/fuzz/seeds.c).
 */
#include <string.h>

#include "common/alloc.h"
#include "common/cluster_map.h"
#include "tests/fuzz/harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char m[SH_ERRMSG_SIZE] = "";
	sh_map map;
	int rc = sh_map_decode(data, size, &map, m);
	if (rc != SHOAL_OK) {
		FZ_ASSERT(rc == SHOAL_E_SERIALIZATION, "sh_map_decode: %s: %s", shoal_err_name(rc),
		          m);
		FZ_ASSERT(m[0] != '\0', "sh_map_decode: refused without a message");
		FZ_ASSERT(map.n_nodes == 0 && map.n_groups == 0 && map.n_parts == 0,
		          "a refused map is not empty");
		sh_map_fini(&map);
		return 0;
	}
	FZ_ASSERT(sh_map_check(&map, m), "a decoded map breaks an invariant: %s", m);
	size_t len = sh_map_encoded_size(&map);
	FZ_ASSERT(len == size, "a decoded map encodes to %zu bytes, was %zu", len, size);
	uint8_t *buf = sh_malloc(len ? len : 1);
	FZ_ASSERT(buf != NULL, "out of memory");
	FZ_ASSERT(sh_map_encode(&map, buf) == len && memcmp(buf, data, len) == 0,
	          "a decoded map encodes to other bytes");
	sh_free(buf);
	for (uint32_t i = 0; i < map.n_parts; i++) {
		const sh_map_part *p = &map.parts[i];
		uint64_t hi = sh_map_part_hi(&map, i);
		FZ_ASSERT(hi >= p->lo, "partition %u ends before it starts", i);
		FZ_ASSERT(sh_map_route(&map, p->table, p->lo) == p->group &&
		              sh_map_route(&map, p->table, hi) == p->group,
		          "partition %u does not route to its group", i);
		FZ_ASSERT(sh_map_group_get(&map, p->group) != NULL, "partition %u: no group", i);
	}
	sh_map_fini(&map);
	return 0;
}
