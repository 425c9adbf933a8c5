/*
 * wire_api_req.c -- DynamoDB request bodies <-> shoal.Request.
 *
 * The operation name picks the member of Request's `op` oneof (the table in
 * wire_api_schema.c; Request and Response use the same field names and
 * numbers), and the body is that member's message, converted by the schema
 * walker (wire_api_in.c / wire_api_out.c).  Nothing here validates more
 * than the JSON shapes: the served request goes through wire_*_req_from_pb,
 * which speaks DynamoDB's validation messages for JSON and protobuf clients
 * alike.
 */
#include <string.h>

#include "proto/wire_api_int.h"

static const ProtobufCFieldDescriptor *op_field(const wire_op_info *op)
{
	return protobuf_c_message_descriptor_get_field_by_name(&shoal__request__descriptor,
	                                                       op->field);
}

int wire_api_request_from_json(sh_arena *a, const char *operation, const json_t *body,
                               Shoal__Request **out, char *errmsg)
{
	*out = NULL;
	wire_json_init();
	const wire_op_info *op = wire_op_by_name(operation);
	const ProtobufCFieldDescriptor *f = op != NULL ? op_field(op) : NULL;
	if (f == NULL)
		return sh_errf(errmsg, SHOAL_E_UNKNOWN_OPERATION,
		               "An unknown operation was requested.");
	wire_api_in c;
	wire_api_in_init(&c, a, true, errmsg);
	ProtobufCMessage *m = NULL;
	int rc = wire_api_in_finish(&c, wire_api_message_from_json(&c, f->descriptor, body, &m));
	if (rc != SHOAL_OK)
		return rc;
	Shoal__Request *req = sh_arena_alloc(a, sizeof(*req));
	if (req == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory converting a JSON request");
	shoal__request__init(req);
	req->op_case = (Shoal__Request__OpCase)f->id;
	*(ProtobufCMessage **)((char *)req + f->offset) = m;
	*out = req;
	return SHOAL_OK;
}

const char *wire_api_operation_name(const Shoal__Request *req)
{
	const wire_op_info *op = wire_op_by_id((uint32_t)req->op_case);
	return op != NULL ? op->name : "";
}

int wire_api_request_to_json(const Shoal__Request *req, const char **operation, json_t **out,
                             char *errmsg)
{
	*out = NULL;
	const wire_op_info *op = wire_op_by_id((uint32_t)req->op_case);
	const ProtobufCFieldDescriptor *f = op != NULL ? op_field(op) : NULL;
	if (f == NULL)
		return sh_errf(errmsg, SHOAL_E_UNKNOWN_OPERATION,
		               "The request carries no operation Shoal knows (op %d)",
		               (int)req->op_case);
	if (operation != NULL)
		*operation = op->name;
	const ProtobufCMessage *m =
	    *(const ProtobufCMessage *const *)((const char *)req + f->offset);
	wire_api_out c;
	wire_api_out_init(&c, errmsg);
	int rc;
	if (m == NULL) {
		*out = json_object();
		rc = *out != NULL ? SHOAL_OK
		                  : sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory writing JSON");
	} else {
		rc = wire_api_message_new_json(&c, m, out);
	}
	wire_api_out_fini(&c);
	return rc;
}
