/*
 * env_trust.c -- whether an environment opened with MDB_NOSYNC can be trusted
 * after the machine it ran on crashed (st_env_options.rebuildable).
 *
 * The danger.  Under MDB_NOSYNC | MDB_WRITEMAP every commit stores into the
 * shared mapping and nothing is flushed until st_env_sync.  The kernel writes
 * dirty pages back whenever and in whatever order it likes, meta pages
 * included.  A *process* crash loses nothing (the page cache survives it),
 * but after a *machine* crash (power loss, kernel panic, a VM killed) the
 * file may hold a meta page that points at pages never written, or pages of
 * a later transaction under an earlier meta page: LMDB's own documentation
 * says such a database may be corrupt.  Nothing inside the file tells a torn
 * database from a good one.
 *
 * The marker.  Next to data.mdb the environment keeps a small file,
 * "shoal-state", written atomically (write a temporary file, fsync it,
 * rename it over the old one, fsync the directory):
 *
 *     shoal-state 1
 *     state <open|clean|rebuild>
 *     boot <the kernel's boot id when it was written>
 *
 *   open     written (durably) by st_env_open before anything can be
 *            written: from now on the file may hold unflushed commits;
 *   clean    written by st_env_close after st_env_sync succeeded: the file
 *            is complete on disk;
 *   rebuild  written by st_env_mark_rebuild: someone found this replica's
 *            data wrong (the replica scrub) and wants it rebuilt.
 *
 * The decision at open (trust_check):
 *
 *   data.mdb   marker                                  verdict
 *   --------   -------------------------------------   ----------------------
 *   absent     any                                     new environment
 *   present    clean                                   trusted
 *   present    open, boot id = this boot's             trusted: only the
 *                                                      process died, the page
 *                                                      cache kept everything
 *   present    open, another (or unknown) boot id      NOT trusted: the
 *                                                      machine went down with
 *                                                      unflushed commits
 *   present    rebuild                                 NOT trusted
 *   present    missing or unreadable                   NOT trusted (written
 *                                                      before markers, or torn)
 *
 * An environment that is not trusted is emptied (data.mdb and lock.mdb
 * removed) and opened fresh; st_env_rebuilt says why.  Its owner must then
 * fill it from the durable record -- the node's Raft snapshot and log (raft
 * restores the last snapshot at start and replays the entries after it,
 * node/fsm.h) -- before it serves reads.
 *
 * The boot id is /proc/sys/kernel/random/boot_id: a random UUID the kernel
 * makes at every boot.  A test simulates power loss by killing the process,
 * damaging data.mdb and rewriting the marker's boot id (tests/lib/tl_cluster.c,
 * tl_cluster_power_loss).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine.h"

#define MARKER     "shoal-state"
#define MARKER_TMP "shoal-state.tmp"
#define BOOT_ID    "/proc/sys/kernel/random/boot_id"
#define BOOT_MAX   64

static void boot_id(char out[BOOT_MAX])
{
	out[0] = '\0';
	FILE *f = fopen(BOOT_ID, "re");
	if (f == NULL)
		return;
	if (fgets(out, BOOT_MAX, f) == NULL)
		out[0] = '\0';
	fclose(f);
	out[strcspn(out, "\r\n")] = '\0';
}

static int path_of(char *buf, size_t n, const char *dir, const char *file, char *errmsg)
{
	if ((size_t)snprintf(buf, n, "%s/%s", dir, file) >= n)
		return sh_errf(errmsg, SHOAL_E_VALIDATION, "path too long: %s/%s", dir, file);
	return SHOAL_OK;
}

/* Writes the marker durably (temporary file, fsync, rename, fsync of the
 * directory). */
static int marker_write(const char *dir, const char *state, char *errmsg)
{
	char tmp[ST_PATH_MAX + 32], dst[ST_PATH_MAX + 32], boot[BOOT_MAX];
	int rc;
	if ((rc = path_of(tmp, sizeof(tmp), dir, MARKER_TMP, errmsg)) != SHOAL_OK ||
	    (rc = path_of(dst, sizeof(dst), dir, MARKER, errmsg)) != SHOAL_OK)
		return rc;
	boot_id(boot);
	char text[160];
	int len = snprintf(text, sizeof(text), "shoal-state 1\nstate %s\nboot %s\n", state,
	                   boot[0] != '\0' ? boot : "unknown");
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return sh_errf(errmsg, SHOAL_E_IO, "creating %s: %s", tmp, strerror(errno));
	bool ok = write(fd, text, (size_t)len) == len && fsync(fd) == 0;
	int err = errno;
	close(fd);
	if (!ok) {
		unlink(tmp);
		return sh_errf(errmsg, err == ENOSPC ? SHOAL_E_FULL : SHOAL_E_IO, "writing %s: %s",
		               tmp, strerror(err));
	}
	if (rename(tmp, dst) != 0) {
		err = errno;
		unlink(tmp);
		return sh_errf(errmsg, SHOAL_E_IO, "renaming %s: %s", tmp, strerror(err));
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sh_errf(errmsg, SHOAL_E_IO, "opening %s: %s", dir, strerror(errno));
	ok = fsync(dfd) == 0;
	err = errno;
	close(dfd);
	if (!ok)
		return sh_errf(errmsg, SHOAL_E_IO, "fsync %s: %s", dir, strerror(err));
	return SHOAL_OK;
}

/* The verdict of the table at the top: true if the existing data file can
 * be trusted, else false with the reason in `why`. */
static bool trusted(const char *dir, char *why, size_t why_n)
{
	char path[ST_PATH_MAX + 32];
	if (path_of(path, sizeof(path), dir, MARKER, NULL) != SHOAL_OK) {
		snprintf(why, why_n, "path too long");
		return false;
	}
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		snprintf(why, why_n, "no %s marker (%s)", MARKER, strerror(errno));
		return false;
	}
	char line[160], state[32] = "", boot[BOOT_MAX] = "", now[BOOT_MAX];
	bool header = false;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\r\n")] = '\0';
		if (strcmp(line, "shoal-state 1") == 0)
			header = true;
		else if (strncmp(line, "state ", 6) == 0)
			snprintf(state, sizeof(state), "%.31s", line + 6);
		else if (strncmp(line, "boot ", 5) == 0)
			snprintf(boot, sizeof(boot), "%.63s", line + 5);
	}
	fclose(f);
	if (!header || state[0] == '\0') {
		snprintf(why, why_n, "the %s marker is unreadable", MARKER);
		return false;
	}
	if (strcmp(state, "clean") == 0)
		return true;
	if (strcmp(state, "rebuild") == 0) {
		snprintf(why, why_n, "a rebuild was asked for (replica scrub)");
		return false;
	}
	if (strcmp(state, "open") != 0) {
		snprintf(why, why_n, "the %s marker says '%s'", MARKER, state);
		return false;
	}
	boot_id(now);
	if (now[0] != '\0' && strcmp(boot, now) == 0)
		return true;
	snprintf(why, why_n,
	         "the machine restarted (boot id %s, now %s) while the environment was open: "
	         "commits not yet flushed may be torn",
	         boot, now[0] != '\0' ? now : "unknown");
	return false;
}

static int remove_file(const char *dir, const char *file, char *errmsg)
{
	char path[ST_PATH_MAX + 32];
	int rc = path_of(path, sizeof(path), dir, file, errmsg);
	if (rc != SHOAL_OK)
		return rc;
	if (unlink(path) != 0 && errno != ENOENT)
		return sh_errf(errmsg, SHOAL_E_IO, "removing %s: %s", path, strerror(errno));
	return SHOAL_OK;
}

int st_env_trust_check(const char *dir, char *why, size_t why_n, char *errmsg)
{
	why[0] = '\0';
	char path[ST_PATH_MAX + 32];
	int rc = path_of(path, sizeof(path), dir, "data.mdb", errmsg);
	if (rc != SHOAL_OK)
		return rc;
	struct stat st;
	if (stat(path, &st) == 0 && !trusted(dir, why, why_n)) {
		if ((rc = remove_file(dir, "data.mdb", errmsg)) != SHOAL_OK ||
		    (rc = remove_file(dir, "lock.mdb", errmsg)) != SHOAL_OK)
			return rc;
	}
	/* From here on the file may hold commits not yet on disk. */
	return marker_write(dir, "open", errmsg);
}

int st_env_trust_clean(const char *dir, char *errmsg)
{
	return marker_write(dir, "clean", errmsg);
}

int st_env_mark_rebuild(st_env *env, char *errmsg)
{
	if (!env->rebuildable)
		return sh_errf(errmsg, SHOAL_E_VALIDATION,
		               "st_env_mark_rebuild: the environment in %s is not rebuildable",
		               env->path);
	env->rebuild_asked = true; /* st_env_close must not write "clean" over it */
	return marker_write(env->path, "rebuild", errmsg);
}
