/*
 * fuzz_codec -- the storage engine's item format (storage/codec.c,
 * st_codec_decode), a decoder that also takes bytes from the network: an
 * index_ship message carries encoded index entries (IndexDelta.value) that
 * the target group stores and later decodes (storage/index_entry.c,
 * outbox.c), and a corrupted LMDB page must give "corrupt item", not a
 * crash (codec.c: "the decoder trusts nothing").
 *
 * What decodes must be what the header promises, a valid normalised item:
 * normalising it changes nothing, and it encodes and decodes back to itself.
 * (Not to the same bytes: the decoder accepts overlong varints -- 80 00 for
 * a count of 0 -- which the encoder never writes; harmless, as every
 * replica encodes its own items, but an item has more than one encoding.)
 *
 * Input: the encoded value.  Seeds: tests/fuzz/corpus/codec/ (the seeds'
 * PutItem items, encoded).
 */
#include <string.h>

#include "storage/codec.h"
#include "tests/fuzz/harness.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sh_arena *a = fz_arena();
	char m[SH_ERRMSG_SIZE] = "";
	st_value item;
	int rc = st_codec_decode(a, data, size, &item, m);
	if (rc != SHOAL_OK) {
		FZ_ASSERT(rc == SHOAL_E_INTERNAL || rc == SHOAL_E_NOMEM, "st_codec_decode: %s: %s",
		          shoal_err_name(rc), m);
		FZ_ASSERT(m[0] != '\0', "st_codec_decode: refused without a message");
		fz_reset();
		return 0;
	}
	FZ_ASSERT(item.type == ST_M, "decoded a value of type %d", (int)item.type);
	st_value again = item;
	rc = st_value_normalize(a, &again, m);
	FZ_ASSERT(rc == SHOAL_OK, "a decoded item is not valid: %s", m);
	FZ_ASSERT(st_value_equal(&again, &item), "a decoded item was not normalised");
	uint8_t *buf;
	size_t len;
	rc = st_codec_encode(a, &item, &buf, &len);
	FZ_ASSERT(rc == SHOAL_OK, "st_codec_encode of a decoded item: %s", shoal_err_name(rc));
	FZ_ASSERT(len <= size, "a decoded item encodes longer (%zu, was %zu)", len, size);
	st_value back;
	rc = st_codec_decode(a, buf, len, &back, m);
	FZ_ASSERT(rc == SHOAL_OK, "st_codec_decode of st_codec_encode: %s", m);
	FZ_ASSERT(st_value_equal(&back, &item), "an item changed through the codec");
	(void)st_item_size(&item);
	fz_reset();
	return 0;
}
