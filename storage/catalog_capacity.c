/*
 * catalog_capacity.c -- the capacity part of UpdateTable: billing mode,
 * ProvisionedThroughput and OnDemandThroughput of a table and its GSIs, and
 * the history DescribeTable reports (LastIncreaseDateTime,
 * LastDecreaseDateTime, NumberOfDecreasesToday,
 * LastUpdateToPayPerRequestDateTime).
 *
 * Pure: the definition in, the changed definition out, the time given.
 * Group 0 calls it with its replicated clock (st_table_update), so every
 * replica computes the same record; the data groups receive the result in a
 * TableDefine and keep the definition whose capacity_ms is newer.
 *
 * Rules, in the order they are checked (DynamoDB's messages):
 *   - a GSI Update names a GSI of the table (ResourceNotFound otherwise);
 *   - PROVISIONED after the request: no OnDemandThroughput (table, GSI
 *     Update, new GSI); a new GSI has ProvisionedThroughput; on a switch
 *     from PAY_PER_REQUEST the table and every GSI get ProvisionedThroughput
 *     (required) and lose their maximums; otherwise each change of units is
 *     checked: equal units "will not change", a decrease within the day's
 *     budget (4, then one per 3600 s: LimitExceededException);
 *   - PAY_PER_REQUEST after the request: no ProvisionedThroughput (table,
 *     GSI Update, new GSI); a switch from PROVISIONED clears the units and
 *     sets LastUpdateToPayPerRequestDateTime; OnDemandThroughput maximums
 *     are set (>= 1) or removed (-1).
 * A switch sets no increase or decrease time: DynamoDB's texts say nothing
 * of one, and the counters are about changes of provisioned units.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "index.h"

#define MS_PER_DAY        86400000LL
#define DECREASE_FREE     4         /* decreases a day without a wait */
#define DECREASE_SPACE_MS 3600000LL /* then one per hour */
#define MSG_INVALID       "One or more parameter values were invalid: "

static int64_t utc_day(int64_t ms)
{
	return ms >= 0 ? ms / MS_PER_DAY : -((-ms + MS_PER_DAY - 1) / MS_PER_DAY);
}

uint32_t st_decreases_today(uint32_t count, int64_t day, int64_t now_ms)
{
	return day == utc_day(now_ms) ? count : 0;
}

/* "Thursday, October 8, 2026 at 11:20:48 PM Coordinated Universal Time", as
 * DynamoDB writes times in the decrease limit's message. */
static void utc_text(char *buf, size_t cap, int64_t ms)
{
	static const char *const days[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
	                                   "Thursday", "Friday", "Saturday"};
	static const char *const months[] = {"January",   "February", "March",    "April",
	                                     "May",       "June",     "July",     "August",
	                                     "September", "October",  "November", "December"};
	time_t t = (time_t)(ms >= 0 ? ms / 1000 : 0);
	struct tm tm;
	if (gmtime_r(&t, &tm) == NULL) {
		snprintf(buf, cap, "%" PRId64 " ms", ms);
		return;
	}
	int h12 = tm.tm_hour % 12 == 0 ? 12 : tm.tm_hour % 12;
	snprintf(buf, cap, "%s, %s %d, %d at %d:%02d:%02d %s Coordinated Universal Time",
	         days[tm.tm_wday % 7], months[tm.tm_mon % 12], tm.tm_mday, tm.tm_year + 1900, h12,
	         tm.tm_min, tm.tm_sec, tm.tm_hour < 12 ? "AM" : "PM");
}

/* One table's or GSI's units and their history. */
typedef struct tp_ref {
	st_throughput *tp;
	int64_t *inc, *dec, *day;
	uint32_t *count;
	const char *index; /* NULL: the table */
} tp_ref;

static tp_ref table_ref(st_table_def *d)
{
	return (tp_ref){&d->tp,
	                &d->last_increase_ms,
	                &d->last_decrease_ms,
	                &d->decreases_day,
	                &d->decreases_today,
	                NULL};
}

static tp_ref index_ref(st_index_def *x)
{
	return (tp_ref){&x->tp,
	                &x->last_increase_ms,
	                &x->last_decrease_ms,
	                &x->decreases_day,
	                &x->decreases_today,
	                x->name};
}

/* New provisioned units r/w for one table or GSI at now. */
static int change_units(tp_ref t, uint64_t r, uint64_t w, int64_t now, char *errmsg)
{
	st_throughput *tp = t.tp;
	if (r == tp->rcu && w == tp->wcu) {
		if (t.index == NULL)
			return sh_errf(
			    errmsg, SHOAL_E_VALIDATION,
			    "The provisioned throughput for the table will not change. The "
			    "requested value equals the current value. Current "
			    "ReadCapacityUnits provisioned for the table: %" PRIu64
			    ". Requested ReadCapacityUnits: %" PRIu64
			    ". Current WriteCapacityUnits provisioned for the table: "
			    "%" PRIu64 ". Requested WriteCapacityUnits: %" PRIu64
			    ". Refer to the Amazon DynamoDB Developer Guide for current "
			    "limits and how to request higher limits.",
			    tp->rcu, r, tp->wcu, w);
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "The provisioned throughput for the index %s will not change. The "
		               "requested value equals the current value. Current "
		               "ReadCapacityUnits provisioned for index %s: %" PRIu64
		               ". Requested ReadCapacityUnits: %" PRIu64
		               ". Current WriteCapacityUnits provisioned for index %s: %" PRIu64
		               ". Requested WriteCapacityUnits: %" PRIu64
		               ". Refer to the Amazon DynamoDB Developer Guide for current limits "
		               "and how to request higher limits.",
		               t.index, t.index, tp->rcu, r, t.index, tp->wcu, w);
	}
	int64_t today = utc_day(now);
	uint32_t count = st_decreases_today(*t.count, *t.day, now);
	bool down = r < tp->rcu || w < tp->wcu;
	bool up = r > tp->rcu || w > tp->wcu;
	if (down) {
		if (count >= DECREASE_FREE && now - *t.dec < DECREASE_SPACE_MS) {
			int64_t next = *t.dec + DECREASE_SPACE_MS;
			if (next > (today + 1) * MS_PER_DAY)
				next = (today + 1) * MS_PER_DAY; /* a new day, a new budget */
			char last_s[96], next_s[96];
			utc_text(last_s, sizeof(last_s), *t.dec);
			utc_text(next_s, sizeof(next_s), next);
			return sh_errf(
			    errmsg, SHOAL_E_LIMIT_EXCEEDED,
			    "Subscriber limit exceeded: Provisioned throughput decreases "
			    "are limited within a given UTC day. After the first 4 "
			    "decreases, each subsequent decrease in the same UTC day can "
			    "be performed at most once every 3600 seconds. Number of "
			    "decreases today: %u. Last decrease at %s. Next decrease can "
			    "be made at %s.",
			    count, last_s, next_s);
		}
		count++;
		*t.dec = now;
	}
	if (up)
		*t.inc = now;
	*t.count = count;
	*t.day = today;
	tp->rcu = r;
	tp->wcu = w;
	return SHOAL_OK;
}

/* OnDemandThroughput maximums of a PAY_PER_REQUEST table or GSI. */
static bool change_max(st_throughput *tp, const st_capacity_req *c)
{
	uint64_t r = tp->max_rcu, w = tp->max_wcu;
	if (c->set_max_rcu)
		tp->max_rcu = c->max_rcu > 0 ? (uint64_t)c->max_rcu : 0;
	if (c->set_max_wcu)
		tp->max_wcu = c->max_wcu > 0 ? (uint64_t)c->max_wcu : 0;
	return r != tp->max_rcu || w != tp->max_wcu;
}

static bool has_max(const st_capacity_req *c)
{
	return c->set_max_rcu || c->set_max_wcu;
}

static const char *max_name(bool read)
{
	return read ? "MaxReadRequestUnits" : "MaxWriteRequestUnits";
}

static st_index_def *find_index(st_table_def *d, const char *name)
{
	for (uint32_t i = 0; i < d->n_indexes; i++)
		if (strcmp(d->indexes[i].name, name) == 0)
			return &d->indexes[i];
	return NULL;
}

static const st_index_capacity_req *find_update(const st_table_update_req *req, const char *name)
{
	for (uint32_t i = 0; i < req->n_update; i++)
		if (strcmp(req->update[i].name, name) == 0)
			return &req->update[i];
	return NULL;
}

static bool is_new(const st_table_update_req *req, const char *name)
{
	for (uint32_t i = 0; i < req->n_create; i++)
		if (req->create[i].name != NULL && strcmp(req->create[i].name, name) == 0)
			return true;
	return false;
}

/* The rest of the request leaves the table PROVISIONED. */
static int to_provisioned(const st_table_def *old, const st_table_update_req *req, int64_t now,
                          st_table_def *d, bool *changed, char *errmsg)
{
	const st_capacity_req *c = &req->cap;
	if (has_max(c))
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID "%s for OnDemandThroughput cannot be specified when the "
		                           "table BillingMode is PROVISIONED",
		               max_name(c->set_max_rcu));
	for (uint32_t i = 0; i < req->n_update; i++)
		if (has_max(&req->update[i].cap))
			return sh_errf(
			    errmsg, SHOAL_E_VALIDATION,
			    MSG_INVALID "%s for OnDemandThroughput for index : %s cannot "
			                "be specified when the table BillingMode is "
			                "PROVISIONED",
			    max_name(req->update[i].cap.set_max_rcu), req->update[i].name);
	for (uint32_t i = 0; i < req->n_create; i++) {
		const st_index_def *x = &req->create[i];
		if (x->tp.max_rcu != 0 || x->tp.max_wcu != 0)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID
			               "%s for OnDemandThroughput for index : %s cannot "
			               "be specified when the table BillingMode is "
			               "PROVISIONED",
			               max_name(x->tp.max_rcu != 0), x->name);
		if (x->tp.rcu == 0 || x->tp.wcu == 0)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID "ProvisionedThroughput must be specified for "
			                           "index: %s",
			               x->name);
	}
	if (old->billing != ST_BILLING_PROVISIONED) { /* the switch */
		if (!c->set_tp)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID "ProvisionedThroughput must be specified when "
			                           "BillingMode is PROVISIONED");
		for (uint32_t i = 0; i < d->n_indexes; i++) {
			st_index_def *x = &d->indexes[i];
			if (x->local || is_new(req, x->name))
				continue;
			const st_index_capacity_req *u = find_update(req, x->name);
			if (u == NULL || !u->cap.set_tp)
				return sh_errf(errmsg, SHOAL_E_VALIDATION,
				               MSG_INVALID
				               "ProvisionedThroughput must be specified "
				               "for index: %s",
				               x->name);
			x->tp = (st_throughput){u->cap.rcu, u->cap.wcu, 0, 0};
		}
		d->billing = ST_BILLING_PROVISIONED;
		d->tp = (st_throughput){c->rcu, c->wcu, 0, 0};
		*changed = true;
		return SHOAL_OK;
	}
	int rc;
	if (c->set_tp && (rc = change_units(table_ref(d), c->rcu, c->wcu, now, errmsg)) != SHOAL_OK)
		return rc;
	for (uint32_t i = 0; i < req->n_update; i++) {
		const st_index_capacity_req *u = &req->update[i];
		if (!u->cap.set_tp)
			continue;
		rc = change_units(index_ref(find_index(d, u->name)), u->cap.rcu, u->cap.wcu, now,
		                  errmsg);
		if (rc != SHOAL_OK)
			return rc;
	}
	*changed = *changed || c->set_tp || req->n_update > 0;
	return SHOAL_OK;
}

/* The rest of the request leaves the table PAY_PER_REQUEST. */
static int to_on_demand(const st_table_def *old, const st_table_update_req *req, int64_t now,
                        st_table_def *d, bool *changed, char *errmsg)
{
	if (req->cap.set_tp)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID
		               "Neither ReadCapacityUnits nor WriteCapacityUnits can be "
		               "specified when BillingMode is PAY_PER_REQUEST");
	for (uint32_t i = 0; i < req->n_update; i++) {
		const st_index_capacity_req *u = &req->update[i];
		if (!u->cap.set_tp)
			continue;
		if (req->set_billing)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID
			               "Neither ReadCapacityUnits nor WriteCapacityUnits "
			               "can be specified for index: %s when BillingMode "
			               "is PAY_PER_REQUEST",
			               u->name);
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               MSG_INVALID
		               "The only Updates for index: %s when TableThroughputMode "
		               "is PAY_PER_REQUEST can be to OnDemandThroughput, "
		               "WarmThroughput",
		               u->name);
	}
	for (uint32_t i = 0; i < req->n_create; i++)
		if (req->create[i].tp.rcu != 0 || req->create[i].tp.wcu != 0)
			return sh_errf(errmsg, SHOAL_E_VALIDATION,
			               MSG_INVALID
			               "ProvisionedThroughput should not be specified "
			               "for index: %s when BillingMode is PAY_PER_REQUEST",
			               req->create[i].name);
	if (old->billing == ST_BILLING_PROVISIONED) { /* the switch */
		d->billing = ST_BILLING_PAY_PER_REQUEST;
		d->tp.rcu = d->tp.wcu = 0;
		for (uint32_t i = 0; i < d->n_indexes; i++)
			d->indexes[i].tp.rcu = d->indexes[i].tp.wcu = 0;
		d->billing_changed_ms = now;
		*changed = true;
	}
	*changed |= change_max(&d->tp, &req->cap);
	for (uint32_t i = 0; i < req->n_update; i++)
		*changed |=
		    change_max(&find_index(d, req->update[i].name)->tp, &req->update[i].cap);
	return SHOAL_OK;
}

int st_catalog_update_capacity(const st_table_def *old, const st_table_update_req *req,
                               int64_t now_ms, st_table_def *d, bool *changed, char *errmsg)
{
	*changed = false;
	for (uint32_t i = 0; i < req->n_update; i++) {
		const char *name = req->update[i].name;
		st_index_def *x = name != NULL ? find_index(d, name) : NULL;
		if (x == NULL)
			return sh_errf(errmsg, SHOAL_E_NOT_FOUND,
			               "Requested resource not found: Index: %s not found",
			               name != NULL ? name : "null");
		if (x->local)
			return sh_errf(
			    errmsg, SHOAL_E_VALIDATION,
			    "Cannot update an index that is not a GlobalSecondaryIndex: %s", name);
	}
	bool prov = req->set_billing ? req->billing == ST_BILLING_PROVISIONED
	                             : old->billing == ST_BILLING_PROVISIONED;
	int rc = prov ? to_provisioned(old, req, now_ms, d, changed, errmsg)
	              : to_on_demand(old, req, now_ms, d, changed, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (*changed) /* kept increasing, whatever the leaders' clocks say */
		d->capacity_ms = now_ms > old->capacity_ms ? now_ms : old->capacity_ms + 1;
	return SHOAL_OK;
}
