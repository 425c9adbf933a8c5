# Shoal -- one Makefile for the whole tree.
#
# Targets
#   all (default)  build libraries, programs and tests into $(BUILD)
#   test           install missing Debian packages, build, run every test
#   demo           install missing Debian packages, build, run the demonstration
#   bench          storage-engine benchmark (1M items; prints figures, asserts nothing)
#   bench-cluster  shoal_bench against a local 3-node cluster (prints figures)
#   bench-http     the HTTP endpoint vs the native protocol on one cluster (ratios)
#   format         clang-format every C source and header in place
#   clean          remove build directories
#
# Variables
#   BUILD=dir                 output directory (default build, or build-san with SANITIZE)
#   SANITIZE=address,undefined  compile and link with these -fsanitize= checks
#   OPT=-O2                   optimisation flags
#   CC=cc                     compiler
#   TESTS='test_num test_expr'  run only these unit test binaries
#   V=1                       show full compiler command lines
#   SHOAL_SEED=n              seed for randomised tests (printed by every such test)
#   BENCH_ARGS='-n 100000'    arguments for st_bench (see tests/bench/st_bench.c)
#   JOBS=n                    parallel compile jobs for test/demo/bench (default: nproc)

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
NET_LIBS := -lraft -luv -lnng
TESTLIB_OBJ := $(call obj,$(TESTLIB_SRC))
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
IT_BIN   := $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(IT_SRC))
PROG_BIN := $(if $(wildcard node/main.c),$(BUILD)/bin/shoal-node) \
            $(if $(wildcard router/main.c),$(BUILD)/bin/shoal-router) \
            $(if $(CLI_SRC),$(BUILD)/bin/shoal)
TOOL_BIN := $(patsubst tests/tools/%.c,$(BUILD)/bin/%,$(TOOL_SRC))
BENCH_BIN := $(patsubst tests/bench/%.c,$(BUILD)/bin/%,$(BENCH_SRC))

.PHONY: all test unit demo bench bench-cluster bench-http chaos format clean deps
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

bench-cluster: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) all
	tests/tools/bench-cluster.sh $(BUILD)

bench-http: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) all
	tests/tools/bench-http.sh $(BUILD)

# The long chaos run (tests/integration/it_chaos.c; `make test` runs 20 s of it).
CHAOS_SECS ?= 600
chaos: deps-checked
	@$(MAKE) --no-print-directory -j$(JOBS) all
	CHAOS_SECS=$(CHAOS_SECS) $(BUILD)/tests/it_chaos

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-san
