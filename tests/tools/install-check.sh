#!/usr/bin/env bash
# tests/tools/install-check.sh BUILD -- libshoal as a program outside the tree
# sees it (run by tests/run-tests.sh as install_check, so by `make test`).
#
# `make install DESTDIR=<tmp> PREFIX=/usr BUILD=BUILD`, then checks the
# installed tree (files, soname, exported symbols, runtime dependencies,
# systemd units pointing at the installed binaries), builds
# tests/tools/install-example/shoal-example.c with only
# `#include <shoal/shoal.h>` and `pkg-config shoal` (PKG_CONFIG_SYSROOT_DIR and
# PKG_CONFIG_PATH into the DESTDIR), once against libshoal.so (run with
# LD_LIBRARY_PATH into the DESTDIR) and once statically against libshoal.a
# (`pkg-config --static`), runs both (each expects the documented connection
# error from tcp://127.0.0.1:1, where nothing listens), and finally checks that
# `make uninstall` removes every installed file.  A few seconds when BUILD is
# up to date.  Skipped (0 checks) for a sanitizer build: a sanitized
# libshoal.so needs the sanitizer runtime in every program that loads it, so
# the Makefile does not build one.  Prints a Check-style summary line.
set -uo pipefail
build=${1:?usage: install-check.sh BUILD}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "$build" && pwd)
# The name the Makefile knows it by (its .d files name build/obj/..., not /abs/build/obj/...).
mkbuild=${build#"$root"/}

# (nm's status is dropped: grep -q stops reading at the first match, nm then
# dies of SIGPIPE, and with pipefail the test failed, so a sanitizer build
# run without SANITIZE in the environment was rebuilt -- and broken -- by
# make install below.)
if [[ -n ${SANITIZE:-} ]] || { nm "$build/bin/shoal" 2>/dev/null || true; } | grep -q -E ' __(a|ub)san_'; then
	echo "skipped: $build is a sanitizer build (SANITIZE=${SANITIZE:-?}); make install and the shared library are built without sanitizers"
	echo "100%: Checks: 0, Failures: 0, Errors: 0"
	exit 0
fi

n=0 f=0
check() { # description command...: counts one check
	local what=$1
	shift
	n=$((n + 1))
	if "$@"; then echo "ok   $what"; else
		echo "FAIL $what"
		f=$((f + 1))
	fi
}
finish() {
	local pct=$(((n - f) * 100 / (n > 0 ? n : 1)))
	echo "$pct%: Checks: $n, Failures: $f, Errors: 0"
	((f == 0))
	exit
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/shoal-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/root
# A make started from `make test`'s recipe: not its jobserver or flags.
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$root" BUILD="$mkbuild" "$@"; }

if ! mk install DESTDIR="$dest" PREFIX=/usr >"$tmp/install.log" 2>&1; then
	cat "$tmp/install.log"
	check "make install DESTDIR=... PREFIX=/usr" false
	finish
fi
check "make install DESTDIR=... PREFIX=/usr" true

files() { (cd "$dest" && find . ! -type d | sort); }
expect=(./lib/systemd/system/shoal-node.service ./lib/systemd/system/shoal-router.service
	./usr/bin/shoal ./usr/bin/shoal-node ./usr/bin/shoal-router ./usr/include/shoal/errors.h
	./usr/include/shoal/shoal.h ./usr/lib/libshoal.a ./usr/lib/libshoal.so ./usr/lib/libshoal.so.0
	./usr/lib/pkgconfig/shoal.pc ./usr/share/doc/shoal/README.md)
check "installed files are exactly: ${expect[*]}" \
	diff <(printf '%s\n' "${expect[@]}") <(files)
lib=$dest/usr/lib/libshoal.so.0
check "libshoal.so -> libshoal.so.0" test "$(readlink "$dest/usr/lib/libshoal.so")" = libshoal.so.0
check "soname libshoal.so.0" grep -q 'Library soname: \[libshoal.so.0\]' <(readelf -d "$lib")
exports=$(nm -D --defined-only "$lib" | awk '{print $3}')
check "exports only shoal_* ($(wc -w <<<"$exports") functions)" \
	test -z "$(grep -v '^shoal_[a-z]' <<<"$exports")"
needed=$(readelf -d "$lib" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "     libshoal.so.0 needs: $needed"
check "needs no LMDB, raft, libuv" test -z "$(grep -oE 'liblmdb|libraft|libuv' <<<"$needed")"
check "units start the installed binaries" \
	test "$(grep -h '^ExecStart=' "$dest"/lib/systemd/system/*.service | awk '{print $1}' | sort | tr '\n' ' ')" \
	= "ExecStart=/usr/bin/shoal-node ExecStart=/usr/bin/shoal-router "

export PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_LIBDIR=$dest/usr/lib/pkgconfig PKG_CONFIG_PATH=
# /usr/include and /usr/lib are system directories pkg-config would drop; here
# they are inside DESTDIR and needed.
export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
echo "     pkg-config: shoal $(pkg-config --modversion shoal); --cflags --libs: $(pkg-config --cflags --libs shoal);" \
	"--static: $(pkg-config --static --libs shoal)"
src=$here/install-example/shoal-example.c
cflags=(-std=c99 -pedantic -Wall -Wextra -Werror -O2)
# shellcheck disable=SC2317 # called through check
nothing_listens() { ! (exec 3<>/dev/tcp/127.0.0.1/1) 2>/dev/null; }
check "nothing listens on 127.0.0.1:1" nothing_listens

# shellcheck disable=SC2046 # pkg-config's words are meant to split
check "example builds against the installed header and libshoal.so" \
	cc "${cflags[@]}" $(pkg-config --cflags shoal) -o "$tmp/example" "$src" $(pkg-config --libs shoal)
if [[ -x $tmp/example ]]; then
	check "example resolves libshoal.so.0 inside DESTDIR" \
		grep -qF "libshoal.so.0 => $dest/usr/lib/libshoal.so.0" \
		<(LD_LIBRARY_PATH=$dest/usr/lib ldd "$tmp/example")
	check "example (shared) gets the connection error" env LD_LIBRARY_PATH="$dest/usr/lib" "$tmp/example"
fi

# Static: libshoal.a by name, its dependencies from Libs.private.
libs=" $(pkg-config --static --libs shoal) "
# shellcheck disable=SC2046,SC2086
check "example links statically with pkg-config --static" \
	cc "${cflags[@]}" $(pkg-config --cflags shoal) -o "$tmp/example-static" "$src" ${libs/ -lshoal / -l:libshoal.a }
if [[ -x $tmp/example-static ]]; then
	check "static example does not need libshoal.so" \
		test -z "$(readelf -d "$tmp/example-static" | grep 'libshoal')"
	check "example (static) gets the connection error" "$tmp/example-static"
fi

if mk uninstall DESTDIR="$dest" PREFIX=/usr >"$tmp/uninstall.log" 2>&1; then
	check "make uninstall removes every file" test -z "$(files)"
else
	cat "$tmp/uninstall.log"
	check "make uninstall" false
fi
finish
