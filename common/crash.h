/*
 * crash.h -- a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) writes
 * what happened and the stack to a log before the process dies, as Redis
 * does, so that a crash in the field leaves more than a vanished pid.
 */
#ifndef SHOAL_CRASH_H
#define SHOAL_CRASH_H

/* Installs the handler (once, before threads start; not in sanitizer
 * builds, whose own handler reports better).  The report goes to fd, marked
 * with `who` ("shoal-node 3").  Addresses are printed as binary(+offset):
 * `addr2line -f -e <binary> <offset>` names the function and line. */
void sh_crash_install(int fd, const char *who);

#endif
