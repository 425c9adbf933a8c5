/*
 * wire_define.c -- TableDefine (cluster.proto) <-> st_table_def: the one
 * converter of the definitions group 0 stores and sends to every data
 * group, used by the router's catalog cache, the node's state machine
 * (define_table) and the node's catalog listing.
 *
 * A TableDefine is the CreateTable request as the client sent it
 * (regenerated from the stored definition after UpdateTable: BillingMode,
 * ProvisionedThroughput and OnDemandThroughput of the table and its GSIs
 * included), plus what group 0 fixed: the table id, CreationDateTime, each
 * index's id and status, the next index id, and the history of capacity
 * changes (times, decreases of the day, capacity_ms).  Reading one: the request is converted as
 * CreateTable converts it (wire_create_table_from_pb), the ids and statuses
 * are laid over its indexes by name, and the result is put in the form the
 * catalog stores (st_table_def_stored: key types, ids of indexes without a
 * state assigned exactly as the engine assigns them at CreateTable -- so a
 * definition from before group 0 sent index states reads the same on every
 * component).  An index status other than ACTIVE, CREATING or DELETING is
 * refused (SHOAL_E_VALIDATION), everywhere: a definition this build does not
 * understand must not be half-applied.  (A DynamoDB TableDescription is
 * another matter: wire_desc.c reads its IndexStatus leniently.)
 */
#include <string.h>

#include "proto/wire.h"

const char *wire_index_status_name(st_index_status s)
{
	return s == ST_INDEX_CREATING ? "CREATING" : s == ST_INDEX_DELETING ? "DELETING" : "ACTIVE";
}

int wire_index_status_parse(const char *s, st_index_status *out)
{
	if (s == NULL || s[0] == '\0' || strcmp(s, "ACTIVE") == 0)
		*out = ST_INDEX_ACTIVE;
	else if (strcmp(s, "CREATING") == 0)
		*out = ST_INDEX_CREATING;
	else if (strcmp(s, "DELETING") == 0)
		*out = ST_INDEX_DELETING;
	else
		return SHOAL_E_VALIDATION;
	return SHOAL_OK;
}

int wire_table_define_to_pb(sh_arena *a, const st_table_def *def, Shoal__TableDefine **out,
                            char *errmsg)
{
	Shoal__TableDefine *td = sh_arena_alloc(a, sizeof(*td));
	if (td == NULL)
		return sh_errf(errmsg, SHOAL_E_NOMEM, "TableDefine: out of memory");
	shoal__table_define__init(td);
	int rc = wire_create_table_to_pb(a, def, &td->def, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	td->table_id = def->id;
	td->created_ms = def->created_ms;
	td->next_index_id = st_table_def_next_index_id(def);
	td->last_increase_ms = def->last_increase_ms;
	td->last_decrease_ms = def->last_decrease_ms;
	td->decreases_today = def->decreases_today;
	td->decreases_day = def->decreases_day;
	td->billing_changed_ms = def->billing_changed_ms;
	td->capacity_ms = def->capacity_ms;
	td->class_changed_ms = def->class_changed_ms;
	td->stream_label_ms = def->stream.label_ms;
	td->stream_changed_ms = def->stream.changed_ms;
	td->stream_view = (char *)wire_stream_view_name(def->stream.view);
	if (def->stream.n_past > 0) {
		Shoal__PastStream *ps = sh_arena_calloc(a, def->stream.n_past, sizeof(*ps));
		td->past_streams =
		    sh_arena_calloc(a, def->stream.n_past, sizeof(*td->past_streams));
		if (ps == NULL || td->past_streams == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "TableDefine: out of memory");
		for (uint32_t i = 0; i < def->stream.n_past; i++) {
			shoal__past_stream__init(&ps[i]);
			ps[i].label_ms = def->stream.past[i].label_ms;
			ps[i].ended_ms = def->stream.past[i].ended_ms;
			ps[i].view = (char *)wire_stream_view_name(def->stream.past[i].view);
			td->past_streams[i] = &ps[i];
		}
		td->n_past_streams = def->stream.n_past;
	}
	td->ttl_attribute = (char *)(def->ttl_attr != NULL ? def->ttl_attr : "");
	td->ttl_ms = def->ttl_ms;
	if (def->n_indexes > 0) {
		td->indexes = sh_arena_calloc(a, def->n_indexes, sizeof(*td->indexes));
		Shoal__IndexState *st = sh_arena_calloc(a, def->n_indexes, sizeof(*st));
		if (td->indexes == NULL || st == NULL)
			return sh_errf(errmsg, SHOAL_E_NOMEM, "TableDefine: out of memory");
		for (uint32_t i = 0; i < def->n_indexes; i++) {
			shoal__index_state__init(&st[i]);
			st[i].index_name = (char *)def->indexes[i].name;
			st[i].index_id = def->indexes[i].id;
			st[i].status = (char *)wire_index_status_name(def->indexes[i].status);
			st[i].last_increase_ms = def->indexes[i].last_increase_ms;
			st[i].last_decrease_ms = def->indexes[i].last_decrease_ms;
			st[i].decreases_today = def->indexes[i].decreases_today;
			st[i].decreases_day = def->indexes[i].decreases_day;
			td->indexes[i] = &st[i];
		}
		td->n_indexes = def->n_indexes;
	}
	*out = td;
	return SHOAL_OK;
}

int wire_table_define_from_pb(sh_arena *a, const Shoal__TableDefine *td, st_table_def *out,
                              char *errmsg)
{
	if (td == NULL || td->def == NULL)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "TableDefine without a table definition");
	st_table_def def;
	int rc = wire_create_table_from_pb(a, td->def, &def, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	for (size_t i = 0; i < td->n_indexes; i++) {
		const Shoal__IndexState *x = td->indexes[i];
		const char *name = x != NULL && x->index_name != NULL ? x->index_name : "?";
		st_index_status status;
		if (x == NULL || wire_index_status_parse(x->status, &status) != SHOAL_OK)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "index %s: unknown status \"%s\"", name,
			               x != NULL && x->status != NULL ? x->status : "");
		if (x->index_id > UINT16_MAX)
			return sh_errf(errmsg, SHOAL_E_VALIDATION, "index %s: id %u out of range",
			               name, x->index_id);
		/* An index the request does not list (gone meanwhile) is skipped:
		 * the definition is the list of indexes that exist. */
		for (uint32_t j = 0; j < def.n_indexes; j++)
			if (x->index_name != NULL &&
			    strcmp(def.indexes[j].name, x->index_name) == 0) {
				def.indexes[j].id = (uint16_t)x->index_id;
				def.indexes[j].status = status;
				def.indexes[j].last_increase_ms = x->last_increase_ms;
				def.indexes[j].last_decrease_ms = x->last_decrease_ms;
				def.indexes[j].decreases_today = x->decreases_today;
				def.indexes[j].decreases_day = x->decreases_day;
				break;
			}
	}
	def.id = td->table_id;
	def.created_ms = td->created_ms;
	def.next_index_id = td->next_index_id; /* group 0's counter; 0: derived */
	def.last_increase_ms = td->last_increase_ms;
	def.last_decrease_ms = td->last_decrease_ms;
	def.decreases_today = td->decreases_today;
	def.decreases_day = td->decreases_day;
	def.billing_changed_ms = td->billing_changed_ms;
	def.capacity_ms = td->capacity_ms;
	def.class_changed_ms = td->class_changed_ms;
	/* The stream: enabled (and its view) from the request; a create's
	 * stream is labelled with the table's creation time. */
	def.stream.label_ms = td->stream_label_ms;
	def.stream.changed_ms = td->stream_changed_ms;
	if (def.stream.enabled && def.stream.label_ms == 0)
		def.stream.label_ms = def.created_ms;
	if (def.stream.label_ms != 0 && def.stream.changed_ms == 0)
		def.stream.changed_ms = def.stream.label_ms;
	for (int v = ST_VIEW_KEYS_ONLY; v <= ST_VIEW_NEW_AND_OLD_IMAGES; v++)
		if (td->stream_view != NULL &&
		    strcmp(td->stream_view, wire_stream_view_name(v)) == 0)
			def.stream.view = (st_stream_view)v;
	if (def.stream.label_ms != 0 && def.stream.view == ST_VIEW_NONE)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "TableDefine: a stream without a view type");
	if (td->n_past_streams > ST_STREAM_PAST_MAX)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "TableDefine: %zu past streams",
		               td->n_past_streams);
	for (size_t i = 0; i < td->n_past_streams; i++) {
		const Shoal__PastStream *ps = td->past_streams[i];
		st_past_stream *x = &def.stream.past[i];
		x->label_ms = ps->label_ms;
		x->ended_ms = ps->ended_ms;
		for (int v = ST_VIEW_KEYS_ONLY; v <= ST_VIEW_NEW_AND_OLD_IMAGES; v++)
			if (ps->view != NULL && strcmp(ps->view, wire_stream_view_name(v)) == 0)
				x->view = (st_stream_view)v;
		if (x->label_ms == 0 || x->view == ST_VIEW_NONE)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               "TableDefine: a bad past stream");
	}
	def.stream.n_past = (uint32_t)td->n_past_streams;
	def.ttl_attr =
	    td->ttl_attribute != NULL && td->ttl_attribute[0] != '\0' ? td->ttl_attribute : NULL;
	def.ttl_ms = td->ttl_ms;
	return st_table_def_stored(&def, a, out, errmsg);
}
