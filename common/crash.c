/*
 * crash.c -- see crash.h.  The handler runs on its own stack (a stack
 * overflow is a SIGSEGV too) and uses only write(2), backtrace(3) --
 * preloaded at install time, since its first call may allocate -- and
 * backtrace_symbols_fd(3), then restores the default action and re-raises
 * the signal, so the process still dies of it (core dump, exit status).
 */
#include "common/crash.h"

#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SH_CRASH_SANITIZED 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SH_CRASH_SANITIZED 1
#endif
#endif

#ifndef SH_CRASH_SANITIZED
static int crash_fd = 2;
static char crash_who[64];

static void put(const char *s)
{
	size_t n = strlen(s);
	while (n > 0) {
		ssize_t w = write(crash_fd, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void put_hex(uintptr_t v)
{
	char buf[2 + 2 * sizeof(v) + 1];
	char *p = buf + sizeof(buf) - 1;
	*p = '\0';
	do {
		*--p = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v != 0);
	*--p = 'x';
	*--p = '0';
	put(p);
}

static void put_dec(long v)
{
	char buf[24];
	char *p = buf + sizeof(buf) - 1;
	*p = '\0';
	unsigned long u = v < 0 ? (unsigned long)-v : (unsigned long)v;
	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (v < 0)
		*--p = '-';
	put(p);
}

static void on_crash(int sig, siginfo_t *si, void *uctx)
{
	(void)uctx;
	put("\n=== ");
	put(crash_who);
	put(" crashed: signal ");
	put_dec(sig);
	put(" (");
	put(strsignal(sig) != NULL ? strsignal(sig) : "?");
	put("), fault address ");
	put_hex((uintptr_t)si->si_addr);
	put(", thread ");
	put_dec((long)gettid());
	put(" ===\n");
	void *frames[64];
	int n = backtrace(frames, 64);
	backtrace_symbols_fd(frames, n, crash_fd);
	put("=== end of stack (addr2line -f -e <binary> <offset>) ===\n");
	signal(sig, SIG_DFL);
	raise(sig);
}
#endif

void sh_crash_install(int fd, const char *who)
{
#ifdef SH_CRASH_SANITIZED
	(void)fd;
	(void)who;
#else
	crash_fd = fd;
	size_t n = strlen(who);
	if (n >= sizeof(crash_who))
		n = sizeof(crash_who) - 1;
	memcpy(crash_who, who, n);
	crash_who[n] = '\0';
	void *warm[2];
	(void)backtrace(warm, 2); /* loads libgcc now, not in the handler */
	static char alt[64 * 1024];
	stack_t ss = {.ss_sp = alt, .ss_size = sizeof(alt), .ss_flags = 0};
	(void)sigaltstack(&ss, NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_crash;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		(void)sigaction(sigs[i], &sa, NULL);
#endif
}
