#!/usr/bin/env bash
# tests/fuzz/run.sh [--secs N] BUILD -- runs every libFuzzer target of
# tests/fuzz/ (built by `make fuzz-build` into BUILD/fuzz, under ASan and
# UBSan) for N seconds each from its seed corpus tests/fuzz/corpus/<target>/
# and what earlier runs found (BUILD/fuzz/corpus/<target>/, where new inputs
# go), with its dictionary tests/fuzz/<target>.dict when there is one.  tests/run-tests.sh runs it as the suite "fuzz" (a short run,
# FUZZ_SHORT_SECS, default 3 s per target); `make fuzz FUZZ_SECS=N` runs it
# with --secs N.  Builds the targets first if they are out of date.
#
# A crash, a leak, a sanitizer report, a failed check of the harness, a
# timeout (one input over 10 s) or memory over 2 GB fails that target: the
# input is kept as BUILD/fuzz/crashes/<target>-crash-<sha1> and printed in
# hex with libFuzzer's report and the command that replays it.  Prints one
# line per target (executions, executions per second, coverage) and a
# Check-style summary line, one check per target.
#
# Without clang or libFuzzer (Debian's clang and libclang-rt-14-dev) it runs
# deploy/install-deps.sh; only when that cannot install them is the suite
# skipped (0 checks, with the reason).
set -uo pipefail
secs=${FUZZ_SHORT_SECS:-3}
if [[ ${1:-} == --secs ]]; then
	secs=${2:?--secs N}
	shift 2
fi
build=${1:?usage: run.sh [--secs N] BUILD}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$build"
build=$(cd "$build" && pwd)
mkbuild=${build#"$root"/}
fuzz=$build/fuzz
cc=${FUZZ_CC:-clang}

# Can clang link a libFuzzer target with ASan and UBSan?
probe() {
	local d
	d=$(mktemp -d) || return 1
	printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return d && n; }\n' >"$d/p.c"
	"$cc" -fsanitize=fuzzer,address,undefined "$d/p.c" -o "$d/p" >"$d/log" 2>&1
	local rc=$?
	((rc == 0)) || why=$(tail -n 3 "$d/log" | tr '\n' ' ')
	rm -rf "$d"
	return $rc
}
why="$cc not found"
if ! command -v "$cc" >/dev/null || ! probe; then
	echo "clang/libFuzzer missing ($why): running deploy/install-deps.sh"
	if ! "$root/deploy/install-deps.sh"; then
		echo "skipped: deploy/install-deps.sh could not install clang and libclang-rt-14-dev; the fuzz targets were not built or run"
		echo "100%: Checks: 0, Failures: 0, Errors: 0"
		exit 0
	fi
	if ! command -v "$cc" >/dev/null || ! probe; then
		echo "FAIL: deploy/install-deps.sh ran, but $cc still cannot link -fsanitize=fuzzer: $why"
		echo "0%: Checks: 1, Failures: 1, Errors: 0"
		exit 1
	fi
fi

if ! make -C "$root" --no-print-directory BUILD="$mkbuild" fuzz-build >"$build/fuzz-build.log" 2>&1; then
	echo "FAIL: make fuzz-build"
	tail -n 40 "$build/fuzz-build.log"
	echo "0%: Checks: 1, Failures: 1, Errors: 0"
	exit 1
fi

mkdir -p "$fuzz/crashes"
n=0 f=0
for src in "$here"/fuzz_*.c; do
	t=$(basename "$src" .c)
	t=${t#fuzz_}
	bin=$fuzz/fuzz_$t
	n=$((n + 1))
	mkdir -p "$fuzz/corpus/$t"
	# A log of its own (two runs may share the build: make test and make
	# fuzz, or two sessions), left as BUILD/fuzz/<target>.log at the end.
	log=$(mktemp "$fuzz/$t.log.XXXXXX")
	start=$(date +%s)
	dict=()
	[[ -f $here/$t.dict ]] && dict=(-dict="$here/$t.dict")
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$fuzz/crashes/$t-" "${dict[@]}" ${FUZZ_ARGS:-} \
		"$fuzz/corpus/$t" "$here/corpus/$t" >"$log" 2>&1
	rc=$?
	# (-a: libFuzzer's log holds raw bytes of inputs, which grep would call binary)
	done_line=$(grep -a -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	cov=$(sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\) corp: \([0-9]*\).*/cov \1, ft \2, corpus \3/p' <<<"$done_line")
	rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
	mv -f "$log" "$fuzz/$t.log"
	log=$fuzz/$t.log
	if ((rc == 0)) && [[ -n $done_line ]]; then
		echo "ok   fuzz_$t: ${secs} s, ${runs:-?} runs (${speed:-?}/s), $cov, peak RSS ${rss:-?} MB"
		continue
	fi
	f=$((f + 1))
	echo "FAIL fuzz_$t (exit $rc): libFuzzer's report:"
	grep -a -v -E '^(#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|INITED)|INFO:|MS:)' "$log" | tail -n 60
	find "$fuzz/crashes" -name "$t-*" -newermt "@$((start - 1))" | while read -r c; do
		echo "input $c ($(stat -c %s "$c") bytes), hex:"
		od -An -tx1 -v "$c" | head -n 16
		echo "replay: $bin $c"
	done
done
echo "$(((n - f) * 100 / (n > 0 ? n : 1)))%: Checks: $n, Failures: $f, Errors: 0"
((f == 0))
