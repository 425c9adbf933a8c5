/*
 * wire_frame.c -- safe unpacking and packing of Shoal's protobuf messages,
 * protobuf-c allocators, Status <-> code, operation names.
 *
 * Why a pre-walk: protobuf-c's unpacker recurses once per nested message
 * with no depth limit, so a hostile message nesting ListValue in
 * AttributeValue 100000 times (a few hundred kilobytes) overflows the stack
 * before any converter runs.  wire_check_framing walks the encoded bytes
 * first, following the message descriptors:
 *
 *   message  := { key payload }*
 *   key      := varint: field number << 3 | wire type (field number >= 1)
 *   payload  := varint (type 0, at most 10 bytes)
 *             | 8 bytes (type 1) | 4 bytes (type 5)
 *             | varint length, then that many bytes (type 2)
 *   types 3 and 4 (groups) do not exist in proto3 and are refused, 6 and 7
 *   are invalid.
 *
 * For a known field the wire type must match its declared type (repeated
 * scalars may also be packed, type 2).  A type-2 payload of a message-typed
 * field is walked as that message, one level deeper; other payloads and
 * unknown fields are skipped.  The walk loops over the fields of one message
 * and recurses only per nesting level, at most WIRE_MAX_MSG_DEPTH frames of a
 * few dozen bytes.  Once it passes, protobuf-c's own recursion is bounded by
 * the same depth.
 *
 * protobuf-c reports every failure as NULL; to tell an allocation failure
 * from malformed input, unpacking goes through a thin allocator that records
 * whether an allocation failed.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "proto/wire.h"
#include "proto/wire_api_int.h"

#include "../common/alloc.h"

/* ------------------------------------------------------------------------ */
/* Allocators                                                                */
/* ------------------------------------------------------------------------ */

static void *heap_alloc(void *data, size_t n)
{
	(void)data;
	return sh_malloc(n);
}

static void heap_free(void *data, void *p)
{
	(void)data;
	sh_free(p);
}

static ProtobufCAllocator heap_allocator = {heap_alloc, heap_free, NULL};

ProtobufCAllocator *wire_heap_allocator(void)
{
	return &heap_allocator;
}

static void *arena_alloc(void *data, size_t n)
{
	return sh_arena_alloc(data, n);
}

static void arena_free(void *data, void *p)
{
	(void)data;
	(void)p;
}

void wire_arena_allocator(ProtobufCAllocator *out, sh_arena *a)
{
	out->alloc = arena_alloc;
	out->free = arena_free;
	out->allocator_data = a;
}

/* Wraps another allocator and remembers whether an allocation failed. */
typedef struct tracking_alloc {
	ProtobufCAllocator self;
	ProtobufCAllocator *inner;
	bool failed;
} tracking_alloc;

static void *tracking_alloc_fn(void *data, size_t n)
{
	tracking_alloc *t = data;
	void *p = t->inner->alloc(t->inner->allocator_data, n);
	if (p == NULL)
		t->failed = true;
	return p;
}

static void tracking_free_fn(void *data, void *p)
{
	tracking_alloc *t = data;
	t->inner->free(t->inner->allocator_data, p);
}

/* ------------------------------------------------------------------------ */
/* Framing                                                                   */
/* ------------------------------------------------------------------------ */

#define WT_VARINT      0
#define WT_FIXED64     1
#define WT_LEN         2
#define WT_GROUP_START 3
#define WT_GROUP_END   4
#define WT_FIXED32     5

typedef struct walker {
	const uint8_t *buf; /* start of the whole buffer, for offsets in messages */
	char *errmsg;
} walker;

/* Reads a varint at *p (< end). 0 on success. */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	uint64_t v = 0;
	for (int i = 0; i < 10; i++) {
		if (*p >= end)
			return -1;
		uint8_t b = *(*p)++;
		if (i == 9 && b > 1)
			return -1; /* more than 64 bits */
		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if ((b & 0x80) == 0) {
			*out = v;
			return 0;
		}
	}
	return -1;
}

/* The wire type a field's declared type is encoded with. */
static unsigned expected_wire_type(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return WT_FIXED64;
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
		return WT_FIXED32;
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_BYTES:
	case PROTOBUF_C_TYPE_MESSAGE:
		return WT_LEN;
	default:
		return WT_VARINT; /* int32, sint32, uint32, int64, ..., bool, enum */
	}
}

static int walk(walker *w, const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                const uint8_t *end, int depth)
{
	if (depth > WIRE_MAX_MSG_DEPTH)
		return sh_errf(w->errmsg, SHOAL_E_SERIALIZATION,
		               "malformed message: byte %td: messages nested deeper than %d levels",
		               p - w->buf, WIRE_MAX_MSG_DEPTH);
	while (p < end) {
		const uint8_t *at = p;
		uint64_t key;
		if (read_varint(&p, end, &key) != 0)
			return sh_errf(
			    w->errmsg, SHOAL_E_SERIALIZATION,
			    "malformed message: byte %td: truncated or overlong field key",
			    at - w->buf);
		unsigned wt = (unsigned)(key & 7);
		uint64_t num = key >> 3;
		if (num == 0 || num > 0x1fffffff)
			return sh_errf(w->errmsg, SHOAL_E_SERIALIZATION,
			               "malformed message: byte %td: invalid field number %" PRIu64,
			               at - w->buf, num);
		if (wt == WT_GROUP_START || wt == WT_GROUP_END)
			return sh_errf(w->errmsg, SHOAL_E_SERIALIZATION,
			               "malformed message: byte %td: groups are not supported",
			               at - w->buf);
		if (wt != WT_VARINT && wt != WT_FIXED64 && wt != WT_LEN && wt != WT_FIXED32)
			return sh_errf(w->errmsg, SHOAL_E_SERIALIZATION,
			               "malformed message: byte %td: invalid wire type %u",
			               at - w->buf, wt);
		const ProtobufCFieldDescriptor *fd =
		    protobuf_c_message_descriptor_get_field(desc, (unsigned)num);
		if (fd != NULL) {
			unsigned want = expected_wire_type(fd->type);
			bool packed_ok = fd->label == PROTOBUF_C_LABEL_REPEATED && wt == WT_LEN &&
			                 want != WT_LEN;
			if (wt != want && !packed_ok)
				return sh_errf(
				    w->errmsg, SHOAL_E_SERIALIZATION,
				    "malformed message: byte %td: field %s.%s has wire type "
				    "%u, expected %u",
				    at - w->buf, desc->name, fd->name, wt, want);
		}
		uint64_t v;
		switch (wt) {
		case WT_VARINT:
			if (read_varint(&p, end, &v) != 0)
				return sh_errf(w->errmsg, SHOAL_E_SERIALIZATION,
				               "malformed message: byte %td: truncated or overlong "
				               "varint",
				               at - w->buf);
			break;
		case WT_FIXED64:
		case WT_FIXED32: {
			size_t need = wt == WT_FIXED64 ? 8 : 4;
			if ((size_t)(end - p) < need)
				return sh_errf(w->errmsg, SHOAL_E_SERIALIZATION,
				               "malformed message: byte %td: truncated fixed-size "
				               "field",
				               at - w->buf);
			p += need;
			break;
		}
		case WT_LEN:
			if (read_varint(&p, end, &v) != 0 || v > (uint64_t)(end - p))
				return sh_errf(
				    w->errmsg, SHOAL_E_SERIALIZATION,
				    "malformed message: byte %td: length runs past the end "
				    "of the message",
				    at - w->buf);
			if (fd != NULL && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
				int rc = walk(w, fd->descriptor, p, p + v, depth + 1);
				if (rc != SHOAL_OK)
					return rc;
			}
			p += v;
			break;
		default:
			break; /* refused above */
		}
	}
	return SHOAL_OK;
}

int wire_check_framing(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                       char *errmsg)
{
	if (buf == NULL && len > 0)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION, "malformed message: no buffer");
	static const uint8_t empty[1];
	if (buf == NULL)
		buf = empty;
	walker w = {buf, errmsg};
	return walk(&w, desc, buf, buf + len, 1);
}

int wire_unpack(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                const uint8_t *buf, size_t len, ProtobufCMessage **out, char *errmsg)
{
	*out = NULL;
	int rc = wire_check_framing(desc, buf, len, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	tracking_alloc t = {{tracking_alloc_fn, tracking_free_fn, NULL},
	                    alloc != NULL ? alloc : &heap_allocator,
	                    false};
	t.self.allocator_data = &t;
	static const uint8_t empty[1];
	ProtobufCMessage *m = protobuf_c_message_unpack(desc, &t.self, len, buf ? buf : empty);
	if (m == NULL) {
		if (t.failed)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory unpacking a %s",
			               desc->name);
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION, "malformed message: invalid %s",
		               desc->name);
	}
	*out = m;
	return SHOAL_OK;
}

int wire_unpack_request(ProtobufCAllocator *alloc, const uint8_t *buf, size_t len,
                        Shoal__Request **out, char *errmsg)
{
	ProtobufCMessage *m;
	int rc = wire_unpack(&shoal__request__descriptor, alloc, buf, len, &m, errmsg);
	*out = (Shoal__Request *)m;
	return rc;
}

void wire_free_request(ProtobufCAllocator *alloc, Shoal__Request *req)
{
	if (req != NULL)
		shoal__request__free_unpacked(req, alloc != NULL ? alloc : &heap_allocator);
}

int wire_unpack_response(ProtobufCAllocator *alloc, const uint8_t *buf, size_t len,
                         Shoal__Response **out, char *errmsg)
{
	ProtobufCMessage *m;
	int rc = wire_unpack(&shoal__response__descriptor, alloc, buf, len, &m, errmsg);
	*out = (Shoal__Response *)m;
	return rc;
}

void wire_free_response(ProtobufCAllocator *alloc, Shoal__Response *resp)
{
	if (resp != NULL)
		shoal__response__free_unpacked(resp, alloc != NULL ? alloc : &heap_allocator);
}

int wire_pack(sh_arena *a, const ProtobufCMessage *msg, uint8_t **buf, size_t *len, char *errmsg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t *b = sh_arena_alloc(a, n);
	if (b == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory packing a %s (%zu bytes)",
		               msg->descriptor->name, n);
	size_t done = protobuf_c_message_pack(msg, b);
	assert(done == n);
	*buf = b;
	*len = done;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Small tables                                                              */
/* ------------------------------------------------------------------------ */

unsigned wire_field_id(const ProtobufCMessageDescriptor *desc, const char *name)
{
	const ProtobufCFieldDescriptor *fd =
	    protobuf_c_message_descriptor_get_field_by_name(desc, name);
	assert(fd != NULL);
	return fd != NULL ? fd->id : 0;
}

Shoal__Status wire_status_from_code(int code)
{
	if (code < 0 || code >= SHOAL_E__COUNT)
		return SHOAL__STATUS__STATUS_INTERNAL;
	return (Shoal__Status)code;
}

int wire_code_from_status(int status)
{
	if (status < 0 || status >= SHOAL_E__COUNT)
		return SHOAL_E_INTERNAL;
	return status;
}

/* ------------------------------------------------------------------------ */
/* Fields by hand                                                            */
/* ------------------------------------------------------------------------ */

bool wire_next_field(const uint8_t **p, const uint8_t *end, wire_field *f)
{
	uint64_t tag, v;
	if (read_varint(p, end, &tag) != 0 || tag >> 3 == 0 || tag >> 3 > UINT32_MAX)
		return false;
	f->number = (uint32_t)(tag >> 3);
	f->type = (int)(tag & 7);
	switch (f->type) {
	case WT_VARINT:
		return read_varint(p, end, &f->value) == 0;
	case WT_FIXED64:
	case WT_FIXED32: {
		size_t n = f->type == WT_FIXED64 ? 8 : 4;
		if ((size_t)(end - *p) < n)
			return false;
		*p += n;
		return true;
	}
	case WT_LEN:
		if (read_varint(p, end, &v) != 0 || v > (uint64_t)(end - *p))
			return false;
		f->data = *p;
		f->len = (size_t)v;
		*p += v;
		return true;
	default:
		return false;
	}
}

size_t wire_put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

size_t wire_varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}
