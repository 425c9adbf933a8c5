/*
 * wire_capacity.c -- ReturnConsumedCapacity: units from sizes, and
 * ConsumedCapacity messages built, charged and added up (contract and rules
 * in wire.h).
 *
 * Units are multiples of 0.5, so every sum here is exact in a double.
 */
#include <string.h>

#include "proto/wire_int.h"

#define READ_UNIT  4096u /* bytes per read unit */
#define WRITE_UNIT 1024u /* bytes per write unit */

wire_rcc wire_rcc_parse(const char *s)
{
	if (s == NULL)
		return WIRE_RCC_NONE;
	if (strcmp(s, "TOTAL") == 0)
		return WIRE_RCC_TOTAL;
	if (strcmp(s, "INDEXES") == 0)
		return WIRE_RCC_INDEXES;
	return WIRE_RCC_NONE;
}

static uint64_t units_of(uint64_t bytes, uint64_t unit)
{
	uint64_t n = bytes / unit + (bytes % unit != 0);
	return n > 0 ? n : 1;
}

double wire_read_units(uint64_t bytes, bool consistent)
{
	double n = (double)units_of(bytes, READ_UNIT);
	return consistent ? n : n / 2;
}

double wire_write_units(uint64_t bytes)
{
	return (double)units_of(bytes, WRITE_UNIT);
}

static Shoal__Capacity *capacity_new(sh_arena *a)
{
	Shoal__Capacity *c = sh_arena_alloc(a, sizeof(*c));
	if (c != NULL)
		shoal__capacity__init(c);
	return c;
}

int wire_capacity_new(sh_arena *a, wire_rcc rcc, const char *table, Shoal__ConsumedCapacity **out)
{
	*out = NULL;
	if (rcc == WIRE_RCC_NONE)
		return SHOAL_OK;
	Shoal__ConsumedCapacity *cc = sh_arena_alloc(a, sizeof(*cc));
	if (cc == NULL)
		return SHOAL_E_NOMEM;
	shoal__consumed_capacity__init(cc);
	cc->table_name =
	    sh_arena_strndup(a, table != NULL ? table : "", table != NULL ? strlen(table) : 0);
	if (cc->table_name == NULL)
		return SHOAL_E_NOMEM;
	if (rcc == WIRE_RCC_INDEXES && (cc->table = capacity_new(a)) == NULL)
		return SHOAL_E_NOMEM;
	*out = cc;
	return SHOAL_OK;
}

void wire_capacity_charge_table(Shoal__ConsumedCapacity *cc, double units)
{
	if (cc == NULL)
		return;
	cc->capacity_units += units;
	if (cc->table != NULL)
		cc->table->capacity_units += units;
}

/* The entry of `index` in a list of IndexCapacity, appended when absent. */
static Shoal__IndexCapacity *index_entry(sh_arena *a, Shoal__IndexCapacity ***list, size_t *n,
                                         const char *index)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*list)[i]->index_name, index) == 0)
			return (*list)[i];
	Shoal__IndexCapacity **v = sh_arena_alloc(a, (*n + 1) * sizeof(*v));
	Shoal__IndexCapacity *e = sh_arena_alloc(a, sizeof(*e));
	if (v == NULL || e == NULL)
		return NULL;
	shoal__index_capacity__init(e);
	e->index_name = sh_arena_strndup(a, index, strlen(index));
	e->capacity = capacity_new(a);
	if (e->index_name == NULL || e->capacity == NULL)
		return NULL;
	if (*n > 0)
		memcpy(v, *list, *n * sizeof(*v));
	v[(*n)++] = e;
	*list = v;
	return e;
}

int wire_capacity_charge_index(sh_arena *a, Shoal__ConsumedCapacity *cc, const char *index,
                               bool local, double units)
{
	if (cc == NULL)
		return SHOAL_OK;
	cc->capacity_units += units;
	if (cc->table == NULL)
		return SHOAL_OK;
	Shoal__IndexCapacity *e = local ? index_entry(a, &cc->local_secondary_indexes,
	                                              &cc->n_local_secondary_indexes, index)
	                                : index_entry(a, &cc->global_secondary_indexes,
	                                              &cc->n_global_secondary_indexes, index);
	if (e == NULL)
		return SHOAL_E_NOMEM;
	e->capacity->capacity_units += units;
	return SHOAL_OK;
}

static double item_write_units(const st_write_result *res)
{
	size_t size = res->old_size > res->new_size ? res->old_size : res->new_size;
	return wire_write_units(size);
}

static double index_write_units(const st_index_write *w)
{
	return (w->del ? wire_write_units(w->del_size) : 0) +
	       (w->put ? wire_write_units(w->put_size) : 0);
}

double wire_write_partition_units(const st_write_result *res)
{
	double units = item_write_units(res);
	for (uint32_t i = 0; i < res->n_index_writes; i++)
		if (res->index_writes[i].local)
			units += index_write_units(&res->index_writes[i]);
	return units;
}

int wire_capacity_charge_write(sh_arena *a, Shoal__ConsumedCapacity *cc, const st_write_result *res)
{
	if (cc == NULL)
		return SHOAL_OK;
	wire_capacity_charge_table(cc, item_write_units(res));
	for (uint32_t i = 0; i < res->n_index_writes; i++) {
		const st_index_write *w = &res->index_writes[i];
		double units = index_write_units(w);
		int rc = wire_capacity_charge_index(a, cc, w->name, w->local, units);
		if (rc != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

static int add_indexes(sh_arena *a, Shoal__ConsumedCapacity *into, Shoal__IndexCapacity *const *v,
                       size_t n, bool local)
{
	for (size_t i = 0; i < n; i++) {
		double units = v[i]->capacity != NULL ? v[i]->capacity->capacity_units : 0;
		/* The total already counts it: charge the index share only. */
		into->capacity_units -= units;
		int rc = wire_capacity_charge_index(a, into, v[i]->index_name, local, units);
		if (rc != SHOAL_OK)
			return rc;
	}
	return SHOAL_OK;
}

int wire_capacity_add(sh_arena *a, Shoal__ConsumedCapacity *into,
                      const Shoal__ConsumedCapacity *from)
{
	if (into == NULL || from == NULL)
		return SHOAL_OK;
	into->capacity_units += from->capacity_units;
	into->read_capacity_units += from->read_capacity_units;
	into->write_capacity_units += from->write_capacity_units;
	if (from->table != NULL) {
		if (into->table == NULL && (into->table = capacity_new(a)) == NULL)
			return SHOAL_E_NOMEM;
		into->table->capacity_units += from->table->capacity_units;
		into->table->read_capacity_units += from->table->read_capacity_units;
		into->table->write_capacity_units += from->table->write_capacity_units;
	}
	int rc = add_indexes(a, into, from->global_secondary_indexes,
	                     from->n_global_secondary_indexes, false);
	if (rc == SHOAL_OK)
		rc = add_indexes(a, into, from->local_secondary_indexes,
		                 from->n_local_secondary_indexes, true);
	return rc;
}

int wire_capacity_list_add(sh_arena *a, Shoal__ConsumedCapacity ***list, size_t *n,
                           const Shoal__ConsumedCapacity *from)
{
	if (from == NULL)
		return SHOAL_OK;
	const char *table = from->table_name != NULL ? from->table_name : "";
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*list)[i]->table_name, table) == 0)
			return wire_capacity_add(a, (*list)[i], from);
	Shoal__ConsumedCapacity *cc;
	int rc = wire_capacity_new(a, from->table != NULL ? WIRE_RCC_INDEXES : WIRE_RCC_TOTAL,
	                           table, &cc);
	if (rc != SHOAL_OK)
		return rc;
	Shoal__ConsumedCapacity **v = sh_arena_alloc(a, (*n + 1) * sizeof(*v));
	if (v == NULL)
		return SHOAL_E_NOMEM;
	if (*n > 0)
		memcpy(v, *list, *n * sizeof(*v));
	v[(*n)++] = cc;
	*list = v;
	return wire_capacity_add(a, cc, from);
}
