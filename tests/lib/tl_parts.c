/*
 * tl_parts.c -- the table's partitions from ClusterStatus (tl_parts.h).
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cluster.h"
#include "tests/lib/testlib.h"
#include "tests/lib/tl_items.h"
#include "tests/lib/tl_parts.h"

void tl_parts_init(tl_parts *p, tl_cluster *c, const char *table)
{
	memset(p, 0, sizeof(*p));
	p->c = c;
	snprintf(p->table, sizeof(p->table), "%s", table);
}

void tl_parts_init_gsi(tl_parts *p, tl_cluster *c)
{
	tl_parts_init(p, c, "");
	p->gsi = true;
}

static json_t *status_json(tl_parts *p)
{
	char *o = NULL, *e = NULL;
	int rc = tl_shoal(p->c, &o, &e, "status --output json");
	tl_assert_msg(rc == 0, "status: exit %d: %s", rc, e != NULL ? e : "");
	json_t *st = json_loads(o, 0, NULL);
	tl_assert_msg(st != NULL, "status: unreadable JSON");
	free(o);
	free(e);
	return st;
}

static uint64_t hexval(const json_t *v)
{
	if (json_is_integer(v))
		return (uint64_t)json_integer_value(v);
	const char *s = json_string_value(v);
	return s != NULL ? strtoull(s, NULL, 0) : 0;
}

int tl_parts_list(tl_parts *p, tl_part *out, int cap)
{
	json_t *st = status_json(p);
	size_t i;
	json_t *row;
	int n = 0;
	json_array_foreach(json_object_get(st, "MapPartitions"), i, row)
	{
		const char *t = json_string_value(json_object_get(row, "TableName"));
		long long id = json_integer_value(json_object_get(row, "TableId"));
		if (p->gsi) {
			if (id != 0)
				continue;
		} else {
			if (t != NULL && strcmp(t, p->table) == 0 && p->table_id == 0)
				p->table_id = id;
			if ((t == NULL || strcmp(t, p->table) != 0) &&
			    (p->table_id == 0 || id != p->table_id))
				continue;
		}
		if (n == cap)
			break;
		out[n].lo = hexval(json_object_get(row, "Lo"));
		out[n].hi = hexval(json_object_get(row, "Hi"));
		out[n].group = (int)json_integer_value(json_object_get(row, "Group"));
		out[n].moving = (int)json_integer_value(json_object_get(row, "MovingTo"));
		n++;
	}
	json_decref(st);
	if (n == 0) {
		/* No partition of the table in the map: none moved yet, so the
		 * cluster file's placement holds (partition i of every table in
		 * its group). */
		sh_cluster_conf conf;
		memset(&conf, 0, sizeof(conf));
		conf.groups = (uint32_t)p->c->groups;
		uint32_t np = sh_cluster_partitions(&conf);
		for (uint32_t k = 0; k < np && n < cap; k++, n++) {
			sh_cluster_partition_range(&conf, k, &out[n].lo, &out[n].hi);
			out[n].group = (int)sh_cluster_partition_group(&conf, k);
			out[n].moving = 0;
		}
	}
	/* hash order (status lists them so; made sure of here) */
	for (int a = 1; a < n; a++)
		for (int b = a; b > 0 && out[b].lo < out[b - 1].lo; b--) {
			tl_part x = out[b];
			out[b] = out[b - 1];
			out[b - 1] = x;
		}
	return n;
}

bool tl_parts_of(tl_parts *p, uint64_t h, tl_part *out)
{
	tl_part parts[256];
	int n = tl_parts_list(p, parts, 256);
	for (int i = 0; i < n; i++)
		if (h >= parts[i].lo && h <= parts[i].hi) {
			*out = parts[i];
			return true;
		}
	return false;
}

int tl_parts_in_map(tl_parts *p)
{
	json_t *st = status_json(p);
	size_t i;
	json_t *row;
	int n = 0;
	json_array_foreach(json_object_get(st, "MapPartitions"), i, row)
	{
		long long id = json_integer_value(json_object_get(row, "TableId"));
		n += p->gsi ? id == 0 : p->table_id != 0 && id == p->table_id;
	}
	json_decref(st);
	return n;
}

int tl_parts_leader_of(tl_parts *p, int g)
{
	json_t *st = status_json(p);
	size_t i;
	json_t *row;
	int leader = 0;
	json_array_foreach(json_object_get(st, "Groups"), i, row)
	{
		const char *role = json_string_value(json_object_get(row, "Role"));
		if (json_integer_value(json_object_get(row, "Group")) == g && role != NULL &&
		    strcmp(role, "leader") == 0)
			leader = (int)json_integer_value(json_object_get(row, "Node"));
	}
	json_decref(st);
	return leader;
}

long long tl_parts_index_entries(tl_parts *p, int g, const char *table, const char *index)
{
	json_t *st = status_json(p);
	size_t i, k, x;
	json_t *row, *t, *ix;
	long long n = -1;
	json_array_foreach(json_object_get(st, "Groups"), i, row)
	{
		const char *role = json_string_value(json_object_get(row, "Role"));
		if (json_integer_value(json_object_get(row, "Group")) != g || role == NULL ||
		    strcmp(role, "leader") != 0)
			continue;
		json_array_foreach(json_object_get(row, "Tables"), k, t)
		{
			const char *name = json_string_value(json_object_get(t, "TableName"));
			if (name == NULL || strcmp(name, table) != 0)
				continue;
			json_array_foreach(json_object_get(t, "Indexes"), x, ix)
			{
				const char *in =
				    json_string_value(json_object_get(ix, "IndexName"));
				if (in != NULL && strcmp(in, index) == 0)
					n = json_integer_value(json_object_get(ix, "ItemCount"));
			}
		}
	}
	json_decref(st);
	return n;
}

int64_t tl_parts_wait_served(tl_parts *p, uint64_t h, int to, int secs)
{
	int64_t t0 = tl_items_now_ms(), until = t0 + (int64_t)secs * 1000;
	for (;;) {
		tl_part x = {.group = -1, .moving = -1};
		if (tl_parts_of(p, h, &x) && x.group == to && x.moving == 0)
			return tl_items_now_ms() - t0;
		tl_assert_msg(tl_items_now_ms() < until,
		              "hash %016" PRIx64 " is in group %d (moving to %d) after %d s", h,
		              x.group, x.moving, secs);
		usleep(50000);
	}
}

void tl_parts_admin(tl_parts *p, const char *fmt, ...)
{
	char args[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	char *o = NULL, *e = NULL;
	int rc = tl_shoal(p->c, &o, &e, "%s", args);
	tl_assert_msg(rc == 0, "shoal %s: exit %d: %s%s", args, rc, o != NULL ? o : "",
	              e != NULL ? e : "");
	free(o);
	free(e);
}
