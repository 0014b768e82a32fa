# tests/fuzz/fuzz.mk — libFuzzer targets for every parser, their seed corpora and runs.
#
#   make -f tests/fuzz/fuzz.mk BUILD=build fuzz          build, then run each target for
#                                                        FUZZ_SECONDS (default 600) on its corpus
#   make -f tests/fuzz/fuzz.mk BUILD=build fuzz-replay   build, then run every corpus file once
#   make -f tests/fuzz/fuzz.mk BUILD=build fuzz-seeds    rewrite the seed-* files of the corpora
#                                                        with the real writers
#   make -f tests/fuzz/fuzz.mk BUILD=build fuzz-merge    fold new coverage found by `fuzz`
#                                                        into tests/fuzz/corpus (minimised)
#
# The engine sources the targets need are compiled here with coverage instrumentation
# (-fsanitize=fuzzer-no-link): an uninstrumented libstrata.a would leave libFuzzer blind.
# New inputs go to $(BUILD)/fuzz/corpus-<target>, crashes to $(BUILD)/fuzz/artifacts/<target>/;
# a crash's input belongs in tests/fuzz/corpus/<target>/ once the bug is fixed.

CLANG        ?= clang
BUILD        ?= build
FUZZ_SECONDS ?= 600
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_PC      := libzstd libisal libxxhash
# LuaJIT, for the policy target (its headers are harmless to the others).
FUZZ_LUA_PC  := $(shell pkg-config --exists luajit 2>/dev/null && echo luajit)
# Targets: the parsers of the core always; HTTP, the server's batch codecs and policy once
# their subsystems exist.
FUZZ_TARGETS ?= wal run manifest azxml s3xml $(if $(wildcard tests/fuzz/fuzz_http.c),http) \
                $(if $(wildcard node/server/batch.c),batch) \
                $(if $(and $(FUZZ_LUA_PC),$(wildcard node/policy/policy.c)),policy)
FUZZ_LIB_SRC ?= node/lib/bcache.c node/lib/buf.c node/lib/crc.c node/lib/diag.c node/lib/env.c node/lib/ratelimit.c node/lib/fiber.c \
                node/lib/trace.c node/objstore/objstore.c node/objstore/fs.c node/objstore/url.c node/core/wal.c \
                node/core/wal_fdcache.c node/core/wal_scan.c node/core/wal_store.c node/core/wal_repair.c \
                node/core/reaper.c node/core/run.c node/core/manifest.c
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=gnu11 -O1 -g -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-missing-field-initializers -pthread \
                -D_GNU_SOURCE $(shell pkg-config --cflags $(FUZZ_PC) $(FUZZ_LUA_PC) \
                $(shell pkg-config --exists jansson 2>/dev/null && echo jansson)) $(FUZZ_SAN)
FUZZ_LDLIBS  := $(shell pkg-config --libs $(FUZZ_PC)) -lpthread -lm
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
# The Lua that policy.c embeds, generated as in the top-level Makefile (policy_lua.h).
FUZZ_GEN_LUA := policy_builtin_source policies/default.lua \
                policy_prelude_lua node/policy/prelude.lua \
                policy_defaults_lua node/policy/defaults.lua
FUZZ_GEN_OBJ := $(FUZZ_DIR)/obj/gen/policy_lua.o
FUZZ_BIN     := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)

.PHONY: fuzz fuzz-build fuzz-replay fuzz-seeds fuzz-merge

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	@BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run_fuzz.sh $(FUZZ_TARGETS)

fuzz-replay: fuzz-build
	@BUILD=$(BUILD) sh tests/fuzz/replay.sh $(FUZZ_TARGETS)

fuzz-seeds: $(FUZZ_DIR)/fuzz_seeds
	$(FUZZ_DIR)/fuzz_seeds tests/fuzz/corpus
	@mkdir -p tests/fuzz/corpus/policy
	@for f in policies/*.lua; do cp $$f tests/fuzz/corpus/policy/seed-$$(basename $$f .lua); done

fuzz-merge: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  if [ -d $(FUZZ_DIR)/corpus-$$t ]; then \
	    $(FUZZ_DIR)/fuzz_$$t -merge=1 tests/fuzz/corpus/$$t $(FUZZ_DIR)/corpus-$$t 2>&1 | tail -1; \
	  fi; \
	done

# The HTTP target links the whole node as `strata serve` builds it (minus server.c,
# which owns the process: lock file, signals).
FUZZ_NODE_SRC := $(filter-out $(FUZZ_LIB_SRC),$(sort $(wildcard node/lib/*.c node/objstore/*.c \
                 node/core/*.c node/policy/*.c node/host/*.c node/cluster/*.c node/net/*.c node/sim/*.c) node/strata.c \
                 $(filter-out node/server/server.c,$(wildcard node/server/*.c))))
FUZZ_NODE_PC  := $(shell for p in jansson yajl luajit libcurl libcrypto expat; do pkg-config --exists $$p 2>/dev/null && echo $$p; done)
# and the console's page, built as the top-level Makefile builds it.
FUZZ_CONSOLE_OBJ := $(FUZZ_DIR)/obj/gen/console_page.o
$(FUZZ_DIR)/fuzz_http: FUZZ_EXTRA = $(FUZZ_NODE_SRC:%.c=$(FUZZ_DIR)/obj/%.o) $(FUZZ_GEN_OBJ) $(FUZZ_CONSOLE_OBJ) \
                                    $(shell pkg-config --libs $(FUZZ_NODE_PC)) -lev -lhttp_parser
$(FUZZ_DIR)/fuzz_http: $(FUZZ_NODE_SRC:%.c=$(FUZZ_DIR)/obj/%.o) $(FUZZ_GEN_OBJ) $(FUZZ_CONSOLE_OBJ)
$(FUZZ_DIR)/gen/console.html: node/server/console/console.html node/server/console/build.sh
	@mkdir -p $(dir $@)
	sh node/server/console/build.sh $@ build/npm-console
$(FUZZ_DIR)/gen/console_page.c: $(FUZZ_DIR)/gen/console.html node/policy/gen_lua_c.sh
	sh node/policy/gen_lua_c.sh $@ console_html $<

# The batch target adds the server's batch codecs, base64, the UTF-8 check, jansson and yajl.
$(FUZZ_DIR)/fuzz_batch: FUZZ_EXTRA = $(FUZZ_DIR)/obj/node/server/batch.o $(FUZZ_DIR)/obj/node/lib/base64.o \
                                     $(FUZZ_DIR)/obj/node/lib/text.o $(shell pkg-config --libs jansson yajl)
$(FUZZ_DIR)/fuzz_batch: $(FUZZ_DIR)/obj/node/server/batch.o $(FUZZ_DIR)/obj/node/lib/base64.o \
                        $(FUZZ_DIR)/obj/node/lib/text.o

# The Azure XML target adds its parser, the shared XML helpers and expat.
$(FUZZ_DIR)/fuzz_azxml: FUZZ_EXTRA = $(FUZZ_DIR)/obj/node/objstore/azure_xml.o $(FUZZ_DIR)/obj/node/objstore/xml.o \
                                     $(shell pkg-config --libs expat)
$(FUZZ_DIR)/fuzz_azxml: $(FUZZ_DIR)/obj/node/objstore/azure_xml.o $(FUZZ_DIR)/obj/node/objstore/xml.o

# The S3 XML target adds its parser, the shared XML helpers and expat.
$(FUZZ_DIR)/fuzz_s3xml: FUZZ_EXTRA = $(FUZZ_DIR)/obj/node/objstore/s3_xml.o $(FUZZ_DIR)/obj/node/objstore/xml.o \
                                     $(shell pkg-config --libs expat)
$(FUZZ_DIR)/fuzz_s3xml: $(FUZZ_DIR)/obj/node/objstore/s3_xml.o $(FUZZ_DIR)/obj/node/objstore/xml.o

# The policy target adds the policy loader and LuaJIT.
$(FUZZ_DIR)/fuzz_policy: FUZZ_EXTRA = $(FUZZ_DIR)/obj/node/policy/policy.o \
                                      $(FUZZ_DIR)/obj/node/lib/text.o $(FUZZ_GEN_OBJ) \
                                      $(shell pkg-config --libs $(FUZZ_LUA_PC))
$(FUZZ_DIR)/fuzz_policy: $(FUZZ_DIR)/obj/node/policy/policy.o $(FUZZ_DIR)/obj/node/lib/text.o \
                         $(FUZZ_GEN_OBJ)

$(FUZZ_DIR)/obj/%.o: %.c $(wildcard node/*.h node/*/*.h)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_DIR)/gen/policy_lua.c: node/policy/gen_lua_c.sh $(filter %.lua,$(FUZZ_GEN_LUA))
	@mkdir -p $(dir $@)
	sh node/policy/gen_lua_c.sh $@ $(FUZZ_GEN_LUA)

$(FUZZ_DIR)/obj/gen/%.o: $(FUZZ_DIR)/gen/%.c
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_DIR)/fuzz_seeds: tests/fuzz/fuzz_seeds.c tests/fuzz/fuzz_util.h $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_LIB_OBJ) $(FUZZ_LDLIBS)

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB_OBJ) $(FUZZ_EXTRA) $(FUZZ_LDLIBS)
