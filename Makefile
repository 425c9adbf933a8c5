# Shoal -- one Makefile for the whole tree.
#
# Targets
#   all (default)  build libraries, programs and tests into $(BUILD)
#   test           install missing Debian packages, build, run every test
#   demo           install missing Debian packages, build, run the demonstration
#   bench          storage-engine benchmark (1M items; prints figures, asserts nothing)
#   bench-cluster  shoal_bench against a local 3-node cluster (prints figures)
#   bench-http     the HTTP endpoint vs the native protocol on one cluster (ratios)
#   bench-move     a partition move and a split of MOVE_BENCH_MB MiB (default 1024) under a
#                  writer at a fixed rate: their times, the writer's throughput and p50/p99
#                  before/during/after and at the cutover, the longest write pause
#                  (tests/bench/move_bench.c; needs ~20x MOVE_BENCH_MB of free disk)
#   bench-plan     the rebalancer and split planner in simulation: 1,000 nodes, 100,000
#                  partitions, nodes joining, draining and failing mid-plan (prints figures)
#   hot            the hot-partition load tests at length (tests/integration/it_hot.c, HOT_SECS
#                  per phase, default 60; `make test` runs 6): a table of figures, and
#                  $(BUILD)/hot/*.csv and hot.png (per-partition throughput and throttles)
#   fuzz           each libFuzzer target of tests/fuzz/ (one per decoder: NodeRequest, Request,
#                  DynamoDB JSON body, HTTP head and SigV4, expressions, stored items, responses,
#                  Raft entries, index deltas, cluster maps, snapshots, NodeResponses)
#                  for FUZZ_SECS seconds, built by clang with ASan/UBSan in $(BUILD)/fuzz;
#                  `make test` runs 3 s of each (fuzz-build: build them only; fuzz-seeds:
#                  remake tests/fuzz/corpus/)
#   bench-peers    Shoal beside etcd and dynalite under the same wrk load (installs Debian's
#                  etcd-server and wrk, dynalite from npm into $(BUILD)/peers; prints figures)
#   libs           libshoal.so.0, libshoal.so and an installable libshoal.a in $(BUILD)/lib
#                  (part of all, except with SANITIZE)
#   install        install programs, libshoal (.so, .a, header, shoal.pc) and the systemd units
#   uninstall      remove what install installed
#   format         clang-format every C source and header in place
#   clean          remove build directories
#
# Variables
#   BUILD=dir                 output directory (default build, or build-san with SANITIZE)
#   SANITIZE=address,undefined  compile and link with these -fsanitize= checks
#   OPT=-O2                   optimisation flags
#   CC=cc                     compiler
#   TESTS='test_num test_expr'  run only these unit test binaries
#   TEST_JOBS=n               test binaries make test runs at once (default 2; tests/run-tests.sh)
#   V=1                       show full compiler command lines
#   SHOAL_SEED=n              seed for randomised tests (printed by every such test)
#   BENCH_ARGS='-n 100000'    arguments for st_bench (see tests/bench/st_bench.c)
#   MOVE_BENCH_MB=1024        bench-move's partition size (also MOVE_BENCH_RATE, _ITEM, _IDLE,
#                             _LOADERS: see tests/bench/move_bench.c)
#   PLAN_ARGS='-n 90 -j 10 -g 1000 -p 10000'  arguments for plan_sim (tests/bench/plan_sim.c)
#   FUZZ_SECS=60              seconds per target for make fuzz
#   FUZZ_ARGS='-jobs=2'       extra libFuzzer options for make fuzz
#   FUZZ_CC=clang             the compiler of the fuzz build (needs libFuzzer)
#   JOBS=n                    parallel compile jobs for test/demo/bench (default: nproc)
#   PREFIX=/usr/local         install prefix; DESTDIR=dir is prepended to every installed path
#   BINDIR=$(PREFIX)/bin      shoal, shoal-node, shoal-router
#   LIBDIR=$(PREFIX)/lib      libshoal.so*, libshoal.a (a Debian package would use lib/<multiarch>)
#   INCLUDEDIR=$(PREFIX)/include  shoal/shoal.h and shoal/errors.h
#   PKGCONFIGDIR=$(LIBDIR)/pkgconfig  shoal.pc
#   SYSTEMDUNITDIR=dir        systemd units: /lib/systemd/system when PREFIX=/usr (Debian's
#                             place for packaged units), else $(PREFIX)/lib/systemd/system
#                             (on systemd's search path for /usr/local)
#   DOCDIR=$(PREFIX)/share/doc/shoal  README.md (the units' Documentation=)

CC       ?= cc
OPT      ?= -O2
SANITIZE ?=
ifeq ($(SANITIZE),)
BUILD    ?= build
SANFLAGS :=
else
BUILD    ?= build-san
SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

GEN      := $(BUILD)/gen
ifeq ($(V),1)
Q :=
say :=
else
Q := @
say = printf '  %-6s %s\n' $(1) $(2);
endif
CPPFLAGS += -I. -I$(GEN) -D_GNU_SOURCE
CFLAGS   += -std=c11 $(OPT) -g -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
            -Wmissing-prototypes -Wstrict-prototypes -fvisibility=hidden $(SANFLAGS)
LDFLAGS  += $(SANFLAGS)
LIBS     := -llmdb -lprotobuf-c -ljansson -lxxhash -linih -lnettle -lz -lm -lpthread
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lm)

# ---------------------------------------------------------------------------
# Sources: every .c of a part belongs to it (no lists to edit).
COMMON_SRC  := $(wildcard common/*.c)
STORAGE_SRC := $(wildcard storage/*.c)
PROTO_SRC   := $(filter-out proto/%.pb-c.c,$(wildcard proto/*.c))
PROTO_DEFS  := $(wildcard proto/*.proto)
PROTO_GEN_C := $(patsubst proto/%.proto,$(GEN)/proto/%.pb-c.c,$(PROTO_DEFS))
PROTO_GEN_H := $(PROTO_GEN_C:.c=.h)
NODE_SRC    := $(filter-out node/main.c,$(wildcard node/*.c))
ROUTER_SRC  := $(filter-out router/main.c,$(wildcard router/*.c))
CLIENT_SRC  := $(filter-out client/cli%.c,$(wildcard client/*.c))
CLI_SRC     := $(wildcard client/cli*.c)
TESTLIB_SRC := $(wildcard tests/lib/*.c)
UNIT_SRC    := $(wildcard tests/unit/test_*.c)
IT_SRC      := $(wildcard tests/integration/it_*.c)
TOOL_SRC    := $(wildcard tests/tools/*.c)
BENCH_SRC   := $(wildcard tests/bench/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

CORE_OBJ := $(call obj,$(COMMON_SRC) $(STORAGE_SRC) $(PROTO_SRC)) \
            $(patsubst $(GEN)/%.c,$(BUILD)/obj/gen/%.o,$(PROTO_GEN_C))
CORE_LIB := $(BUILD)/libshoalcore.a
NODE_LIB := $(BUILD)/libshoalnode.a
ROUTER_LIB := $(BUILD)/libshoalrouter.a
CLIENT_LIB := $(BUILD)/libshoal.a
PART_LIBS := $(NODE_LIB) $(ROUTER_LIB) $(CLIENT_LIB)
NET_LIBS := -lraft -luv -lnng -lmbedtls -lmbedx509 -lmbedcrypto
TESTLIB_OBJ := $(call obj,$(TESTLIB_SRC))
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
IT_BIN   := $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(IT_SRC))
PROG_BIN := $(if $(wildcard node/main.c),$(BUILD)/bin/shoal-node) \
            $(if $(wildcard router/main.c),$(BUILD)/bin/shoal-router) \
            $(if $(CLI_SRC),$(BUILD)/bin/shoal)
TOOL_BIN := $(patsubst tests/tools/%.c,$(BUILD)/bin/%,$(TOOL_SRC))
BENCH_BIN := $(patsubst tests/bench/%.c,$(BUILD)/bin/%,$(BENCH_SRC))

.PHONY: all test unit demo bench bench-cluster bench-http bench-move bench-plan bench-peers chaos format clean deps
.DELETE_ON_ERROR:

all: deps-checked $(CORE_LIB) $(PART_LIBS) $(PROG_BIN) $(UNIT_BIN) $(IT_BIN) $(TOOL_BIN) $(BENCH_BIN)

# Install what is missing (a no-op when everything is there).
deps:
	@deploy/install-deps.sh
deps-checked:
	@deploy/install-deps.sh --check >/dev/null 2>&1 || deploy/install-deps.sh
.PHONY: deps-checked

# ---------------------------------------------------------------------------
# Generated protobuf-c code lives in the build directory only.
# (After the dependency check: `make -j` on a fresh machine needs protoc-c.)
$(GEN)/proto/%.pb-c.c $(GEN)/proto/%.pb-c.h &: proto/%.proto | deps-checked
	@mkdir -p $(GEN)/proto
	$(Q)$(call say,PROTOC,$<)protoc-c -I. --c_out=$(GEN) $<

$(BUILD)/obj/gen/proto/%.pb-c.o: $(GEN)/proto/%.pb-c.c $(PROTO_GEN_H)
	@mkdir -p $(dir $@)
	$(Q)$(call say,CC,$<)$(CC) $(CPPFLAGS) $(filter-out -Wmissing-prototypes -Wshadow,$(CFLAGS)) -Wno-missing-braces -MMD -MP -c $< -o $@

# Everything may include the generated headers: generate them first (order-only;
# the .d files record who really includes them).
$(call obj,$(COMMON_SRC) $(STORAGE_SRC) $(PROTO_SRC) $(NODE_SRC) $(ROUTER_SRC) $(CLIENT_SRC) \
	$(CLI_SRC) node/main.c router/main.c $(UNIT_SRC) $(IT_SRC) $(TOOL_SRC) $(BENCH_SRC) $(TESTLIB_SRC)): \
	| $(PROTO_GEN_H)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(Q)$(call say,CC,$<)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(CORE_LIB): $(CORE_OBJ)
	@rm -f $@
	$(Q)$(call say,AR,$@)ar rcs $@ $^

$(NODE_LIB): $(call obj,$(NODE_SRC))
	@rm -f $@
	$(Q)$(call say,AR,$@)ar rcs $@ $^

$(ROUTER_LIB): $(call obj,$(ROUTER_SRC))
	@rm -f $@
	$(Q)$(call say,AR,$@)ar rcs $@ $^

$(CLIENT_LIB): $(call obj,$(CLIENT_SRC))
	@rm -f $@
	$(Q)$(call say,AR,$@)ar rcs $@ $^

$(BUILD)/bin/shoal-node: $(BUILD)/obj/node/main.o $(NODE_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(NET_LIBS) $(LIBS)

$(BUILD)/bin/shoal-router: $(BUILD)/obj/router/main.o $(ROUTER_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(NET_LIBS) $(LIBS)

$(BUILD)/bin/shoal: $(call obj,$(CLI_SRC)) $(CLIENT_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(NET_LIBS) $(LIBS)

# Unit and integration tests may use any part's internals.
$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(TESTLIB_OBJ) $(PART_LIBS) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(NET_LIBS) $(LIBS)

$(BUILD)/tests/it_%: $(BUILD)/obj/tests/integration/it_%.o $(TESTLIB_OBJ) $(PART_LIBS) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(NET_LIBS) $(LIBS)

$(BUILD)/bin/%: $(BUILD)/obj/tests/tools/%.o $(TESTLIB_OBJ) $(PART_LIBS) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(NET_LIBS) $(LIBS)

$(BUILD)/bin/%: $(BUILD)/obj/tests/bench/%.o $(TESTLIB_OBJ) $(PART_LIBS) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(Q)$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(NET_LIBS) $(LIBS)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---------------------------------------------------------------------------
# Tests: every unit binary runs; a summary line closes the run.
# The dependency check runs first, alone; the build then runs in parallel.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

test: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@tests/run-tests.sh $(BUILD) $(TESTS)

demo: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@tests/tools/demo.sh $(BUILD)

bench: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) all
	$(BUILD)/bin/st_bench $(BENCH_ARGS)

bench-plan: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) $(BUILD)/bin/plan_sim
	$(BUILD)/bin/plan_sim $(PLAN_ARGS)

bench-cluster: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) all
	tests/tools/bench-cluster.sh $(BUILD)

bench-http: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) all
	tests/tools/bench-http.sh $(BUILD)

MOVE_BENCH_MB ?= 1024
bench-move: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) all
	MOVE_BENCH_MB=$(MOVE_BENCH_MB) $(BUILD)/bin/move_bench

# The long chaos runs (tests/integration/it_chaos.c, it_bank.c and it_jepsen.c; `make test`
# runs 20 s of the first two and 30 s of it_jepsen), and every fault case of
# it_pmove_chaos.c, 5 rounds (partition moves with a process killed at each phase, of a
# table's partitions and of the GSI space's; `make test` runs cases b, c, e and f once each).
CHAOS_SECS ?= 600
chaos: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) all
	CHAOS_SECS=$(CHAOS_SECS) $(BUILD)/tests/it_chaos
	BANK_SECS=$(CHAOS_SECS) $(BUILD)/tests/it_bank
	CHAOS_SECS=$(CHAOS_SECS) $(BUILD)/tests/it_jepsen
	PMOVE_CHAOS_CASES=abcdef PMOVE_CHAOS_GSI_CASES=abcdef PMOVE_CHAOS_ROUNDS=5 \
	    $(BUILD)/tests/it_pmove_chaos

# The long hot-partition load tests (tests/integration/it_hot.c; `make test` runs 6 s of each
# phase): figures on stdout, $(BUILD)/hot/{partitions,client,rss}.csv and hot.png.
HOT_SECS ?= 60
.PHONY: hot
hot: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) all
	HOT_SECS=$(HOT_SECS) HOT_OUT=$(abspath $(BUILD))/hot $(BUILD)/tests/it_hot

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-san

# ---------------------------------------------------------------------------
# libshoal for programs outside the tree (issue 11): libshoal.so.0 and an
# installable libshoal.a in $(LIBOUT), shoal.pc, `make install` / `make uninstall`.
#
# The installed libraries are built from position-independent copies of the
# client's and the core's objects in $(PIC)/obj, so the static binaries,
# tests and benchmarks above stay non-PIC.  The client objects and the PIC
# core archive are linked into ONE relocatable object, $(PIC)/libshoal.o
# (ld -r pulls only the core members the client needs: no LMDB, no storage
# engine), and objcopy makes every symbol in it local except shoal_[a-z]*.
# libshoal.so.0 and the installed libshoal.a are both that object, so they
# export the same functions and cannot clash with a program's own symbols
# (alloc, wire_*, sh_*, protobuf-c's shoal__*).  Everything is compiled with
# -fvisibility=hidden as above, except common/errors.c: shoal.h documents
# shoal_strerror and shoal_exception_name (declared without SHOAL_API in
# common/errors.h) as part of the API.  The .so is linked --as-needed against
# the same libraries as the programs, so it needs only what it really uses
# (nng, protobuf-c, jansson, libm), and that list becomes the .pc's
# Libs.private.  Installed headers: $(INCLUDEDIR)/shoal/shoal.h (client/shoal.h,
# its `#include "../common/X.h"` rewritten to "X.h") and the common/ headers
# it includes.  Not built with SANITIZE: a sanitized shared library needs the
# sanitizer runtime in every program that loads it.
PREFIX         ?= /usr/local
BINDIR         ?= $(PREFIX)/bin
LIBDIR         ?= $(PREFIX)/lib
INCLUDEDIR     ?= $(PREFIX)/include
PKGCONFIGDIR   ?= $(LIBDIR)/pkgconfig
DOCDIR         ?= $(PREFIX)/share/doc/shoal
ifeq ($(PREFIX),/usr)
SYSTEMDUNITDIR ?= /lib/systemd/system
else
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
endif
SHOAL_VERSION   := 0.1.0
SHOAL_SOVERSION := 0

PIC     := $(BUILD)/pic
LIBOUT  := $(BUILD)/lib
pic_obj = $(patsubst %.c,$(PIC)/obj/%.o,$(1))
PIC_CORE_OBJ := $(call pic_obj,$(COMMON_SRC) $(STORAGE_SRC) $(PROTO_SRC)) \
                $(patsubst $(GEN)/%.c,$(PIC)/obj/gen/%.o,$(PROTO_GEN_C))
PIC_CLIENT_OBJ := $(call pic_obj,$(CLIENT_SRC))
SHLIB   := $(LIBOUT)/libshoal.so.$(SHOAL_SOVERSION)
DIST_LIBS := $(SHLIB) $(LIBOUT)/libshoal.so $(LIBOUT)/libshoal.a
# client/shoal.h's own headers: `#include "../common/errors.h"` -> common/errors.h.
PUBLIC_DEPS := $(addprefix common/,$(shell sed -n 's|^.include "\.\./common/\([^"]*\)".*|\1|p' client/shoal.h))
SYSTEMD_UNITS := $(wildcard deploy/systemd/*.service)

.PHONY: install uninstall libs
libs: $(DIST_LIBS)
ifeq ($(SANITIZE),)
all: $(DIST_LIBS)
else ifneq ($(filter install,$(MAKECMDGOALS)),)
$(error make install: not with SANITIZE (installed programs and libraries are built without it))
endif

$(call pic_obj,$(COMMON_SRC) $(STORAGE_SRC) $(PROTO_SRC) $(CLIENT_SRC)): | $(PROTO_GEN_H)
$(PIC)/obj/common/errors.o: PIC_VIS := -fvisibility=default

$(PIC)/obj/gen/proto/%.pb-c.o: $(GEN)/proto/%.pb-c.c $(PROTO_GEN_H)
	@mkdir -p $(dir $@)
	$(Q)$(call say,CC,$<)$(CC) $(CPPFLAGS) $(filter-out -Wmissing-prototypes -Wshadow,$(CFLAGS)) -fPIC -Wno-missing-braces -MMD -MP -c $< -o $@

$(PIC)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(Q)$(call say,CC,$<)$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC $(PIC_VIS) -MMD -MP -c $< -o $@

$(PIC)/libshoalcore.a: $(PIC_CORE_OBJ)
	@rm -f $@
	$(Q)$(call say,AR,$@)ar rcs $@ $^

$(PIC)/libshoal.o: $(PIC_CLIENT_OBJ) $(PIC)/libshoalcore.a
	$(Q)$(call say,LD,$@)$(CC) -nostdlib -r -o $@.r $^ && \
	objcopy --localize-hidden --wildcard --keep-global-symbol='shoal_[a-z]*' $@.r $@ && rm -f $@.r

# The link fails if the library exports anything but shoal_* or misses a
# function shoal.h declares with SHOAL_API.
$(SHLIB): $(PIC)/libshoal.o client/shoal.h
	@mkdir -p $(dir $@)
	$(Q)$(call say,LD,$@)$(CC) $(LDFLAGS) -shared -Wl,-soname,$(notdir $@) -Wl,--no-undefined \
		-Wl,--as-needed -o $@ $< $(NET_LIBS) $(LIBS)
	$(Q)exp=$$(nm -D --defined-only $@ | awk '{print $$3}'); \
	bad=$$(echo "$$exp" | grep -v '^shoal_[a-z]'); \
	miss=$$(sed -n 's/^SHOAL_API [^(]*[ *]\(shoal_[a-z_]*\)(.*/\1/p' client/shoal.h | grep -vxF "$$exp"); \
	if [ -n "$$bad$$miss" ]; then echo "$@: exports non-shoal_ symbols: $$bad; misses: $$miss"; rm -f $@; exit 1; fi

$(LIBOUT)/libshoal.so: $(SHLIB)
	$(Q)ln -sf $(notdir $<) $@

$(LIBOUT)/libshoal.a: $(PIC)/libshoal.o
	@mkdir -p $(dir $@)
	@rm -f $@
	$(Q)$(call say,AR,$@)ar rcs $@ $<

# Libs.private: the shared libraries libshoal.so.0 was linked against (-lc aside).
install: $(PROG_BIN) $(DIST_LIBS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) \
		$(DESTDIR)$(INCLUDEDIR)/shoal $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(DOCDIR)
	install -m 0755 $(PROG_BIN) $(DESTDIR)$(BINDIR)/
	install -m 0644 $(SHLIB) $(LIBOUT)/libshoal.a $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(SHLIB)) $(DESTDIR)$(LIBDIR)/libshoal.so
	sed 's|^#include "\.\./common/|#include "|' client/shoal.h >$(DESTDIR)$(INCLUDEDIR)/shoal/shoal.h
	chmod 0644 $(DESTDIR)$(INCLUDEDIR)/shoal/shoal.h
	install -m 0644 $(PUBLIC_DEPS) $(DESTDIR)$(INCLUDEDIR)/shoal/
	@! grep -n '^#include "\.\.' $(DESTDIR)$(INCLUDEDIR)/shoal/*.h || \
		{ echo "installed headers still include tree paths"; exit 1; }
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|' \
		-e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|' \
		-e 's|@VERSION@|$(SHOAL_VERSION)|' \
		-e "s|@LIBS_PRIVATE@|$$(readelf -d $(SHLIB) | sed -n 's/.*Shared library: \[lib\([^]]*\)\.so[.0-9]*\]/-l\1/p' | grep -vx -- -lc | paste -sd ' ')|" \
		client/shoal.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/shoal.pc
	for u in $(SYSTEMD_UNITS); do \
		sed -e 's|/usr/local/bin/|$(BINDIR)/|g' -e 's|file:///usr/\(local/\)\{0,1\}share/doc/shoal/|file://$(DOCDIR)/|' \
			$$u >$(DESTDIR)$(SYSTEMDUNITDIR)/$$(basename $$u) || exit 1; \
	done
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(PROG_BIN))) \
		$(DESTDIR)$(LIBDIR)/libshoal.so $(DESTDIR)$(LIBDIR)/$(notdir $(SHLIB)) $(DESTDIR)$(LIBDIR)/libshoal.a \
		$(DESTDIR)$(PKGCONFIGDIR)/shoal.pc $(DESTDIR)$(INCLUDEDIR)/shoal/shoal.h \
		$(addprefix $(DESTDIR)$(INCLUDEDIR)/shoal/,$(notdir $(PUBLIC_DEPS))) \
		$(addprefix $(DESTDIR)$(SYSTEMDUNITDIR)/,$(notdir $(SYSTEMD_UNITS))) $(DESTDIR)$(DOCDIR)/README.md
	rmdir $(DESTDIR)$(INCLUDEDIR)/shoal $(DESTDIR)$(DOCDIR) 2>/dev/null || true
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig; fi

-include $(shell find $(PIC)/obj -name '*.d' 2>/dev/null)

# ---------------------------------------------------------------------------
# bench-peers (issue 11): Shoal beside a 3-member etcd and dynalite, the same
# wrk load against each (tests/tools/bench-peers.sh, tests/tools/peers/).
# Only this target installs etcd-server, etcd-client and wrk (and Node.js if
# none is there): deploy/install-deps.sh --peers.  About 3 minutes.
bench-peers: deps-checked
	@deploy/install-deps.sh --check --peers >/dev/null 2>&1 || deploy/install-deps.sh --peers
	@$(MAKE) --no-print-directory -j$(JOBS) all
	tests/tools/bench-peers.sh $(BUILD)
# --- end bench-peers ---

# ---------------------------------------------------------------------------
# Fuzzing (issue 15): one libFuzzer target per decoder in tests/fuzz/ (see
# tests/fuzz/harness.h and each fuzz_*.c), built by clang -- Debian's clang
# and libclang-rt-14-dev, which deploy/install-deps.sh installs -- in
# $(FUZZ_DIR), apart from the gcc build.  The code under test (common/,
# storage/, proto/, the generated protobuf-c code, and router/'s pure HTTP
# head parser, SigV4 and native-signature checks: httpd_parse.c, sigv4.c, auth.c)
# is compiled again there with -fsanitize=fuzzer-no-link plus ASan and UBSan,
# the targets with -fsanitize=fuzzer (libFuzzer supplies main()).  node/ is
# compiled the same way into its own archive, libfuzznode.a (NODE_SRC: no
# main.c), and so is the rest of router/ (no main.c), libfuzzrouter.a, both
# linked before the core with the node's libraries (raft, libuv,
# nng, mbedTLS): the linker takes only the objects a target calls (fuzz_fsm:
# the state machine; fuzz_index_ship: fsm.c's delta conversion;
# fuzz_node_response: the router's rt_call_resp and catalog snapshot), and
# nothing there starts a thread or a loop until node_start or the router's
# start is called.  -Werror is left out there: a warning only clang gives in
# a file under test must not stop the fuzzers (the gcc build keeps the tree
# warning-free).
#   fuzz-build  the targets, $(FUZZ_DIR)/fuzz_<name>
#   fuzz        each target for FUZZ_SECS seconds (tests/fuzz/run.sh) from its
#               seed corpus tests/fuzz/corpus/<name>/ and what earlier runs
#               found ($(FUZZ_DIR)/corpus/<name>/); crashes are written to
#               $(FUZZ_DIR)/crashes/ and fail the run.  FUZZ_ARGS adds
#               libFuzzer options (e.g. FUZZ_ARGS=-jobs=2).
#   fuzz-seeds  rewrites tests/fuzz/corpus/ with tests/fuzz/seeds.c (messages
#               made by the real encoders): after a protocol change
# `make test` runs each target for a few seconds (suite "fuzz" of
# tests/run-tests.sh).
FUZZ_CC   ?= clang
FUZZ_SECS ?= 60
FUZZ_DIR  := $(BUILD)/fuzz
FUZZ_SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=c11 -O1 -g -Wall -Wextra -Wno-unused-parameter -fvisibility=hidden \
               $(FUZZ_SANFLAGS) -fsanitize=fuzzer-no-link
FUZZ_LIB_SRC := $(COMMON_SRC) $(STORAGE_SRC) $(PROTO_SRC) router/httpd_parse.c router/sigv4.c \
                router/auth.c
FUZZ_LIB_OBJ := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(FUZZ_LIB_SRC)) \
                $(patsubst $(GEN)/%.c,$(FUZZ_DIR)/obj/gen/%.o,$(PROTO_GEN_C))
FUZZ_NODE_OBJ := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(NODE_SRC))
FUZZ_ROUTER_OBJ := $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(filter-out $(FUZZ_LIB_SRC),$(ROUTER_SRC)))
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(addprefix $(FUZZ_DIR)/fuzz_,$(FUZZ_NAMES))
FUZZ_KEEP := $(patsubst %,$(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o,$(FUZZ_NAMES)) \
             $(FUZZ_DIR)/obj/tests/fuzz/harness.o $(FUZZ_DIR)/obj/tests/fuzz/seeds.o

.PHONY: fuzz fuzz-build fuzz-seeds
.SECONDARY: $(FUZZ_KEEP)
fuzz-build: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) fuzz-bins
.PHONY: fuzz-bins
fuzz-bins: $(FUZZ_BIN)
	@:

fuzz: fuzz-build
	@tests/fuzz/run.sh --secs $(FUZZ_SECS) $(BUILD)

fuzz-seeds: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) $(FUZZ_DIR)/fuzz-seeds
	rm -rf tests/fuzz/corpus && mkdir -p $(addprefix tests/fuzz/corpus/,$(FUZZ_NAMES))
	$(FUZZ_DIR)/fuzz-seeds tests/fuzz/corpus

$(FUZZ_DIR)/obj/gen/proto/%.pb-c.o: $(GEN)/proto/%.pb-c.c $(PROTO_GEN_H)
	@mkdir -p $(dir $@)
	$(Q)$(call say,FUZZCC,$<)$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -Wno-missing-braces -MMD -MP -c $< -o $@

$(FUZZ_DIR)/obj/%.o: %.c | $(PROTO_GEN_H)
	@mkdir -p $(dir $@)
	$(Q)$(call say,FUZZCC,$<)$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_DIR)/libfuzzcore.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	$(Q)$(call say,AR,$@)ar rcs $@ $^

$(FUZZ_DIR)/libfuzznode.a: $(FUZZ_NODE_OBJ)
	@rm -f $@
	$(Q)$(call say,AR,$@)ar rcs $@ $^

$(FUZZ_DIR)/libfuzzrouter.a: $(FUZZ_ROUTER_OBJ)
	@rm -f $@
	$(Q)$(call say,AR,$@)ar rcs $@ $^

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_DIR)/obj/tests/fuzz/harness.o \
		$(FUZZ_DIR)/libfuzzrouter.a $(FUZZ_DIR)/libfuzznode.a $(FUZZ_DIR)/libfuzzcore.a
	$(Q)$(call say,LD,$@)$(FUZZ_CC) $(FUZZ_SANFLAGS) -fsanitize=fuzzer -o $@ $^ $(NET_LIBS) $(LIBS)

$(FUZZ_DIR)/fuzz-seeds: $(FUZZ_DIR)/obj/tests/fuzz/seeds.o $(FUZZ_DIR)/obj/tests/fuzz/harness.o \
		$(FUZZ_DIR)/libfuzznode.a $(FUZZ_DIR)/libfuzzcore.a
	$(Q)$(call say,LD,$@)$(FUZZ_CC) $(FUZZ_SANFLAGS) -fsanitize=fuzzer-no-link -o $@ $^ $(NET_LIBS) $(LIBS)

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
# --- end fuzzing ---
