/*
 * tl_wire.h -- hand-encoded protobuf for the wire tests: messages the
 * converters would never build (nested past every limit), written byte by
 * byte.
 */
#ifndef SHOAL_TL_WIRE_H
#define SHOAL_TL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"

/*
 * A packed Request: a PutItem of table "tbl" whose one attribute "a" holds
 * {NULL: true} nested `depth` times, as L (AttributeValue.l > ListValue.values:
 * message depth 5 + 2 * depth) or, when map, as M (AttributeValue.m >
 * MapValue.attrs > Attribute "k" > Attribute.value).  Built back to front in
 * arena a; *len bytes.
 */
const uint8_t *tl_nested_put(sh_arena *a, bool map, size_t depth, size_t *len);

#endif
