/*
 * stream_int.h -- internals shared by the stream files (private to
 * storage/): stream.c (the log: append, trim, reads, deleted tables) and
 * stream_shards.c (the shards: hash ranges over spans of the log).  The
 * layout is at the top of stream.h.
 */
#ifndef SHOAL_STORAGE_STREAM_INT_H
#define SHOAL_STORAGE_STREAM_INT_H

#include "engine.h"
#include "stream.h"

#define ST_STREAM_META 0x03
#define KIND_LAST      'N'
#define KIND_TRIMMED   'H'
#define KIND_REC       'R'
#define KIND_FIRST     'F'
#define KIND_DROPPED   'D'
#define KIND_SHARD     'S'

/* 0x03 | kind | table. */
static inline void st_stream_meta_key(uint8_t k[6], char kind, uint32_t table)
{
	k[0] = ST_STREAM_META;
	k[1] = (uint8_t)kind;
	st_put_be32(k + 2, table);
}

/* Gives the table's next seq (last + 1, written back as the last) to no
 * record: a shard's span boundary (stream_shards.c).  Environmental errors
 * only. */
int st_stream_seq_reserve(st_txn *txn, uint32_t table, uint64_t *seq, char *errmsg);

/* st_stream_trim's hook, once something was trimmed: deletes the 'S'
 * records of table's closed shards whose every seq is <= trimmed. */
int st_stream_shards_trimmed(st_txn *txn, uint32_t table, uint64_t trimmed, char *errmsg);

#endif
