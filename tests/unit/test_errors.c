/* The error table: names, exception names, formatting. */
#include <check.h>
#include <string.h>

#include "common/errors.h"
#include "tests/lib/testlib.h"

START_TEST(test_exception_names)
{
	ck_assert_str_eq(shoal_exception_name(SHOAL_E_VALIDATION), "ValidationException");
	ck_assert_str_eq(shoal_exception_name(SHOAL_E_CONDITION_FAILED),
	                 "ConditionalCheckFailedException");
	ck_assert_str_eq(shoal_exception_name(SHOAL_E_NOT_FOUND), "ResourceNotFoundException");
	ck_assert_str_eq(shoal_exception_name(SHOAL_E_NOMEM), "InternalServerError");
	ck_assert_str_eq(shoal_exception_name(9999), "InternalServerError");
	ck_assert_str_eq(shoal_exception_name(-1), "InternalServerError");
	ck_assert_str_eq(shoal_err_name(SHOAL_E_IO), "SHOAL_E_IO");
	for (int c = 0; c < SHOAL_E__COUNT; c++) {
		ck_assert_ptr_nonnull(shoal_strerror(c));
		ck_assert_int_gt((int)strlen(shoal_strerror(c)), 0);
		if (c != SHOAL_OK)
			ck_assert_int_gt((int)strlen(shoal_exception_name(c)), 0);
	}
}
END_TEST

START_TEST(test_errf)
{
	char msg[SH_ERRMSG_SIZE];
	ck_assert_int_eq(sh_errf(msg, SHOAL_E_VALIDATION, "bad %s %d", "thing", 7),
	                 SHOAL_E_VALIDATION);
	ck_assert_str_eq(msg, "bad thing 7");
	ck_assert_int_eq(sh_errf(NULL, SHOAL_E_IO, "x"), SHOAL_E_IO);
	char big[2 * SH_ERRMSG_SIZE];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	sh_errf(msg, SHOAL_E_IO, "%s", big);
	ck_assert_uint_eq(strlen(msg), SH_ERRMSG_SIZE - 1);
}
END_TEST

static Suite *errors_suite(void)
{
	Suite *s = suite_create("errors");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_exception_names);
	tcase_add_test(tc, test_errf);
	suite_add_tcase(s, tc);
	return s;
}

TL_MAIN(errors_suite)
