/*
 * server.c -- the client endpoint: one nng REP socket, W worker threads.
 *
 * Each worker owns a REP context and an arena and loops: blocking receive
 * (nng_ctx_recv + nng_aio_wait), rt_handle, send the answer, reset the
 * arena.  Contexts let W requests -- from one client connection or many --
 * be in progress at once, each on its own thread, so a slow scatter-gather
 * or a retry backoff holds up only its own request.  Handlers block on node
 * calls; there are no callbacks and no thread hand-offs in the request path.
 *
 * Stopping: the listener closes first (no new connections), the workers
 * finish what they are doing (bounded by the drain time), then closing the
 * socket makes every blocked receive fail with NNG_ECLOSED and the workers
 * return.
 */
#include <string.h>

#include "common/alloc.h"
#include "router/router.h"

#include <nng/protocol/reqrep0/rep.h>

#define RT_RECVMAXSZ (16u * 1024 * 1024)
/* An arena that grew past this is freed instead of kept for the next request. */
#define RT_ARENA_KEEP (4u * 1024 * 1024)

static void *worker(void *arg)
{
	rt_server *s = arg;
	nng_ctx ctx;
	nng_aio *aio;
	int rv = nng_ctx_open(&ctx, s->sock);
	if (rv != 0) {
		rt_log("worker: nng_ctx_open: %s", nng_strerror(rv));
		return NULL;
	}
	if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0) {
		rt_log("worker: nng_aio_alloc: %s", nng_strerror(rv));
		nng_ctx_close(ctx);
		return NULL;
	}
	sh_arena a;
	sh_arena_init(&a);
	for (;;) {
		nng_ctx_recv(ctx, aio);
		nng_aio_wait(aio);
		rv = nng_aio_result(aio);
		if (rv == NNG_ECLOSED)
			break;
		if (rv != 0)
			continue;
		atomic_fetch_add(&s->busy, 1);
		nng_msg *m = nng_aio_get_msg(aio);
		nng_aio_set_msg(aio, NULL);
		uint8_t *ans;
		size_t ans_len;
		int rc = rt_handle(s->rt, &a, nng_msg_body(m), nng_msg_len(m), &ans, &ans_len);
		if (rc == SHOAL_OK) {
			nng_msg_clear(m);
			rc = nng_msg_append(m, ans, ans_len) == 0 ? SHOAL_OK : SHOAL_E_NOMEM;
		}
		if (rc != SHOAL_OK) {
			rt_log("worker: no memory to answer a request; dropped");
			nng_msg_free(m);
		} else {
			nng_aio_set_msg(aio, m);
			nng_ctx_send(ctx, aio);
			nng_aio_wait(aio);
			if (nng_aio_result(aio) != 0) {
				nng_msg_free(nng_aio_get_msg(aio));
				nng_aio_set_msg(aio, NULL);
			}
		}
		if (a.used > RT_ARENA_KEEP) {
			sh_arena_fini(&a);
			sh_arena_init(&a);
		} else {
			sh_arena_reset(&a);
		}
		atomic_fetch_sub(&s->busy, 1);
	}
	sh_arena_fini(&a);
	nng_aio_free(aio);
	nng_ctx_close(ctx);
	return NULL;
}

int rt_server_start(rt_server *s, rt_router *rt, const char *url, char *errmsg)
{
	memset(s, 0, sizeof(*s));
	s->rt = rt;
	atomic_init(&s->busy, 0);
	int rv = nng_rep0_open(&s->sock);
	if (rv != 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "nng_rep0_open: %s", nng_strerror(rv));
	s->open = true;
	if ((rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, RT_RECVMAXSZ)) != 0 ||
	    (rv = nng_listen(s->sock, url, &s->listener, 0)) != 0) {
		sh_errf(errmsg, SHOAL_E_INTERNAL, "listen %s: %s", url, nng_strerror(rv));
		goto err_after_socket;
	}
	s->threads = sh_calloc(rt->opt.workers, sizeof(*s->threads));
	if (s->threads == NULL) {
		sh_errf(errmsg, SHOAL_E_NOMEM, "out of memory");
		goto err_after_socket;
	}
	for (uint32_t i = 0; i < rt->opt.workers; i++) {
		if (pthread_create(&s->threads[i], NULL, worker, s) != 0) {
			sh_errf(errmsg, SHOAL_E_INTERNAL, "cannot start worker thread %u", i);
			goto err_after_threads;
		}
		s->n_threads++;
	}
	return SHOAL_OK;

err_after_threads:
	nng_close(s->sock);
	s->open = false;
	for (uint32_t i = 0; i < s->n_threads; i++)
		pthread_join(s->threads[i], NULL);
	sh_free(s->threads);
	s->threads = NULL;
	return SHOAL_E_INTERNAL;
err_after_socket:
	nng_close(s->sock);
	s->open = false;
	return SHOAL_E_INTERNAL;
}

void rt_server_stop(rt_server *s, uint32_t drain_ms)
{
	if (!s->open)
		return;
	nng_listener_close(s->listener);
	int64_t until = rt_now_ms() + drain_ms;
	while (atomic_load(&s->busy) > 0 && rt_now_ms() < until)
		nng_msleep(10);
	nng_close(s->sock);
	s->open = false;
	for (uint32_t i = 0; i < s->n_threads; i++)
		pthread_join(s->threads[i], NULL);
	sh_free(s->threads);
	s->threads = NULL;
	s->n_threads = 0;
}
