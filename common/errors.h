/*
 * Shoal's one error enum.
 *
 * Every fallible function in Shoal returns one of these codes (SHOAL_OK is 0)
 * and, where it can say more, writes a human message into a caller-provided
 * buffer of SH_ERRMSG_SIZE bytes.  LMDB, nng, raft and errno codes are
 * converted where they are received and never travel past that module.
 *
 * The table below is the single source of truth: the code, its numeric value
 * (fixed forever: it is the wire value of proto's Status enum, and a unit test
 * checks that the two agree), the DynamoDB exception name a client sees, and a
 * short description.  Internal codes (NOT_LEADER, WRONG_EPOCH, ...) are
 * handled by the router and never reach a client; if one escapes it is
 * reported as InternalServerError.
 */
#ifndef SHOAL_COMMON_ERRORS_H
#define SHOAL_COMMON_ERRORS_H

#include <stdarg.h>
#include <stddef.h>

/* X(name, value, exception name, description) */
#define SHOAL_ERRORS(X)                                                                            \
	X(SHOAL_OK, 0, "", "success")                                                              \
	X(SHOAL_E_VALIDATION, 1, "ValidationException", "invalid request")                         \
	X(SHOAL_E_CONDITION_FAILED, 2, "ConditionalCheckFailedException",                          \
	  "the conditional request failed")                                                        \
	X(SHOAL_E_NOT_FOUND, 3, "ResourceNotFoundException", "requested resource not found")       \
	X(SHOAL_E_IN_USE, 4, "ResourceInUseException", "resource in use")                          \
	X(SHOAL_E_THROUGHPUT, 5, "ProvisionedThroughputExceededException", "throughput exceeded")  \
	X(SHOAL_E_TXN_CANCELED, 6, "TransactionCanceledException", "transaction cancelled")        \
	X(SHOAL_E_TXN_CONFLICT, 7, "TransactionConflictException", "transaction conflict")         \
	X(SHOAL_E_COLLECTION_SIZE, 8, "ItemCollectionSizeLimitExceededException",                  \
	  "item collection size limit exceeded")                                                   \
	X(SHOAL_E_LIMIT_EXCEEDED, 9, "LimitExceededException", "limit exceeded")                   \
	X(SHOAL_E_IDEMPOTENT_MISMATCH, 10, "IdempotentParameterMismatchException",                 \
	  "idempotent parameter mismatch")                                                         \
	X(SHOAL_E_REQUEST_LIMIT, 11, "RequestLimitExceeded", "request limit exceeded")             \
	X(SHOAL_E_UNKNOWN_OPERATION, 12, "UnknownOperationException", "unknown operation")         \
	X(SHOAL_E_SERIALIZATION, 13, "SerializationException", "malformed request")                \
	X(SHOAL_E_INTERNAL, 14, "InternalServerError", "internal error")                           \
	X(SHOAL_E_NOMEM, 15, "InternalServerError", "out of memory")                               \
	X(SHOAL_E_IO, 16, "InternalServerError", "storage I/O error")                              \
	X(SHOAL_E_FULL, 17, "InternalServerError", "storage is full")                              \
	X(SHOAL_E_UNAVAILABLE, 18, "ServiceUnavailable", "service unavailable")                    \
	X(SHOAL_E_NOT_LEADER, 19, "InternalServerError", "not the leader (internal)")              \
	X(SHOAL_E_WRONG_EPOCH, 20, "InternalServerError", "wrong partition map epoch (internal)")  \
	X(SHOAL_E_TIMEOUT, 21, "InternalServerError", "request timed out")                         \
	X(SHOAL_E_OUTCOME_UNKNOWN, 22, "InternalServerError",                                      \
	  "the write may or may not have been applied")                                            \
	X(SHOAL_E_TXN_IN_PROGRESS, 23, "TransactionInProgressException",                           \
	  "a transaction with this token is in progress")                                          \
	X(SHOAL_E_ACCESS_DENIED, 24, "AccessDeniedException", "access denied")                     \
	X(SHOAL_E_AUTH_MISSING, 25, "MissingAuthenticationTokenException",                         \
	  "the request is not signed")                                                             \
	X(SHOAL_E_AUTH_INCOMPLETE, 26, "IncompleteSignatureException",                             \
	  "the request's signature is malformed")                                                  \
	X(SHOAL_E_AUTH_UNRECOGNIZED, 27, "UnrecognizedClientException", "unknown access key id")   \
	X(SHOAL_E_AUTH_SIGNATURE, 28, "InvalidSignatureException",                                 \
	  "the request's signature does not match")                                                \
	X(SHOAL_E_EXPIRED_ITERATOR, 29, "ExpiredIteratorException", "shard iterator expired")      \
	X(SHOAL_E_TRIMMED, 30, "TrimmedDataAccessException", "stream records trimmed")            \
	X(SHOAL_E_WRONG_GROUP, 31, "InternalServerError",                                         \
	  "partition not served by this group (internal)")

enum shoal_err {
#define SH_ERR_ENUM_(name, value, exc, desc) name = value,
	SHOAL_ERRORS(SH_ERR_ENUM_)
#undef SH_ERR_ENUM_
	    SHOAL_E__COUNT
};

/* Size of every errmsg buffer in Shoal, including the terminating NUL. */
#define SH_ERRMSG_SIZE 512

/* Short description of a code ("invalid request"); never NULL. */
const char *shoal_strerror(int code);

/* DynamoDB exception name of a code ("ValidationException"); "" for SHOAL_OK;
 * "InternalServerError" for unknown codes. Never NULL. */
const char *shoal_exception_name(int code);

/* Enum identifier of a code ("SHOAL_E_VALIDATION"), for logs and tests. */
const char *shoal_err_name(int code);

/* Formats a message into errmsg (SH_ERRMSG_SIZE bytes; NULL allowed) and returns
 * code, so that failing paths read: return sh_errf(errmsg, SHOAL_E_VALIDATION, ...). */
int sh_errf(char *errmsg, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
