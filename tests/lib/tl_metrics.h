/*
 * tl_metrics.h -- what a running cluster's processes show from outside:
 * a metrics endpoint's Prometheus text (GET /metrics over HTTP/1.0), its
 * samples and their labels, and a process's memory from /proc.  Used by
 * load tests that watch a cluster while they drive it (it_hot).
 */
#ifndef SHOAL_TL_METRICS_H
#define SHOAL_TL_METRICS_H

#include <stdbool.h>
#include <stddef.h>

/* The body of GET /metrics from "host:port" (IPv4), malloc'd and
 * NUL-terminated, or NULL (connection refused, 2-s timeouts). */
char *tl_metrics_get(const char *hostport);

/* Calls fn for every sample of `text` (Prometheus text format: comments
 * skipped): name, its label set ("{a=\"x\",...}" as written, or "" when it
 * has none; not NUL-terminated at the brace: parse it with tl_metrics_label)
 * and value. */
typedef void (*tl_metrics_fn)(void *arg, const char *name, size_t name_len, const char *labels,
                              double value);
void tl_metrics_each(const char *text, tl_metrics_fn fn, void *arg);

/* The value of label `name` in a label set, unescaped (\\, \", \n), into
 * out[cap] (cut to fit); false if absent. */
bool tl_metrics_label(const char *labels, const char *name, char *out, size_t cap);

/* RssAnon and VmRSS, in MiB, of the process whose pid is in `pidfile`;
 * false (both 0) when it cannot be read.  RssAnon is the heap and stacks,
 * where a queue would grow; VmRSS adds mapped files (LMDB's pages). */
bool tl_proc_rss(const char *pidfile, double *anon_mib, double *vm_mib);

/* CPU seconds (user + system) the process whose pid is in `pidfile` has
 * used; false (0) when it cannot be read. */
bool tl_proc_cpu(const char *pidfile, double *cpu_secs);

/* The machine's CPU time since boot, in seconds summed over its CPUs: busy
 * (everything but idle and iowait) and total (/proc/stat).  A load test
 * prints busy / total over its phases, so that a latency figure shows
 * whether the machine was saturated (by the test or by anything else). */
bool tl_machine_cpu(double *busy_secs, double *total_secs);

#endif
