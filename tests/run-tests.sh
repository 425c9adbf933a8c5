#!/usr/bin/env bash
# Runs every unit test binary in BUILD/tests (or the ones named) and closes
# with one summary line "N passed, N failed" counting Check test cases.
set -uo pipefail
build=${1:?usage: run-tests.sh BUILD [test_name ...]}
shift
# Unit tests first, then integration tests (real processes on 127.0.0.1),
# then script suites: it_http_boto3 is tests/integration/http/run.sh (the
# HTTP endpoint driven by boto3 and the AWS CLI); it_conformance is
# tests/conformance/run.sh (DynamoDB's API operation by operation, through
# boto3, on a cluster of its own); install_check is
# tests/tools/install-check.sh (make install, then a program outside the
# tree built with pkg-config against the installed libshoal); fuzz is
# tests/fuzz/run.sh (a few seconds of each libFuzzer target, one check each).
here=$(cd "$(dirname "$0")" && pwd)
declare -A scripts=([it_http_boto3]=$here/integration/http/run.sh [install_check]=$here/tools/install-check.sh
	[fuzz]=$here/fuzz/run.sh [it_conformance]=$here/conformance/run.sh)
if (($#)); then bins=("$@"); else
	bins=()
	for b in "$build"/tests/test_* "$build"/tests/it_*; do [[ -x $b ]] && bins+=("$(basename "$b")"); done
	bins+=("${!scripts[@]}")
fi

# Check kills a test case after 4 s by default; sanitizer builds of the fault
# loops need longer.  Tests bound their own work; this is only a backstop.
export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-600}
# Sanitizer builds: the known leak in Debian's nng 1.5.2 (see the file).
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(cd "$(dirname "$0")" && pwd)/lsan.supp:print_suppressions=0}

passed=0 failed=0 failed_bins=()
for name in "${bins[@]}"; do
	bin=$build/tests/$name
	cmd=("$bin")
	[[ -n ${scripts[$name]:-} ]] && bin=${scripts[$name]} cmd=("$bin" "$build")
	[[ -x $bin ]] || { echo "no such test binary: $bin"; failed=$((failed + 1)); continue; }
	out=$(mktemp)
	t0=$SECONDS
	"${cmd[@]}" >"$out" 2>&1
	rc=$?
	summary=$(grep -E '^[0-9]+%: Checks: ' "$out" | tail -n 1)
	if [[ $summary =~ Checks:\ ([0-9]+),\ Failures:\ ([0-9]+),\ Errors:\ ([0-9]+) ]]; then
		n=${BASH_REMATCH[1]} f=$((BASH_REMATCH[2] + BASH_REMATCH[3]))
	else
		n=1 f=1
	fi
	if ((rc != 0 && f == 0)); then f=1; fi
	passed=$((passed + n - f)) failed=$((failed + f))
	if ((f > 0)); then
		failed_bins+=("$name")
		echo "FAIL $name ($((SECONDS - t0)) s)"; cat "$out"
	else
		echo "ok   $name: $summary ($((SECONDS - t0)) s)"
	fi
	rm -f "$out"
done
((failed)) && echo "failed: ${failed_bins[*]}"
echo "$passed passed, $failed failed"
((failed == 0))
