/*
 * cli.c -- main() of `shoal`, the command line (see cli_int.h and
 * cli_main.c).  Everything else lives in cli_*.c so that tests can run the
 * command line as a function with their own streams and a fake service.
 */
#include <stdlib.h>

#include "client/cli_int.h"

int main(int argc, char **argv)
{
	/* Shoal's TLS engine, as the router's and the nodes' (one record per
	 * message); should it fail, nng's own serves as well. */
	(void)shoal_tls_engine_install(NULL);
	cli_env env = {
	    .out = stdout,
	    .err = stderr,
	    .endpoint_env = getenv("SHOAL_ENDPOINT"),
	    .max_attempts_env = getenv("SHOAL_MAX_ATTEMPTS"),
	    .aws_max_attempts_env = getenv("AWS_MAX_ATTEMPTS"),
	    .in_fd = 0,
	    .call = NULL,
	    .call_ctx = NULL,
	};
	return cli_main(&env, argc, argv);
}
