/*
 * codec.h -- the LMDB value format of an item (private to storage/).
 * The byte-by-byte format is documented at the top of codec.c.
 */
#ifndef SHOAL_STORAGE_CODEC_H
#define SHOAL_STORAGE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "storage.h"

/* Serialises a normalised item (ST_M) into arena memory. SHOAL_E_NOMEM on failure. */
int st_codec_encode(sh_arena *a, const st_value *item, uint8_t **out, size_t *len);

/* Decodes bytes written by st_codec_encode into *item; every byte of the
 * result is copied into the arena (nothing points into buf).  Corrupt input
 * gives SHOAL_E_INTERNAL ("corrupt item: ..."), never a crash. */
int st_codec_decode(sh_arena *a, const uint8_t *buf, size_t len, st_value *item, char *errmsg);

#endif
