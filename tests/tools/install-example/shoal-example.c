/*
 * shoal-example.c -- a program outside Shoal's tree, built against the
 * installed libshoal only (<shoal/shoal.h> and `pkg-config shoal`), by
 * tests/tools/install-check.sh.  It is not part of the tree's build.
 *
 * Usage: shoal-example [ENDPOINT]
 * Creates a client for ENDPOINT (default tcp://127.0.0.1:1, where nothing
 * listens) with short timeouts, calls ListTables and expects the error
 * shoal.h documents when no router can be connected: SHOAL_E_UNAVAILABLE,
 * source SHOAL_SRC_CONNECT, exception "ServiceUnavailable", message "Could not
 * connect to the endpoint URL: ...".  Exit 0 when it got exactly that.
 */
#include <shoal/shoal.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	const char *endpoint = argc > 1 ? argv[1] : "tcp://127.0.0.1:1";
	char errmsg[SH_ERRMSG_SIZE] = "";
	shoal_options opts;
	shoal_client *c;
	shoal_error err;
	char *out = NULL;
	int rc, ok;

	shoal_options_init(&opts);
	opts.connect_timeout_ms = 300;
	opts.attempt_timeout_ms = 1000;
	opts.deadline_ms = 3000;
	rc = shoal_client_new(endpoint, &opts, &c, errmsg);
	if (rc != SHOAL_OK) {
		fprintf(stderr, "shoal_client_new: %s: %s\n", shoal_strerror(rc), errmsg);
		return 1;
	}
	printf("client for %s, %u router(s) connected\n", shoal_endpoints(c), shoal_connected(c));

	rc = shoal_call_json(c, "ListTables", "{}", &out, &err);
	printf("ListTables: code %d (%s, %s), source %d, exception \"%s\", message \"%s\"\n", rc,
	       shoal_err_name(rc), shoal_strerror(rc), err.source, err.exception, err.message);
	ok = rc == SHOAL_E_UNAVAILABLE && err.code == rc && err.source == SHOAL_SRC_CONNECT &&
	     strcmp(err.exception, "ServiceUnavailable") == 0 &&
	     strcmp(err.exception, shoal_exception_name(rc)) == 0 &&
	     strstr(err.message, "Could not connect to the endpoint URL") != NULL && out == NULL;
	shoal_free(out);
	shoal_client_free(c);
	if (!ok) {
		fprintf(stderr, "expected SHOAL_E_UNAVAILABLE from SHOAL_SRC_CONNECT\n");
		return 1;
	}
	printf("ok: the documented connection error\n");
	return 0;
}
