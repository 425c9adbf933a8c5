/*
 * tls_engine.c -- Shoal's TLS engine for nng (contract: tls.h,
 * sh_tls_engine_register).
 *
 * nng 1.5.2 splits its TLS in two (nng/supplemental/tls/engine.h): a
 * framework (tls_common.c: the stream, a 16 KiB ring of ciphertext to send,
 * a 16 KiB buffer of ciphertext received, the aios) and an engine that turns
 * plaintext into records through the two calls nng_tls_engine_send / _recv.
 * Debian's libnng registers nng's mbedtls engine; this one replaces it for
 * the whole process (shoal-node, shoal-router) and is the same library used
 * the same way -- mbedtls with memory I/O into the framework's buffers -- plus
 * two things nng's engine does not do:
 *
 * 1. Who the peer is.  A configuration made by sh_tls_config_alloc carries
 *    the set of peers it accepts (tls_mbed.h's sh_tls_peer: nodes, routers).
 *    mbedtls's verify callback classifies the leaf certificate (after the
 *    chain checked out against the cluster CA) and marks anyone else's
 *    certificate bad, so the handshake fails with a bad_certificate alert.
 *    nng 1.5.2 passes one bit of a connection's identity from the engine to
 *    the application: NNG_OPT_TLS_VERIFIED (nng_pipe_get_bool on a pipe);
 *    on a configuration with a set of peers the bit means "the peer's
 *    certificate is a node's", which with {node, router} accepted tells the
 *    two apart (sh_tls_pipe_peer).  Without a set the bit keeps nng's
 *    meaning (the chain verified).
 *
 *    A client configuration can also name the one node it must reach: a
 *    server name (nng_tls_config_server_name) of the form "node-<id>" is
 *    that node's identity, not a host name.  It is not given to mbedtls
 *    (the certificates' SANs name hosts, not nodes), and the verify
 *    callback refuses a leaf certificate that is not node <id>'s: holding
 *    one node's key is not enough to answer at another node's address.
 *    Any other server name is a host name, as in nng's engine.
 *
 * 2. One record per SP message.  nng's SP transport sends a message as up to
 *    three pieces (8-byte length, protocol header, body) and the framework
 *    hands the engine one piece at a time; nng's engine makes each its own
 *    record (29 bytes of header, explicit nonce and tag each; three
 *    encryptions, three decryptions at the other end) and usually its own TCP
 *    send.  This engine recognises the SP stream by its first bytes (the
 *    8-byte "\0SP\0" negotiation header) and follows its framing: plaintext
 *    is gathered into one buffer and sealed as one record when a message
 *    (or the negotiation header) is complete, or when the buffer is full
 *    (REC_MAX: a record fits the framework's ring with its overhead, so it
 *    leaves in one TCP send).  Any other stream (HTTPS) is passed through
 *    piece by piece, as nng's engine does.  The buffer is allocated once per
 *    connection; nothing is allocated per record.
 *
 *    Gathering must never hold bytes the framework will not ask about again:
 *    a piece is reported sent only once it is in the buffer and, if it ended
 *    a message, sealed and handed to the framework.  When the framework's
 *    ring is full mid-record (mbedtls_ssl_write: WANT_WRITE), the call
 *    answers NNG_EAGAIN and remembers what it took; the framework calls again
 *    with the same piece when its TCP send completes (tls_do_send on the
 *    queue's head), the record is finished and the piece reported.
 *
 * Locking: nng calls every conn op with that connection's lock held (the
 * engine.h "locking theory"), config ops with the config's.  Shared state:
 * the random generator (tls_mbed.c, its own mutex) and the registration.
 */
#include "tls.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crl.h>
#include <mbedtls/x509_crt.h>
#include <nng/supplemental/tls/engine.h>

#include "alloc.h"
#include "errors.h"
#include "tls_mbed.h"

#define ENGINE_NAME "shoal-mbed"
/* Plaintext per record: with its 5-byte header, 8-byte explicit nonce and
 * 16-byte tag a record fits nng's 16 KiB send ring (NNG_TLS_MAX_SEND_SIZE)
 * whole. */
#define REC_MAX   (16384u - 64)
#define OWN_MAX   2 /* own_cert pairs per configuration */
#define SP_NEGO   8 /* the SP negotiation header */
#define SP_LENLEN 8 /* an SP message's length prefix */

struct nng_tls_engine_config {
	mbedtls_ssl_config conf;
	mbedtls_x509_crt ca;
	mbedtls_x509_crl crl;
	mbedtls_x509_crt own[OWN_MAX];
	mbedtls_pk_context key[OWN_MAX];
	unsigned n_own;
	char *server_name;
	uint64_t node;  /* the node server_name names ("node-<id>"), else 0 */
	unsigned peers; /* SH_TLS_PEERS mask; 0: any certificate the CA signed */
};

enum { FR_UNKNOWN, FR_PASS, FR_SP };

struct nng_tls_engine_conn {
	void *tls; /* the framework's connection (nng_tls_engine_send/_recv) */
	nng_tls_engine_config *cfg;
	mbedtls_ssl_context ssl;
	sh_tls_peer peer;
	/* Gathering (FR_SP): plaintext not yet sealed, pend[pend_off..len) of
	 * a record mbedtls is still writing (blocked). */
	int framing;
	uint8_t *pend;
	size_t pend_len, pend_off;
	bool blocked;  /* a seal returned WANT_WRITE: the next send finishes it */
	size_t taken;  /* what that call took of its piece */
	unsigned nego; /* bytes of the negotiation header still to come */
	unsigned lenb; /* bytes of the current length prefix seen */
	uint64_t mlen; /* the length being read */
	uint64_t left; /* bytes of the current message still to come */
};

static void (*engine_log)(const char *msg);
static atomic_bool engine_on;

/* The set of peers for the configuration nng_tls_config_alloc is making on
 * this thread (sh_tls_config_alloc), and whether config_init took it. */
static _Thread_local bool next_set, next_taken;
static _Thread_local unsigned next_peers;

static int nng_err(int rv)
{
	switch (rv) {
	case MBEDTLS_ERR_SSL_WANT_READ:
	case MBEDTLS_ERR_SSL_WANT_WRITE:
		return NNG_EAGAIN;
	case MBEDTLS_ERR_SSL_NO_CLIENT_CERTIFICATE:
	case MBEDTLS_ERR_SSL_CA_CHAIN_REQUIRED:
	case MBEDTLS_ERR_SSL_PEER_VERIFY_FAILED:
	case MBEDTLS_ERR_SSL_NO_USABLE_CIPHERSUITE:
	case MBEDTLS_ERR_X509_CERT_VERIFY_FAILED:
		return NNG_EPEERAUTH;
	case MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY:
		return NNG_ECONNREFUSED;
	case MBEDTLS_ERR_SSL_ALLOC_FAILED:
		return NNG_ENOMEM;
	case MBEDTLS_ERR_SSL_TIMEOUT:
		return NNG_ETIMEDOUT;
	case MBEDTLS_ERR_SSL_CONN_EOF:
		return NNG_ECLOSED;
	default:
		return NNG_ECRYPTO;
	}
}

/* ------------------------------------------------------------------------ */
/* mbedtls's I/O: the framework's buffers                                    */
/* ------------------------------------------------------------------------ */

static int net_send(void *tls, const unsigned char *buf, size_t len)
{
	size_t n = len;
	int rv = nng_tls_engine_send(tls, buf, &n);
	if (rv == 0)
		return (int)n;
	return rv == NNG_EAGAIN ? MBEDTLS_ERR_SSL_WANT_WRITE : MBEDTLS_ERR_NET_SEND_FAILED;
}

static int net_recv(void *tls, unsigned char *buf, size_t len)
{
	size_t n = len;
	int rv = nng_tls_engine_recv(tls, buf, &n);
	if (rv == 0)
		return (int)n;
	return rv == NNG_EAGAIN ? MBEDTLS_ERR_SSL_WANT_READ : MBEDTLS_ERR_NET_RECV_FAILED;
}

/* ------------------------------------------------------------------------ */
/* Connections                                                               */
/* ------------------------------------------------------------------------ */

static int conn_init(nng_tls_engine_conn *ec, void *tls, nng_tls_engine_config *cfg)
{
	ec->tls = tls;
	ec->cfg = cfg;
	mbedtls_ssl_init(&ec->ssl);
	mbedtls_ssl_set_bio(&ec->ssl, tls, net_send, net_recv, NULL);
	int rv = mbedtls_ssl_setup(&ec->ssl, &cfg->conf);
	/* (A node's name is checked by verify_peer, not against SANs.) */
	if (rv == 0 && cfg->server_name != NULL && cfg->node == 0)
		rv = mbedtls_ssl_set_hostname(&ec->ssl, cfg->server_name);
	return rv == 0 ? 0 : nng_err(rv);
}

static void conn_fini(nng_tls_engine_conn *ec)
{
	mbedtls_ssl_free(&ec->ssl);
	sh_free(ec->pend);
	ec->pend = NULL;
}

static void conn_close(nng_tls_engine_conn *ec)
{
	/* As nng's engine: a close_notify if it fits, no matter if not. */
	(void)mbedtls_ssl_close_notify(&ec->ssl);
}

static int conn_handshake(nng_tls_engine_conn *ec)
{
	int rv = mbedtls_ssl_handshake(&ec->ssl);
	if (rv != 0)
		return nng_err(rv);
	ec->peer = sh_tls_cert_peer(mbedtls_ssl_get_peer_cert(&ec->ssl), NULL);
	return 0;
}

static int conn_recv(nng_tls_engine_conn *ec, uint8_t *buf, size_t *szp)
{
	int rv = mbedtls_ssl_read(&ec->ssl, buf, *szp);
	if (rv < 0)
		return nng_err(rv);
	*szp = (size_t)rv;
	return 0;
}

/* Seals what is gathered: one record (REC_MAX fits mbedtls's maximum
 * fragment).  NNG_EAGAIN leaves it to be finished by the next call, with
 * the same arguments as mbedtls requires (pend is not touched meanwhile). */
static int seal(nng_tls_engine_conn *ec)
{
	while (ec->pend_off < ec->pend_len) {
		int rv = mbedtls_ssl_write(&ec->ssl, ec->pend + ec->pend_off,
		                           ec->pend_len - ec->pend_off);
		if (rv < 0)
			return nng_err(rv);
		ec->pend_off += (size_t)rv;
	}
	ec->pend_off = ec->pend_len = 0;
	return 0;
}

static size_t min3(size_t a, size_t b, uint64_t c)
{
	size_t m = a < b ? a : b;
	return (uint64_t)m < c ? m : (size_t)c;
}

/* Takes the bytes of buf up to the next boundary of the SP stream (the end
 * of the negotiation header, of a message, or of the buffer's room) into
 * pend; *boundary says whether one was reached (seal now). */
static size_t take(nng_tls_engine_conn *ec, const uint8_t *buf, size_t len, bool *boundary)
{
	size_t room = REC_MAX - ec->pend_len, n;
	*boundary = false;
	if (ec->nego > 0) {
		n = min3(len, room, ec->nego);
		ec->nego -= (unsigned)n;
		*boundary = ec->nego == 0;
	} else if (ec->lenb < SP_LENLEN) {
		n = min3(len, room, SP_LENLEN - ec->lenb);
		for (size_t i = 0; i < n; i++)
			ec->mlen = ec->mlen << 8 | buf[i];
		ec->lenb += (unsigned)n;
		if (ec->lenb == SP_LENLEN) {
			ec->left = ec->mlen;
			if (ec->left == 0) /* an empty message ends here */
				ec->lenb = 0, ec->mlen = 0, *boundary = true;
		}
	} else {
		n = min3(len, room, ec->left);
		ec->left -= n;
		if (ec->left == 0)
			ec->lenb = 0, ec->mlen = 0, *boundary = true;
	}
	memcpy(ec->pend + ec->pend_len, buf, n);
	ec->pend_len += n;
	if (ec->pend_len == REC_MAX)
		*boundary = true;
	return n;
}

/* A connection's first piece decides: an SP stream is gathered, anything
 * else passed through. */
static int framing_of(nng_tls_engine_conn *ec, const uint8_t *buf, size_t len)
{
	if (len < SP_NEGO || memcmp(buf, "\0SP\0", 4) != 0)
		return FR_PASS;
	ec->pend = sh_malloc(REC_MAX);
	if (ec->pend == NULL)
		return FR_PASS;
	ec->nego = SP_NEGO;
	return FR_SP;
}

static int conn_send(nng_tls_engine_conn *ec, const uint8_t *buf, size_t *szp)
{
	if (ec->framing == FR_UNKNOWN)
		ec->framing = framing_of(ec, buf, *szp);
	if (ec->framing == FR_PASS) {
		int rv = mbedtls_ssl_write(&ec->ssl, buf, *szp);
		if (rv < 0)
			return nng_err(rv);
		*szp = (size_t)rv;
		return 0;
	}
	if (ec->blocked) { /* the same piece again: finish its record */
		int rv = seal(ec);
		if (rv != 0)
			return rv;
		ec->blocked = false;
		*szp = ec->taken;
		return 0;
	}
	size_t off = 0;
	while (off < *szp) {
		bool boundary;
		off += take(ec, buf + off, *szp - off, &boundary);
		if (!boundary)
			continue;
		int rv = seal(ec);
		if (rv == NNG_EAGAIN) {
			ec->blocked = true;
			ec->taken = off;
		}
		if (rv != 0)
			return rv;
	}
	*szp = off;
	return 0;
}

static bool conn_verified(nng_tls_engine_conn *ec)
{
	if (mbedtls_ssl_get_verify_result(&ec->ssl) != 0)
		return false;
	return ec->cfg->peers == 0 || ec->peer == SH_TLS_PEER_NODE;
}

/* ------------------------------------------------------------------------ */
/* Configurations                                                            */
/* ------------------------------------------------------------------------ */

/* Whose a certificate of holder p is. */
static const char *peer_name(sh_tls_peer p)
{
	return p == SH_TLS_PEER_NODE     ? "a node's"
	       : p == SH_TLS_PEER_ROUTER ? "the routers'"
	                                 : "no member's";
}

/* Tells log (when set) about a refused leaf certificate: its subject and
 * what was wanted. */
static void refused(const mbedtls_x509_crt *crt, const char *is, const char *wanted)
{
	if (engine_log == NULL)
		return;
	char dn[256], msg[512];
	if (mbedtls_x509_dn_gets(dn, sizeof(dn), &crt->subject) < 0)
		snprintf(dn, sizeof(dn), "?");
	snprintf(msg, sizeof(msg), "TLS: refused a peer whose certificate (%s) is %s: %s", dn, is,
	         wanted);
	engine_log(msg);
}

/* mbedtls's verify callback, per certificate of the peer's chain: the
 * leaf's holder must be one this configuration accepts and, when the
 * configuration names a node, that node. */
static int verify_peer(void *arg, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
	nng_tls_engine_config *cfg = arg;
	if (depth != 0 || (cfg->peers == 0 && cfg->node == 0))
		return 0;
	uint64_t id;
	sh_tls_peer p = sh_tls_cert_peer(crt, &id);
	char is[64], wanted[128];
	if (cfg->peers != 0 && !(cfg->peers & SH_TLS_PEERS(p))) {
		snprintf(is, sizeof(is), "%s", peer_name(p));
		snprintf(wanted, sizeof(wanted), "this %s takes %s%s only",
		         cfg->conf.endpoint == MBEDTLS_SSL_IS_SERVER ? "port" : "connection",
		         (cfg->peers & SH_TLS_PEERS(SH_TLS_PEER_NODE)) ? "nodes" : "",
		         (cfg->peers & SH_TLS_PEERS(SH_TLS_PEER_ROUTER)) ? " and routers" : "");
	} else if (cfg->node != 0 && id != cfg->node) {
		snprintf(is, sizeof(is), "not node %" PRIu64 "'s", cfg->node);
		snprintf(wanted, sizeof(wanted), "this connection is for node %" PRIu64, cfg->node);
	} else {
		return 0;
	}
	/* (A chain that did not verify is refused anyway: say nothing.) */
	if (*flags == 0)
		refused(crt, is, wanted);
	*flags |= MBEDTLS_X509_BADCERT_OTHER;
	return 0;
}

static void config_fini(nng_tls_engine_config *cfg)
{
	mbedtls_ssl_config_free(&cfg->conf);
	mbedtls_x509_crt_free(&cfg->ca);
	mbedtls_x509_crl_free(&cfg->crl);
	for (unsigned i = 0; i < OWN_MAX; i++) {
		mbedtls_x509_crt_free(&cfg->own[i]);
		mbedtls_pk_free(&cfg->key[i]);
	}
	sh_free(cfg->server_name);
	cfg->server_name = NULL;
}

static int config_init(nng_tls_engine_config *cfg, nng_tls_mode mode)
{
	mbedtls_ssl_config_init(&cfg->conf);
	mbedtls_x509_crt_init(&cfg->ca);
	mbedtls_x509_crl_init(&cfg->crl);
	for (unsigned i = 0; i < OWN_MAX; i++) {
		mbedtls_x509_crt_init(&cfg->own[i]);
		mbedtls_pk_init(&cfg->key[i]);
	}
	bool server = mode == NNG_TLS_MODE_SERVER;
	int rv = sh_tls_conf_defaults(&cfg->conf,
	                              server ? MBEDTLS_SSL_IS_SERVER : MBEDTLS_SSL_IS_CLIENT);
	if (rv != 0) {
		config_fini(cfg);
		return nng_err(rv);
	}
	/* nng's defaults: a server asks nothing of its clients, a client
	 * requires the server's certificate. */
	mbedtls_ssl_conf_authmode(&cfg->conf,
	                          server ? MBEDTLS_SSL_VERIFY_NONE : MBEDTLS_SSL_VERIFY_REQUIRED);
	mbedtls_ssl_conf_verify(&cfg->conf, verify_peer, cfg);
	if (next_set) {
		cfg->peers = next_peers;
		next_set = false;
		next_taken = true;
	}
	return 0;
}

static int config_server(nng_tls_engine_config *cfg, const char *name)
{
	size_t len = strlen(name);
	char *dup = sh_malloc(len + 1);
	if (dup == NULL)
		return NNG_ENOMEM;
	memcpy(dup, name, len + 1);
	sh_free(cfg->server_name);
	cfg->server_name = dup;
	(void)sh_tls_name_peer(name, len, &cfg->node); /* 0 unless a node's name */
	return 0;
}

static int config_auth(nng_tls_engine_config *cfg, nng_tls_auth_mode mode)
{
	switch (mode) {
	case NNG_TLS_AUTH_MODE_NONE:
		mbedtls_ssl_conf_authmode(&cfg->conf, MBEDTLS_SSL_VERIFY_NONE);
		return 0;
	case NNG_TLS_AUTH_MODE_OPTIONAL:
		mbedtls_ssl_conf_authmode(&cfg->conf, MBEDTLS_SSL_VERIFY_OPTIONAL);
		return 0;
	case NNG_TLS_AUTH_MODE_REQUIRED:
		mbedtls_ssl_conf_authmode(&cfg->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
		return 0;
	}
	return NNG_EINVAL;
}

/* PEM text, NUL-terminated (the length mbedtls wants counts the NUL). */
static int config_ca_chain(nng_tls_engine_config *cfg, const char *certs, const char *crl)
{
	int rv = mbedtls_x509_crt_parse(&cfg->ca, (const unsigned char *)certs, strlen(certs) + 1);
	if (rv == 0 && crl != NULL)
		rv = mbedtls_x509_crl_parse(&cfg->crl, (const unsigned char *)crl, strlen(crl) + 1);
	if (rv != 0)
		return nng_err(rv);
	mbedtls_ssl_conf_ca_chain(&cfg->conf, &cfg->ca, crl != NULL ? &cfg->crl : NULL);
	return 0;
}

static int config_own_cert(nng_tls_engine_config *cfg, const char *cert, const char *key,
                           const char *pass)
{
	if (cfg->n_own == OWN_MAX)
		return NNG_ENOTSUP;
	unsigned i = cfg->n_own;
	int rv =
	    mbedtls_x509_crt_parse(&cfg->own[i], (const unsigned char *)cert, strlen(cert) + 1);
	if (rv == 0)
		rv = mbedtls_pk_parse_key(&cfg->key[i], (const unsigned char *)key, strlen(key) + 1,
		                          (const unsigned char *)pass,
		                          pass != NULL ? strlen(pass) : 0);
	if (rv == 0)
		rv = mbedtls_ssl_conf_own_cert(&cfg->conf, &cfg->own[i], &cfg->key[i]);
	if (rv != 0) {
		mbedtls_x509_crt_free(&cfg->own[i]);
		mbedtls_pk_free(&cfg->key[i]);
		mbedtls_x509_crt_init(&cfg->own[i]);
		mbedtls_pk_init(&cfg->key[i]);
		return nng_err(rv);
	}
	cfg->n_own++;
	return 0;
}

/* mbedtls 2.28 speaks up to TLS 1.2: a range above it is refused, 1.3 as
 * the maximum means 1.2 (as nng's engine does). */
static int config_version(nng_tls_engine_config *cfg, nng_tls_version lo, nng_tls_version hi)
{
	if (lo > hi || lo > NNG_TLS_1_2)
		return NNG_ENOTSUP;
	int minor = lo == NNG_TLS_1_0   ? MBEDTLS_SSL_MINOR_VERSION_1
	            : lo == NNG_TLS_1_1 ? MBEDTLS_SSL_MINOR_VERSION_2
	                                : MBEDTLS_SSL_MINOR_VERSION_3;
	int max = hi == NNG_TLS_1_0   ? MBEDTLS_SSL_MINOR_VERSION_1
	          : hi == NNG_TLS_1_1 ? MBEDTLS_SSL_MINOR_VERSION_2
	                              : MBEDTLS_SSL_MINOR_VERSION_3;
	mbedtls_ssl_conf_min_version(&cfg->conf, MBEDTLS_SSL_MAJOR_VERSION_3, minor);
	mbedtls_ssl_conf_max_version(&cfg->conf, MBEDTLS_SSL_MAJOR_VERSION_3, max);
	return 0;
}

static nng_tls_engine_config_ops config_ops = {
    .size = sizeof(nng_tls_engine_config),
    .init = config_init,
    .fini = config_fini,
    .server = config_server,
    .auth = config_auth,
    .ca_chain = config_ca_chain,
    .own_cert = config_own_cert,
    .version = config_version,
};

static nng_tls_engine_conn_ops conn_ops = {
    .size = sizeof(nng_tls_engine_conn),
    .init = conn_init,
    .fini = conn_fini,
    .close = conn_close,
    .handshake = conn_handshake,
    .recv = conn_recv,
    .send = conn_send,
    .verified = conn_verified,
};

static const nng_tls_engine engine = {
    .version = NNG_TLS_ENGINE_VERSION,
    .config_ops = &config_ops,
    .conn_ops = &conn_ops,
    .name = ENGINE_NAME,
    .description = "Shoal's engine over " MBEDTLS_VERSION_STRING_FULL,
    .fips_mode = false,
};

/* ------------------------------------------------------------------------ */
/* Registration and use                                                      */
/* ------------------------------------------------------------------------ */

int sh_tls_engine_register(void (*log)(const char *msg), char *errmsg)
{
	engine_log = log;
	/* nng registers its own engine when it initialises (on first use):
	 * make that happen first, or it would replace ours. */
	(void)nng_tls_engine_name();
	int rv = nng_tls_engine_register(&engine);
	if (rv != 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL,
		               "TLS: nng_tls_engine_register: %s (nng's engine ABI %d)",
		               nng_strerror(rv), (int)NNG_TLS_ENGINE_VERSION);
	if (strcmp(nng_tls_engine_name(), ENGINE_NAME) != 0)
		return sh_errf(errmsg, SHOAL_E_INTERNAL, "TLS: nng kept its engine (%s)",
		               nng_tls_engine_name());
	atomic_store(&engine_on, true);
	return SHOAL_OK;
}

bool sh_tls_engine_ours(void)
{
	return atomic_load(&engine_on) && strcmp(nng_tls_engine_name(), ENGINE_NAME) == 0;
}

int sh_tls_config_alloc(nng_tls_config **out, nng_tls_mode mode, unsigned peers)
{
	next_set = true;
	next_peers = peers;
	next_taken = false;
	int rv = nng_tls_config_alloc(out, mode);
	bool taken = next_taken;
	next_set = next_taken = false;
	if (rv == 0 && peers != 0 && !taken) { /* another engine: it cannot check */
		nng_tls_config_free(*out);
		*out = NULL;
		return NNG_ENOTSUP;
	}
	return rv;
}

sh_tls_peer sh_tls_pipe_peer(nng_pipe p)
{
	bool node;
	int rv = nng_pipe_get_bool(p, NNG_OPT_TLS_VERIFIED, &node);
	if (rv == NNG_ENOTSUP)
		return SH_TLS_PEER_PLAIN;
	if (rv != 0)
		return SH_TLS_PEER_OTHER;
	return node ? SH_TLS_PEER_NODE : SH_TLS_PEER_ROUTER;
}
