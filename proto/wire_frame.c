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
 * Why a budget: protobuf-c allocates a record for every field it keeps -- a
 * struct per message, a slot per repeated element, a 24-byte record plus a
 * copy per unknown field, and 32 bytes of bookkeeping per field once a
 * message has more than 16 -- so a 16 MiB message of two-byte unknown fields
 * cost 540 MB.  Decoding a message of n bytes may take at most
 * wire_decode_budget(n) bytes, checked twice:
 *   - the walk adds up a lower bound of what protobuf-c will allocate (the
 *     records above, each rounded to 16 as the arena rounds) and refuses
 *     before anything is allocated;
 *   - unpacking goes through a thin allocator that counts what is handed
 *     out (rounded the same way) and fails the allocation that would pass
 *     the budget, so protobuf-c returns NULL cleanly.
 * The walk's figure is a lower bound of the allocator's, so the two never
 * disagree about a message the walk lets through; the allocator is the
 * exact rule, the walk the cheap early refusal.
 *
 * protobuf-c reports every failure as NULL; to tell an allocation failure
 * from malformed input or from the budget, the same allocator records which
 * happened.
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

/* What an allocation of n bytes is counted as: the arena's rounding (malloc's
 * own overhead is about the same). */
static size_t charge(size_t n)
{
	return n > SIZE_MAX - 15 ? SIZE_MAX : (n + 15) & ~(size_t)15;
}

size_t wire_decode_budget(size_t len)
{
	if (len > (SIZE_MAX - WIRE_DECODE_SLACK) / WIRE_DECODE_PER_BYTE)
		return SIZE_MAX;
	return len * WIRE_DECODE_PER_BYTE + WIRE_DECODE_SLACK;
}

/* Wraps another allocator: counts what it hands out against a budget, and
 * remembers whether an allocation failed or the budget was spent. */
typedef struct tracking_alloc {
	ProtobufCAllocator self;
	ProtobufCAllocator *inner;
	size_t used, budget;
	bool failed, over;
} tracking_alloc;

static void *tracking_alloc_fn(void *data, size_t n)
{
	tracking_alloc *t = data;
	size_t c = charge(n);
	if (c > t->budget - t->used) {
		t->over = true;
		return NULL;
	}
	void *p = t->inner->alloc(t->inner->allocator_data, n);
	if (p == NULL)
		t->failed = true;
	else
		t->used += c;
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
	size_t cost;   /* lower bound of what protobuf-c will allocate, so far */
	size_t budget; /* wire_decode_budget of the whole buffer */
} walker;

/* protobuf-c's bookkeeping (protobuf-c.c, 1.4): a ScannedMember of 32 bytes
 * per field of a message beyond the first 16 (those are on its stack), and a
 * ProtobufCMessageUnknownField per unknown field. */
#define PBC_SCANNED_MEMBER 32
#define PBC_FIRST_SLAB     16
#define PBC_UNKNOWN_RECORD sizeof(ProtobufCMessageUnknownField)

/* walk's result when the cost passes the budget (the message is written by
 * wire_check_framing, which knows the whole length). */
#define WALK_OVER_BUDGET (-1)

/* The slot a repeated element of type t takes in its array (at least). */
static size_t slot_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	default:
		return 4;
	}
}

/* Adds c to the walk's cost; false once it passes the budget. */
static bool spend(walker *w, size_t c)
{
	w->cost = c > SIZE_MAX - w->cost ? SIZE_MAX : w->cost + c;
	return w->cost <= w->budget;
}

static int too_complex(char *errmsg, const ProtobufCMessageDescriptor *desc, size_t len)
{
	return sh_errf(errmsg, SHOAL_E_VALIDATION,
	               "The %s is too complex for its size: its %zu bytes would decode to more "
	               "than %zu bytes (at most %u per byte plus %u KiB)",
	               desc->short_name, len, wire_decode_budget(len), WIRE_DECODE_PER_BYTE,
	               WIRE_DECODE_SLACK / 1024);
}

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
	size_t n_fields = 0;
	if (!spend(w, charge(desc->sizeof_message)))
		return WALK_OVER_BUDGET;
	while (p < end) {
		if (++n_fields > PBC_FIRST_SLAB && !spend(w, PBC_SCANNED_MEMBER))
			return WALK_OVER_BUDGET;
		const uint8_t *at = p;
		uint64_t key;
		if (read_varint(&p, end, &key) != 0)
			return sh_errf(
			    w->errmsg, SHOAL_E_SERIALIZATION,
			    "malformed message: byte %td: truncated or overlong field key",
			    at - w->buf);
		const uint8_t *payload = p; /* what protobuf-c copies of an unknown field */
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
			} else if (fd != NULL && fd->type == PROTOBUF_C_TYPE_STRING) {
				/* protobuf-c hands strings over NUL-terminated: one
				 * inside would silently cut the name (a TableName
				 * "T\0x" read as "T", the signed bytes meaning
				 * another thing).  Values are bytes, not strings. */
				if (v > 0 && memchr(p, '\0', v) != NULL)
					return sh_errf(
					    w->errmsg, SHOAL_E_SERIALIZATION,
					    "malformed message: byte %td: string field %s "
					    "holds a NUL byte",
					    at - w->buf, fd->name);
				if (!spend(w, charge(v + 1)))
					return WALK_OVER_BUDGET;
			} else if (fd != NULL && fd->type == PROTOBUF_C_TYPE_BYTES) {
				if (v > 0 && !spend(w, charge(v)))
					return WALK_OVER_BUDGET;
			}
			p += v;
			break;
		default:
			break; /* refused above */
		}
		/* What protobuf-c keeps of the field besides its payload. */
		size_t keep = 0;
		if (fd == NULL)
			keep = PBC_UNKNOWN_RECORD + charge((size_t)(p - payload));
		else if (fd->label == PROTOBUF_C_LABEL_REPEATED)
			keep = slot_size(fd->type);
		if (keep > 0 && !spend(w, keep))
			return WALK_OVER_BUDGET;
	}
	return SHOAL_OK;
}

/* wire_check_framing with a budget of `budget` bytes. */
static int check(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                 size_t budget, char *errmsg)
{
	if (buf == NULL && len > 0)
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION, "malformed message: no buffer");
	static const uint8_t empty[1];
	if (buf == NULL)
		buf = empty;
	walker w = {buf, errmsg, 0, budget};
	int rc = walk(&w, desc, buf, buf + len, 1);
	if (rc == WALK_OVER_BUDGET)
		rc = too_complex(errmsg, desc, len);
	return rc;
}

int wire_check_framing(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                       char *errmsg)
{
	return check(desc, buf, len, wire_decode_budget(len), errmsg);
}

static int unpack(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                  const uint8_t *buf, size_t len, size_t budget, ProtobufCMessage **out,
                  char *errmsg)
{
	*out = NULL;
	int rc = check(desc, buf, len, budget, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	tracking_alloc t = {{tracking_alloc_fn, tracking_free_fn, NULL},
	                    alloc != NULL ? alloc : &heap_allocator,
	                    0,
	                    budget,
	                    false,
	                    false};
	t.self.allocator_data = &t;
	static const uint8_t empty[1];
	ProtobufCMessage *m = protobuf_c_message_unpack(desc, &t.self, len, buf ? buf : empty);
	if (m == NULL) {
		if (t.over)
			return too_complex(errmsg, desc, len);
		if (t.failed)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory unpacking a %s",
			               desc->name);
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION, "malformed message: invalid %s",
		               desc->name);
	}
	*out = m;
	return SHOAL_OK;
}

int wire_unpack(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                const uint8_t *buf, size_t len, ProtobufCMessage **out, char *errmsg)
{
	return unpack(desc, alloc, buf, len, wire_decode_budget(len), out, errmsg);
}

int wire_unpack_local(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                      const uint8_t *buf, size_t len, ProtobufCMessage **out, char *errmsg)
{
	return unpack(desc, alloc, buf, len, SIZE_MAX, out, errmsg);
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

int wire_unpack_node_request(ProtobufCAllocator *alloc, const uint8_t *buf, size_t len,
                             Shoal__NodeRequest **out, char *errmsg)
{
	ProtobufCMessage *m;
	int rc = wire_unpack(&shoal__node_request__descriptor, alloc, buf, len, &m, errmsg);
	*out = (Shoal__NodeRequest *)m;
	return rc;
}

int wire_unpack_node_response(ProtobufCAllocator *alloc, const uint8_t *buf, size_t len,
                              Shoal__NodeResponse **out, char *errmsg)
{
	ProtobufCMessage *m;
	int rc = wire_unpack(&shoal__node_response__descriptor, alloc, buf, len, &m, errmsg);
	*out = (Shoal__NodeResponse *)m;
	return rc;
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
