#include "errors.h"

#include <stdio.h>

static const struct {
	const char *exception;
	const char *desc;
	const char *name;
} table[] = {
#define SH_ERR_ROW_(name, value, exc, desc) [value] = {exc, desc, #name},
    SHOAL_ERRORS(SH_ERR_ROW_)
#undef SH_ERR_ROW_
};

const char *shoal_strerror(int code)
{
	if (code < 0 || code >= SHOAL_E__COUNT || table[code].desc == NULL)
		return "unknown error";
	return table[code].desc;
}

const char *shoal_exception_name(int code)
{
	if (code < 0 || code >= SHOAL_E__COUNT || table[code].exception == NULL)
		return "InternalServerError";
	return table[code].exception;
}

const char *shoal_err_name(int code)
{
	if (code < 0 || code >= SHOAL_E__COUNT || table[code].name == NULL)
		return "SHOAL_E_UNKNOWN";
	return table[code].name;
}

int sh_errf(char *errmsg, int code, const char *fmt, ...)
{
	if (errmsg != NULL) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(errmsg, SH_ERRMSG_SIZE, fmt, ap);
		va_end(ap);
	}
	return code;
}
