# strata — `make run` starts a node, `make test` runs every test.
# Dependencies are Debian packages found with pkg-config; `make deps` installs
# missing ones (apt-get as root) or prints the exact command to run.

CC       ?= cc
SAN      ?=
BUILD    ?= build
PKGS_PC  := libzstd libisal libxxhash jansson luajit libcurl
DEB_PKGS := build-essential pkg-config libzstd-dev libisal-dev libxxhash-dev libluajit2-5.1-dev \
            luajit2 libev-dev libcurl4-openssl-dev lua-busted lua-check libhttp-parser-dev \
            libjansson-dev clang libclang-rt-14-dev curl prometheus
BENCH_PKGS := librocksdb-dev wrk

comma := ,
ifneq ($(SAN),)
  CC    := clang
  BUILD := build-san-$(subst $(comma),-,$(SAN))
  SANFLAGS := -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -fPIC -Wall -Wextra -Wshadow -Wno-unused-parameter -pthread -D_GNU_SOURCE \
            $(SANFLAGS) $(shell pkg-config --cflags $(PKGS_PC) 2>/dev/null)
LDLIBS   += $(shell pkg-config --libs $(PKGS_PC) 2>/dev/null) -lev -lhttp_parser -lpthread -lm
LDFLAGS  += $(SANFLAGS)

LIB_SRC  := $(wildcard node/lib/*.c node/objstore/*.c node/core/*.c node/policy/*.c) node/strata.c
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_SRC  := $(wildcard node/cli/*.c node/server/*.c node/load/*.c)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
LUA_SRC  := $(wildcard node/luamod/*.c)
LUA_OBJ  := $(LUA_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all deps bench-deps test unit suites soak fuzz run bench clean help

all: deps $(BUILD)/libstrata.a $(BUILD)/strata $(BUILD)/strata.so

help:
	@echo "make run    build and start a node on ./data with policies/default.lua"
	@echo "make test   build and run every test (SAN=address,undefined or SAN=thread for sanitizers)"
	@echo "make bench  benchmarks, side by side with RocksDB"
	@echo "make soak   the crash-kill harness for 1000+ kills (SOAK_KILLS=N)"
	@echo "make fuzz   every libFuzzer target for FUZZ_SECONDS (default 600) each"

deps:
	@missing=""; \
	if ! command -v dpkg >/dev/null 2>&1; then \
	  echo "strata: not a Debian system; install the equivalents of: $(DEB_PKGS)"; exit 0; fi; \
	for p in $(DEB_PKGS) $(EXTRA_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "strata: installing$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null \
	      || { echo "strata: apt-get install failed"; exit 1; }; \
	  else \
	    echo "strata: missing packages; run:"; echo "  sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

bench-deps:
	@$(MAKE) --no-print-directory deps EXTRA_PKGS="$(BENCH_PKGS)"

$(BUILD)/obj/%.o: %.c $(wildcard node/*.h node/*/*.h tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libstrata.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/strata: $(CLI_OBJ) $(BUILD)/libstrata.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libstrata.a $(LDLIBS)

# The LuaJIT module: `require "strata.core"` finds it through the all-in-one loader.
$(BUILD)/strata.so: $(LUA_OBJ) $(BUILD)/libstrata.a
	$(CC) -shared $(LDFLAGS) -o $@ $(LUA_OBJ) $(BUILD)/libstrata.a -Wl,--exclude-libs,ALL \
	  $(shell pkg-config --libs libzstd libisal libxxhash jansson) -lev -lpthread -lm

$(BUILD)/tests/%: tests/unit/%.c tests/unit/harness.h $(BUILD)/libstrata.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libstrata.a $(LDLIBS)

unit: all $(UNIT_BIN)

# Lua suites load build/strata.so into the stock LuaJIT, and the fuzz corpora replay
# through their own ASan+UBSan libFuzzer builds, so both run in plain builds only.
ifeq ($(SAN),)
LUA_SUITES := "tests/busted.sh spec tests/spec" "tests/luacheck.sh" "tests/load/live.sh" \
              "tests/node/second_opener.sh"
FUZZ_REPLAY := "sh tests/fuzz/replay.sh"
endif
CRASH_KILLS ?= 60
SUB_MAKE = $(MAKE) --no-print-directory BUILD=$(BUILD) CC=$(CC) LDLIBS="$(LDLIBS)" SANFLAGS="$(SANFLAGS)"

# Fault injection and the crash-kill harness build against libstrata.a; the fuzzers
# build their own instrumented objects.
suites: unit
	@$(SUB_MAKE) -f tests/fault/fault.mk fault-build
	@$(SUB_MAKE) -f tests/crash/crash.mk crash-build
	@$(if $(SAN),true,$(MAKE) --no-print-directory -f tests/fuzz/fuzz.mk BUILD=$(BUILD) fuzz-build)

# Every suite reports "N passed, N failed"; tests/run.sh adds them up and prints the total last.
test: suites
	@BUILD=$(BUILD) sh tests/run.sh $(UNIT_BIN) $(BUILD)/tests/test_fault \
	  "$(BUILD)/crash/crash_driver --kills $(CRASH_KILLS) --strict-tmp" $(FUZZ_REPLAY) $(LUA_SUITES)

# Long runs, kept out of make test.
soak: suites
	@$(SUB_MAKE) -f tests/crash/crash.mk soak

fuzz: all
	@$(MAKE) --no-print-directory -f tests/fuzz/fuzz.mk BUILD=$(BUILD) fuzz

# Starts a node on 127.0.0.1:7070 with ./data and policies/default.lua (Ctrl-C stops it).
run: all
	$(BUILD)/strata serve --listen 127.0.0.1:7070 --data ./data --policy policies/default.lua

bench: bench-deps all
	@$(MAKE) --no-print-directory -f tests/bench/bench.mk BUILD=$(BUILD) bench
	@$(MAKE) --no-print-directory -f tests/load/load.mk BUILD=$(BUILD) bench-load

clean:
	rm -rf build build-san-*
