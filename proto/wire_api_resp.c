/*
 * wire_api_resp.c -- shoal.Response <-> DynamoDB response bodies, and error
 * bodies.
 *
 * A successful Response is its result message through the schema walker
 * (the Response `result` member has the Request `op` member's name and
 * number).  A failed one is DynamoDB's error body:
 *
 *   {"__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
 *    "message": "The conditional request failed",
 *    "Item": {...}}                              (ReturnValuesOnConditionCheckFailure)
 *   {"__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
 *    "Message": "Transaction cancelled, ...",
 *    "CancellationReasons": [{"Code": "None"},
 *                            {"Item": {...}, "Code": "ConditionalCheckFailed",
 *                             "Message": "The conditional request failed"}]}
 *
 * The namespace before '#' is DynamoDB's: Coral's own exceptions
 * (ValidationException, SerializationException, UnknownOperationException)
 * live in com.amazon.coral.*, DynamoDB's in com.amazonaws.dynamodb.v20120810;
 * clients (botocore, the SDKs) use only the part after '#'.  So does
 * wire_api_response_from_json.  Error messages that are not UTF-8 (they may
 * quote a client's bytes) are written with each bad byte replaced by '?'
 * rather than failing the whole error body.
 */
#include <string.h>

#include "proto/wire_api_int.h"

#include "../common/alloc.h"

#define NS_DDB "com.amazonaws.dynamodb.v20120810#"

static int nomem(char *errmsg)
{
	return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory writing a JSON response");
}

/* ------------------------------------------------------------------------ */
/* Error bodies                                                              */
/* ------------------------------------------------------------------------ */

static const char *const error_types[] = {
#define TYPE_(name, value, exc, desc) [value] = NS_DDB exc,
    SHOAL_ERRORS(TYPE_)
#undef TYPE_
};

const char *wire_api_error_type(int code)
{
	switch (code) {
	case SHOAL_OK:
		return "";
	case SHOAL_E_VALIDATION:
		return "com.amazon.coral.validate#ValidationException";
	case SHOAL_E_SERIALIZATION:
		return "com.amazon.coral.service#SerializationException";
	case SHOAL_E_UNKNOWN_OPERATION:
		return "com.amazon.coral.service#UnknownOperationException";
	case SHOAL_E_AUTH_MISSING:
		return "com.amazon.coral.service#MissingAuthenticationTokenException";
	case SHOAL_E_AUTH_INCOMPLETE:
		return "com.amazon.coral.service#IncompleteSignatureException";
	case SHOAL_E_AUTH_UNRECOGNIZED:
		return "com.amazon.coral.service#UnrecognizedClientException";
	case SHOAL_E_AUTH_SIGNATURE:
		return "com.amazon.coral.service#InvalidSignatureException";
	default:
		if (code > 0 && code < SHOAL_E__COUNT)
			return error_types[code];
		return NS_DDB "InternalServerError";
	}
}

int wire_api_http_status(int code)
{
	switch (code) {
	case SHOAL_OK:
		return 200;
	case SHOAL_E_UNAVAILABLE:
		return 503;
	case SHOAL_E_VALIDATION:
	case SHOAL_E_CONDITION_FAILED:
	case SHOAL_E_NOT_FOUND:
	case SHOAL_E_IN_USE:
	case SHOAL_E_THROUGHPUT:
	case SHOAL_E_TXN_CANCELED:
	case SHOAL_E_TXN_CONFLICT:
	case SHOAL_E_COLLECTION_SIZE:
	case SHOAL_E_LIMIT_EXCEEDED:
	case SHOAL_E_IDEMPOTENT_MISMATCH:
	case SHOAL_E_REQUEST_LIMIT:
	case SHOAL_E_UNKNOWN_OPERATION:
	case SHOAL_E_SERIALIZATION:
	case SHOAL_E_ACCESS_DENIED:
	case SHOAL_E_AUTH_MISSING:
	case SHOAL_E_AUTH_INCOMPLETE:
	case SHOAL_E_AUTH_UNRECOGNIZED:
	case SHOAL_E_AUTH_SIGNATURE:
	case SHOAL_E_EXPIRED_ITERATOR:
	case SHOAL_E_TRIMMED:
		return 400;
	default:
		return 500;
	}
}

/* DynamoDB writes "Message" for these, "message" for the rest. */
static const char *message_key(int code)
{
	switch (code) {
	case SHOAL_E_SERIALIZATION:
	case SHOAL_E_UNKNOWN_OPERATION:
	case SHOAL_E_TXN_CANCELED:
		return "Message";
	default:
		return "message";
	}
}

/* Text as a JSON string, bytes that are not UTF-8 replaced by '?'. */
static int lossy_text(const char *s, json_t **out, char *errmsg)
{
	size_t n = strlen(s);
	if (wire_api_utf8_valid(s, n)) {
		*out = json_stringn(s, n);
		return *out != NULL ? SHOAL_OK : nomem(errmsg);
	}
	char *buf = sh_malloc(n + 1);
	if (buf == NULL)
		return nomem(errmsg);
	size_t i = 0;
	while (i < n) {
		size_t len = wire_api_utf8_seq(s + i, n - i);
		if (len == 0) {
			buf[i++] = '?';
		} else {
			memcpy(buf + i, s + i, len);
			i += len;
		}
	}
	*out = json_stringn(buf, n);
	sh_free(buf);
	return *out != NULL ? SHOAL_OK : nomem(errmsg);
}

int wire_api_error_to_json(int code, const char *message, json_t **out, char *errmsg)
{
	wire_json_init();
	*out = NULL;
	json_t *o = json_object();
	if (o == NULL)
		return nomem(errmsg);
	int rc = wire_api_set(o, "__type", json_string(wire_api_error_type(code)), errmsg);
	if (rc == SHOAL_OK && message != NULL && message[0] != '\0') {
		json_t *m;
		rc = lossy_text(message, &m, errmsg);
		if (rc == SHOAL_OK)
			rc = wire_api_set(o, message_key(code), m, errmsg);
	}
	if (rc != SHOAL_OK) {
		json_decref(o);
		return rc;
	}
	*out = o;
	return SHOAL_OK;
}

/* CancellationReason.Code <-> Status. */
static const struct {
	const char *code;
	int err;
} reason_codes[] = {
    {"None", SHOAL_OK},
    {"ConditionalCheckFailed", SHOAL_E_CONDITION_FAILED},
    {"TransactionConflict", SHOAL_E_TXN_CONFLICT},
    {"ItemCollectionSizeLimitExceeded", SHOAL_E_COLLECTION_SIZE},
    {"ProvisionedThroughputExceeded", SHOAL_E_THROUGHPUT},
    {"ThrottlingError", SHOAL_E_REQUEST_LIMIT},
    {"ValidationError", SHOAL_E_VALIDATION},
};

static const char *reason_code_of(int err)
{
	for (size_t i = 0; i < sizeof(reason_codes) / sizeof(reason_codes[0]); i++) {
		if (reason_codes[i].err == err)
			return reason_codes[i].code;
	}
	return "InternalError";
}

static int reason_err_of(const char *code)
{
	for (size_t i = 0; i < sizeof(reason_codes) / sizeof(reason_codes[0]); i++) {
		if (strcmp(reason_codes[i].code, code) == 0)
			return reason_codes[i].err;
	}
	return SHOAL_E_INTERNAL;
}

static int reasons_to_json(wire_api_out *c, const Shoal__Response *resp, json_t **out)
{
	json_t *arr = json_array();
	if (arr == NULL)
		return nomem(c->errmsg);
	for (size_t i = 0; i < resp->n_cancellation_reasons; i++) {
		const Shoal__CancellationReason *r = resp->cancellation_reasons[i];
		json_t *o = NULL;
		int rc;
		if (r == NULL) {
			o = json_object();
			rc = o != NULL ? SHOAL_OK : nomem(c->errmsg);
		} else {
			rc = wire_api_message_new_json(c, &r->base, &o);
		}
		/* A reason without a code says it with its status. */
		if (rc == SHOAL_OK && json_object_get(o, "Code") == NULL) {
			int err = r != NULL ? wire_code_from_status(r->status) : SHOAL_OK;
			rc = wire_api_set(o, "Code", json_string(reason_code_of(err)), c->errmsg);
		}
		if (rc == SHOAL_OK && json_array_append_new(arr, o) != 0)
			rc = nomem(c->errmsg);
		else if (rc != SHOAL_OK)
			json_decref(o);
		if (rc != SHOAL_OK) {
			json_decref(arr);
			return rc;
		}
	}
	*out = arr;
	return SHOAL_OK;
}

static int error_body(wire_api_out *c, const Shoal__Response *resp, json_t **out)
{
	int code = wire_code_from_status(resp->status);
	json_t *o;
	int rc = wire_api_error_to_json(code, resp->message, &o, c->errmsg);
	if (rc != SHOAL_OK)
		return rc;
	json_t *v;
	if (resp->item != NULL) {
		rc = wire_api_item_to_json(c, resp->item, &v);
		if (rc == SHOAL_OK)
			rc = wire_api_set(o, "Item", v, c->errmsg);
	}
	if (rc == SHOAL_OK && resp->n_cancellation_reasons > 0) {
		rc = reasons_to_json(c, resp, &v);
		if (rc == SHOAL_OK)
			rc = wire_api_set(o, "CancellationReasons", v, c->errmsg);
	}
	if (rc != SHOAL_OK) {
		json_decref(o);
		return rc;
	}
	*out = o;
	return SHOAL_OK;
}

/* ------------------------------------------------------------------------ */
/* Responses -> JSON                                                         */
/* ------------------------------------------------------------------------ */

static int response_to_json(wire_api_out *c, const Shoal__Response *resp, const wire_op_info *op,
                            json_t **out)
{
	if (resp->status != SHOAL__STATUS__STATUS_OK)
		return error_body(c, resp, out);
	uint32_t rc_case = (uint32_t)resp->result_case;
	if (rc_case == 0) {
		*out = json_object();
		return *out != NULL ? SHOAL_OK : nomem(c->errmsg);
	}
	const wire_op_info *got = wire_op_by_id(rc_case);
	if (got == NULL)
		return sh_errf(c->errmsg, SHOAL_E_INTERNAL, "unknown result %u in a response",
		               rc_case);
	if (op != NULL && op != got)
		return sh_errf(c->errmsg, SHOAL_E_INTERNAL,
		               "the response to a %s request carries a %s result", op->name,
		               got->name);
	const ProtobufCFieldDescriptor *f =
	    protobuf_c_message_descriptor_get_field(&shoal__response__descriptor, rc_case);
	const ProtobufCMessage *m =
	    *(const ProtobufCMessage *const *)((const char *)resp + f->offset);
	if (m == NULL) {
		*out = json_object();
		return *out != NULL ? SHOAL_OK : nomem(c->errmsg);
	}
	return wire_api_message_new_json(c, m, out);
}

int wire_api_response_to_json(const Shoal__Response *resp, const char *operation, json_t **out,
                              char *errmsg)
{
	*out = NULL;
	const wire_op_info *op = NULL;
	if (operation != NULL && (op = wire_op_by_name(operation)) == NULL)
		return sh_errf(errmsg, SHOAL_E_UNKNOWN_OPERATION,
		               "An unknown operation was requested.");
	wire_api_out c;
	wire_api_out_init(&c, errmsg);
	c.heuristic_count = true;
	int rc = response_to_json(&c, resp, op, out);
	wire_api_out_fini(&c);
	return rc;
}

static bool select_count(const Shoal__Request *req)
{
	const char *sel = NULL;
	if (req->op_case == SHOAL__REQUEST__OP_QUERY && req->query != NULL &&
	    WIRE_HAS(req->query, select))
		sel = req->query->select;
	if (req->op_case == SHOAL__REQUEST__OP_SCAN && req->scan != NULL &&
	    WIRE_HAS(req->scan, select))
		sel = req->scan->select;
	return sel != NULL && strcmp(sel, "COUNT") == 0;
}

int wire_api_response_to_json_for(const Shoal__Response *resp, const Shoal__Request *req,
                                  json_t **out, char *errmsg)
{
	*out = NULL;
	const wire_op_info *op = wire_op_by_id((uint32_t)req->op_case);
	if (op == NULL)
		return sh_errf(errmsg, SHOAL_E_UNKNOWN_OPERATION,
		               "The request carries no operation Shoal knows (op %d)",
		               (int)req->op_case);
	wire_api_out c;
	wire_api_out_init(&c, errmsg);
	c.select_count = select_count(req);
	int rc = response_to_json(&c, resp, op, out);
	wire_api_out_fini(&c);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* JSON -> Responses                                                         */
/* ------------------------------------------------------------------------ */

static int code_of_exception(const char *name)
{
	for (int code = 1; code < SHOAL_E__COUNT; code++) {
		if (strcmp(shoal_exception_name(code), name) == 0)
			return code;
	}
	return SHOAL_E_INTERNAL;
}

static int error_from_json(wire_api_in *c, const json_t *body, const json_t *type,
                           Shoal__Response *resp)
{
	const char *t;
	int rc = wire_api_string_from_json(c, type, &t);
	if (rc != SHOAL_OK)
		return rc;
	const char *hash = strrchr(t, '#');
	resp->status = wire_status_from_code(code_of_exception(hash != NULL ? hash + 1 : t));
	const json_t *m = json_object_get(body, "message");
	if (m == NULL || json_is_null(m))
		m = json_object_get(body, "Message");
	if (m != NULL && !json_is_null(m)) {
		const char *text;
		rc = wire_api_string_from_json(c, m, &text);
		if (rc != SHOAL_OK)
			return rc;
		resp->message = (char *)text;
	}
	const json_t *reasons = json_object_get(body, "CancellationReasons");
	if (reasons != NULL && !json_is_null(reasons)) {
		rc = wire_api_field_from_json(c, &shoal__response__descriptor,
		                              "cancellation_reasons", reasons, &resp->base);
		if (rc != SHOAL_OK)
			return rc;
		for (size_t i = 0; i < resp->n_cancellation_reasons; i++) {
			Shoal__CancellationReason *r = resp->cancellation_reasons[i];
			r->status =
			    wire_status_from_code(reason_err_of(r->code != NULL ? r->code : ""));
		}
	}
	const json_t *item = json_object_get(body, "Item");
	if (item != NULL && !json_is_null(item))
		return wire_api_item_from_json(c, item, &resp->item);
	return SHOAL_OK;
}

int wire_api_response_from_json(sh_arena *a, const char *operation, const json_t *body,
                                Shoal__Response **out, char *errmsg)
{
	*out = NULL;
	wire_json_init();
	const wire_op_info *op = wire_op_by_name(operation);
	if (op == NULL)
		return sh_errf(errmsg, SHOAL_E_UNKNOWN_OPERATION,
		               "An unknown operation was requested.");
	wire_api_in c;
	wire_api_in_init(&c, a, false, errmsg);
	if (body != NULL && !json_is_object(body))
		return sh_errf(errmsg, SHOAL_E_SERIALIZATION, "%s",
		               json_is_array(body) ? "Start of list found where not expected"
		                                   : "Unexpected value type in payload");
	Shoal__Response *resp = sh_arena_alloc(a, sizeof(*resp));
	if (resp == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory converting a JSON response");
	shoal__response__init(resp);
	const json_t *type = body != NULL ? json_object_get(body, "__type") : NULL;
	int rc;
	if (type != NULL && !json_is_null(type)) {
		rc = error_from_json(&c, body, type, resp);
	} else {
		const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(
		    &shoal__response__descriptor, op->field);
		ProtobufCMessage *m = NULL;
		rc = wire_api_message_from_json(&c, f->descriptor, body, &m);
		if (rc == SHOAL_OK) {
			resp->result_case = (Shoal__Response__ResultCase)f->id;
			*(ProtobufCMessage **)((char *)resp + f->offset) = m;
		}
	}
	rc = wire_api_in_finish(&c, rc);
	if (rc != SHOAL_OK)
		return rc;
	*out = resp;
	return SHOAL_OK;
}
