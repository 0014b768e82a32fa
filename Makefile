# strata — `make run` starts a node, `make test` runs every test, `make help` lists the rest.
# Dependencies are Debian packages found with pkg-config. The goals that run something
# (run, test, check, unit, suites, soak, fuzz, bench) install what is missing first
# (apt-get as root; otherwise they print the exact command to run) and only then start a
# second make that builds: nothing here reads pkg-config before the packages are there.
# `make` / `make all` only builds, and says which packages are missing if any are.
# `make install [PREFIX=/usr/local] [DESTDIR=...]` installs the binary, both libraries,
# the public headers, strata.pc, the policies and the Lua module.

CC       ?= cc
SAN      ?=
BUILD    ?= build
PREFIX   ?= /usr/local
DESTDIR  ?=
# `make run`: where the node listens and keeps its data, and its policy file (empty: a copy
# of policies/default.lua in DATA/policy.lua, made at the first run, that you own and edit).
PORT     ?= 7070
DATA     ?= ./data
POLICY   ?=
ARGS     ?=
PKGS_PC  := libzstd libisal libxxhash jansson yajl luajit libcurl libcrypto expat
# What the build needs, what the test suites need besides, and what the benchmarks' peers need.
# npm (for Azurite and s3rver) is checked as a command: a machine may have it from
# elsewhere than Debian's package.
BUILD_PKGS := build-essential pkg-config libzstd-dev libisal-dev libxxhash-dev libluajit2-5.1-dev \
              luajit2 libev-dev libcurl4-openssl-dev libhttp-parser-dev libjansson-dev libyajl-dev libssl-dev \
              libexpat1-dev curl
TEST_PKGS  := lua-busted lua-check clang libclang-rt-14-dev prometheus luarocks lua5.1 etcd-server chromium
TEST_CMDS  := npm
# npm fetches uPlot for the console page at build time (node/server/console/build.sh).
BUILD_CMDS := npm
# Where: one directory for every build (plain, sanitizer, fuzz), outside BUILD's name.
CONSOLE_NPM ?= build/npm-console
BENCH_PKGS := librocksdb-dev wrk tarantool

.DEFAULT_GOAL := all
.PHONY: all deps test-deps bench-deps pkg-check test check unit suites soak fuzz run cluster bench clean help install FORCE

help:
	@echo "make cluster etcd, Azurite and three nodes as one service on 127.0.0.1:7071-7073 (Ctrl-C stops)"
	@echo "make run     build and start a node on 127.0.0.1:$(PORT) with $(DATA) (about 2 min the first"
	@echo "             time on 2 cores; PORT=, DATA=, POLICY=FILE, ARGS='--flag ...' for strata serve)"
	@echo "make test    build and run every test, ends with 'N passed, N failed' (about 8 min on 2 cores;"
	@echo "             SAN=address,undefined or SAN=thread for the sanitizer builds, about 6 min each)"
	@echo "make check   the C unit suites alone (under a minute once built)"
	@echo "make bench   benchmarks, side by side with RocksDB and Tarantool (about 30 min)"
	@echo "make soak    1000 crash kills (SOAK_KILLS=N) and 10000 strata sim seeds (SIM_SOAK_SEEDS=N), about 15 min"
	@echo "make fuzz    every libFuzzer target for FUZZ_SECONDS (default 600) each, about 1 hour"
	@echo "make deps    install the missing Debian packages (as root), or print the command to run"
	@echo "make         only build: build/strata, build/libstrata.a, build/libstrata-core.a, build/strata.so"
	@echo "make install [PREFIX=/usr/local] [DESTDIR=]  the binary, libraries, headers, strata.pc, policies, Lua module"
	@echo "make clean   remove every build directory"

# deps: install (as root) or name the missing packages of PKGS and commands of CMDS.
DEPS_PKGS ?= $(BUILD_PKGS)
DEPS_CMDS ?= $(BUILD_CMDS)
deps:
	@missing=""; \
	if ! command -v dpkg >/dev/null 2>&1; then \
	  echo "strata: not a Debian system; install the equivalents of: $(DEPS_PKGS) $(DEPS_CMDS)"; exit 0; fi; \
	for p in $(DEPS_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	for c in $(DEPS_CMDS); do command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "strata: installing$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null \
	      || { echo "strata: apt-get install$$missing failed"; exit 1; }; \
	  else \
	    echo "strata: missing packages; run:"; echo "  sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

test-deps:
	@$(MAKE) --no-print-directory deps DEPS_PKGS="$(BUILD_PKGS) $(TEST_PKGS)" DEPS_CMDS="$(sort $(BUILD_CMDS) $(TEST_CMDS))"

bench-deps:
	@$(MAKE) --no-print-directory deps DEPS_PKGS="$(BUILD_PKGS) $(TEST_PKGS) $(BENCH_PKGS)" DEPS_CMDS="$(sort $(BUILD_CMDS) $(TEST_CMDS))"

# The goals that run something install first, in this make, then build and run in a second
# one (STRATA_DEPS=done), whose pkg-config calls then see the installed packages.
# STRATA_DEPS counts only on a make's command line (the second pass's, or a sub-make's
# through MAKEFLAGS), never from the environment: a test that runs `make run` as a new user
# would, from a recipe of the second pass, must get a first pass of its own.
RUN_GOALS := run test check unit suites soak fuzz bench cluster
unexport STRATA_DEPS
ifneq ($(filter $(RUN_GOALS),$(MAKECMDGOALS)),)
ifneq ($(origin STRATA_DEPS)$(STRATA_DEPS),command linedone)
STRATA_FIRST_PASS := 1
endif
endif

ifdef STRATA_FIRST_PASS
DEPS_GOAL := $(if $(filter bench,$(MAKECMDGOALS)),bench-deps,$(if $(filter run,$(MAKECMDGOALS)),$(if \
             $(filter-out run,$(filter $(RUN_GOALS),$(MAKECMDGOALS))),test-deps,deps),test-deps))
# Every goal given waits for the one that installs and builds.
$(filter-out $(DEPS_GOAL),$(MAKECMDGOALS)): strata-first-pass ; @:
.PHONY: strata-first-pass
strata-first-pass: $(DEPS_GOAL)
	@$(MAKE) --no-print-directory STRATA_DEPS=done $(MAKECMDGOALS)
else

comma := ,
ifneq ($(SAN),)
  CC    := clang
  BUILD := build-san-$(subst $(comma),-,$(SAN))
  SANFLAGS := -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

# One pkg-config call per package: a package that is missing (libcurl, jansson: only the
# CLI needs them) must not take the flags of the others (luajit.h for `luarocks make`) along.
PKG_CFLAGS := $(foreach p,$(PKGS_PC),$(shell pkg-config --cflags $(p) 2>/dev/null))
PKG_LIBS   := $(foreach p,$(PKGS_PC),$(shell pkg-config --libs $(p) 2>/dev/null))
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -fPIC -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-missing-field-initializers -pthread -D_GNU_SOURCE \
            $(SANFLAGS) $(PKG_CFLAGS)
LDLIBS   += $(PKG_LIBS) -lev -lhttp_parser -lpthread -lm
LDFLAGS  += $(SANFLAGS)

# -MMD -MP: each object gets a .d file next to it naming the headers it includes.
DEPFLAGS := -MMD -MP
# The compiler's diagnostics of each object (and unit test) are also kept in TARGET.warn,
# shown as usual; tests/build/check_build.sh fails when one is not empty.
KEEP_WARN = 2>$@.warn; rc=$$?; cat $@.warn >&2; exit $$rc

# The remote object stores (azure://, s3://) need libcurl, libcrypto and expat. They are in
# libstrata.a when those are found, but linked into a program only when it asks for them
# (node/objstore/url.c refers to them weakly): the strata binary and strata.so do.
OBJSTORE_REMOTE := node/objstore/azure.c node/objstore/azure_xml.c node/objstore/http.c \
                   node/objstore/s3.c node/objstore/s3_xml.c node/objstore/xml.c
REMOTE   := $(shell pkg-config --exists libcurl libcrypto expat 2>/dev/null && echo yes)
REMOTE_OBJ := $(if $(REMOTE),$(OBJSTORE_REMOTE:%.c=$(BUILD)/obj/%.o))
LIB_SRC  := $(filter-out $(if $(REMOTE),,$(OBJSTORE_REMOTE)),$(wildcard node/lib/*.c node/objstore/*.c \
            node/core/*.c node/policy/*.c node/host/*.c)) node/strata.c
# Lua compiled into the library: NAME FILE pairs for node/policy/gen_lua_c.sh (policy_lua.h).
GEN_DIR  := $(BUILD)/gen
GEN_LUA  := policy_builtin_source policies/default.lua \
            policy_prelude_lua node/policy/prelude.lua \
            policy_defaults_lua node/policy/defaults.lua
GEN_OBJ  := $(BUILD)/obj/gen/policy_lua.o
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(GEN_OBJ)
# The core alone, for embedders without the policy runtime (no LuaJIT, no libev):
# node/strata.c compiled again with -DSTRATA_CORE_ONLY, pool.c (libev) left out, and of the
# object stores only fs.
CORE_SRC := $(filter-out node/lib/pool.c,$(wildcard node/lib/*.c)) \
            $(filter-out $(OBJSTORE_REMOTE),$(wildcard node/objstore/*.c)) $(wildcard node/core/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj-core/node/strata.o
CLI_SRC  := $(wildcard node/cli/*.c node/server/*.c node/load/*.c node/cluster/*.c node/net/*.c)
CLI_SRC  += $(wildcard node/sim/*.c)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/console_page.o
LUA_SRC  := $(wildcard node/luamod/*.c)
LUA_OBJ  := $(LUA_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

VERSION  := $(shell sed -n 's/^\#define STRATA_VERSION "\(.*\)"/\1/p' node/strata_types.h)
BINDIR   := $(PREFIX)/bin
LIBDIR   := $(PREFIX)/lib
INCDIR   := $(PREFIX)/include
# Where the rockspec's modules land: strata.* under share/lua/5.1, strata.core under lib/lua/5.1.
LUADIR   := $(PREFIX)/share/lua/5.1
LUACDIR  := $(PREFIX)/lib/lua/5.1

# Only builds; the goals that run something installed the packages in their first pass.
all: $(BUILD)/libstrata.a $(BUILD)/libstrata-core.a $(BUILD)/strata $(BUILD)/strata.so $(BUILD)/strata.pc

# What a compile needs from pkg-config, checked before the first compile: a machine without
# the packages gets their names and the command, not "lua.h: No such file or directory".
CORE_PC := libzstd libisal libxxhash luajit
pkg-check:
	@pkg-config --exists $(CORE_PC) 2>/dev/null || { \
	  echo "strata: pkg-config finds no $$(for p in $(CORE_PC); do pkg-config --exists $$p 2>/dev/null || printf '%s ' $$p; done)(Debian packages missing)."; \
	  echo "  make deps            installs them as root, or prints the command to run;"; \
	  echo "  make run / make test install them first by themselves."; exit 1; }
$(LIB_OBJ) $(CORE_OBJ) $(CLI_OBJ) $(LUA_OBJ) $(UNIT_BIN) $(GEN_DIR)/policy_lua.c: | pkg-check

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@ $(KEEP_WARN)

$(BUILD)/obj-core/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) -DSTRATA_CORE_ONLY -c $< -o $@ $(KEEP_WARN)

# The generated C of the embedded Lua (policy_lua.h declares it).
$(GEN_DIR)/policy_lua.c: node/policy/gen_lua_c.sh $(filter %.lua,$(GEN_LUA))
	@mkdir -p $(dir $@)
	sh node/policy/gen_lua_c.sh $@ $(GEN_LUA)

# The console page (node/server/console.h): uPlot inlined, then embedded as C.
$(GEN_DIR)/console.html: node/server/console/console.html node/server/console/build.sh
	@mkdir -p $(dir $@)
	sh node/server/console/build.sh $@ $(CONSOLE_NPM)
$(GEN_DIR)/console_page.c: $(GEN_DIR)/console.html node/policy/gen_lua_c.sh
	sh node/policy/gen_lua_c.sh $@ console_html $<

$(BUILD)/obj/gen/%.o: $(GEN_DIR)/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@ $(KEEP_WARN)

$(BUILD)/libstrata.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libstrata-core.a: $(CORE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# pkg-config file for the installed library; rewritten only when its text (PREFIX) changes.
# Only static libraries are installed, so Requires and Libs (not .private) carry
# everything libstrata.a needs: `pkg-config --libs strata` links a program as it is.
$(BUILD)/strata.pc: FORCE
	@mkdir -p $(dir $@)
	@{ echo 'prefix=$(PREFIX)'; \
	  echo 'exec_prefix=$${prefix}'; \
	  echo 'libdir=$${exec_prefix}/lib'; \
	  echo 'includedir=$${prefix}/include'; \
	  echo; \
	  echo 'Name: strata'; \
	  echo 'Description: LSM storage engine with LuaJIT merge policies'; \
	  echo 'Version: $(VERSION)'; \
	  echo 'Requires: libzstd libisal libxxhash luajit'; \
	  echo 'Libs: -L$${libdir} -lstrata -lev -lpthread -lm'; \
	  echo 'Cflags: -I$${includedir}'; \
	} >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; echo "wrote $@ (prefix $(PREFIX))"; fi

$(BUILD)/strata: $(CLI_OBJ) $(REMOTE_OBJ) $(BUILD)/libstrata.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(REMOTE_OBJ) $(BUILD)/libstrata.a $(LDLIBS)

# The LuaJIT module: `require "strata.core"` finds it through the all-in-one loader.
$(BUILD)/strata.so: $(LUA_OBJ) $(REMOTE_OBJ) $(BUILD)/libstrata.a
	$(CC) -shared $(LDFLAGS) -o $@ $(LUA_OBJ) $(REMOTE_OBJ) $(BUILD)/libstrata.a -Wl,--exclude-libs,ALL \
	  $(foreach p,libzstd libisal libxxhash $(if $(REMOTE),libcurl libcrypto expat),$(shell pkg-config --libs $(p) 2>/dev/null)) \
	  -lev -lpthread -lm

# The remote object stores' suites, run against real servers by tests/objstore/azure.sh
# (Azurite) and tests/objstore/s3.sh (s3rver).
OBJSTORE_TESTS := $(if $(REMOTE),$(BUILD)/tests/objstore_azure $(BUILD)/tests/objstore_s3)
$(BUILD)/tests/objstore_azure: tests/objstore/test_azure.c $(BUILD)/libstrata.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MF $@.d -MT $@ $(LDFLAGS) -o $@ $< $(BUILD)/libstrata.a $(LDLIBS)
$(BUILD)/tests/objstore_s3: tests/objstore/test_s3.c $(BUILD)/libstrata.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MF $@.d -MT $@ $(LDFLAGS) -o $@ $< $(BUILD)/libstrata.a $(LDLIBS)

# The cluster's placement is in the CLI's objects, not in libstrata.a.
CLUSTER_OBJ := $(BUILD)/obj/node/cluster/cluster.o $(BUILD)/obj/node/cluster/etcd.o $(BUILD)/obj/node/net/curl_ev.o
$(BUILD)/tests/test_cluster: tests/unit/test_cluster.c $(CLUSTER_OBJ) $(BUILD)/libstrata.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MF $@.d -MT $@ $(LDFLAGS) -o $@ $< $(CLUSTER_OBJ) $(BUILD)/libstrata.a $(LDLIBS) $(KEEP_WARN)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libstrata.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MF $@.d -MT $@ $(LDFLAGS) -o $@ $< $(BUILD)/libstrata.a $(LDLIBS) $(KEEP_WARN)

# Header dependencies: the .d files the compiler wrote. An object that exists without its
# .d (built before -MMD, or the .d deleted) is rebuilt once, since its headers are unknown;
# so is one without its .warn (built before the diagnostics were kept).
ALL_OBJ  := $(sort $(LIB_OBJ) $(CORE_OBJ) $(CLI_OBJ) $(LUA_OBJ))
-include $(ALL_OBJ:.o=.d) $(UNIT_BIN:=.d) $(OBJSTORE_TESTS:=.d)
$(foreach o,$(ALL_OBJ),$(if $(and $(wildcard $(o:.o=.d)),$(wildcard $o.warn)),,$(wildcard $o))) \
$(foreach t,$(UNIT_BIN),$(if $(and $(wildcard $t.d),$(wildcard $t.warn)),,$(wildcard $t))): FORCE

unit: all $(UNIT_BIN) $(OBJSTORE_TESTS)

# Lua suites load build/strata.so into the stock LuaJIT, and the fuzz corpora replay
# through their own ASan+UBSan libFuzzer builds, so both run in plain builds only.
ifeq ($(SAN),)
LUA_SUITES := "tests/busted.sh spec tests/spec" "tests/luacheck.sh" "tests/load/live.sh" \
              "sh tests/node/second_opener.sh" "sh tests/node/http_conventions.sh" \
              "sh tests/readme/run.sh" "sh tests/node/checkpoint.sh" "sh tests/node/serve_start.sh" \
              "sh tests/node/rows_by_key.sh" "sh tests/console/console.sh" \
              "sh tests/node/trace.sh" "sh tests/whatif/whatif.sh" "sh tests/node/split_merge.sh"
BUILD_CHECK := "sh tests/build/check_build.sh" "sh tests/build/check_cli.sh" "sh tests/build/fresh_machine.sh"
FUZZ_REPLAY := "sh tests/fuzz/replay.sh"
# Several nodes, etcd and Azurite: its failover time is measured on the plain build.
CLUSTER_SUITE := "sh tests/cluster/cluster.sh"
endif
CRASH_KILLS ?= 60
# `make soak` runs SIM_SOAK_SEEDS seeds of `strata sim` from SIM_SOAK_SEED (make test: 1..200).
SIM_SOAK_SEEDS ?= 10000
SIM_SOAK_SEED ?= 201
SUB_MAKE = $(MAKE) --no-print-directory BUILD=$(BUILD) CC=$(CC) LDLIBS="$(LDLIBS)" SANFLAGS="$(SANFLAGS)"

# Fault injection and the crash-kill harness build against libstrata.a; the fuzzers
# build their own instrumented objects.
suites: unit
	@$(SUB_MAKE) -f tests/fault/fault.mk fault-build
	@$(SUB_MAKE) -f tests/crash/crash.mk crash-build
	@$(if $(SAN),true,$(MAKE) --no-print-directory -f tests/fuzz/fuzz.mk BUILD=$(BUILD) fuzz-build)

# Every suite reports "N passed, N failed"; tests/run.sh adds them up and prints the total last.
test: suites
	@BUILD=$(BUILD) sh tests/run.sh $(UNIT_BIN) $(BUILD)/tests/test_fault "sh tests/objstore/azure.sh" "sh tests/objstore/compact_live.sh fs" \
	  "sh tests/objstore/s3.sh" \
	  "$(BUILD)/crash/crash_driver --kills $(CRASH_KILLS) --strict-tmp" $(FUZZ_REPLAY) $(LUA_SUITES) \
	  $(BUILD_CHECK) $(CLUSTER_SUITE) "sh tests/sim/sim.sh $(BUILD)"

# Long runs, kept out of make test.
soak: suites
	@$(SUB_MAKE) -f tests/crash/crash.mk soak
	$(BUILD)/strata sim --seed $(SIM_SOAK_SEED) --seeds $(SIM_SOAK_SEEDS) --steps 100

fuzz: all
	@$(MAKE) --no-print-directory -f tests/fuzz/fuzz.mk BUILD=$(BUILD) fuzz

# The C unit suites alone, the quick loop while changing the engine.
check: all $(UNIT_BIN)
	@BUILD=$(BUILD) sh tests/run.sh $(UNIT_BIN)

# Starts a node on 127.0.0.1:PORT with DATA (Ctrl-C stops it). Its policy is POLICY, or
# DATA/policy.lua: a copy of policies/default.lua made at the first run, yours to edit (the
# node reloads it when it changes; policies/default.lua is also the built-in default, compiled
# into the binary, so it is not the file to edit).
# Three nodes as one cluster on this machine (node/cluster/demo.sh; "A cluster on one
# machine" in README.md): etcd, Azurite and the nodes, until Ctrl-C.
cluster: all
	@BUILD=$(BUILD) sh node/cluster/demo.sh

run: all
	@policy='$(POLICY)'; \
	if [ -z "$$policy" ]; then \
	  policy='$(DATA)/policy.lua'; \
	  if [ ! -e "$$policy" ]; then \
	    mkdir -p '$(DATA)' && cp policies/default.lua "$$policy" || exit 1; \
	    echo "strata: $$policy is a copy of policies/default.lua: edit it and the node reloads it"; \
	  fi; \
	fi; \
	echo "strata: $(BUILD)/strata serve --listen 127.0.0.1:$(PORT) --data $(DATA) --policy $$policy $(ARGS)"; \
	exec $(BUILD)/strata serve --listen 127.0.0.1:$(PORT) --data '$(DATA)' --policy "$$policy" $(ARGS)

bench: all
	@$(MAKE) --no-print-directory -f tests/bench/bench.mk BUILD=$(BUILD) bench
	@$(MAKE) --no-print-directory -f tests/load/load.mk BUILD=$(BUILD) bench-load

# The Lua modules go where lua/strata-scm-1.rockspec puts them: strata.lua and
# strata/*.lua under share/lua/5.1, the C half (build/strata.so) as strata/core.so.
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR) \
	  $(DESTDIR)$(PREFIX)/share/strata/policies $(DESTDIR)$(LUADIR)/strata $(DESTDIR)$(LUACDIR)/strata
	install -m 755 $(BUILD)/strata $(DESTDIR)$(BINDIR)/strata
	install -m 644 $(BUILD)/libstrata.a $(BUILD)/libstrata-core.a $(DESTDIR)$(LIBDIR)/
	install -m 644 node/strata.h node/strata_types.h $(DESTDIR)$(INCDIR)/
	install -m 644 $(BUILD)/strata.pc $(DESTDIR)$(LIBDIR)/pkgconfig/strata.pc
	install -m 644 policies/*.lua $(DESTDIR)$(PREFIX)/share/strata/policies/
	install -m 644 lua/*.lua $(DESTDIR)$(LUADIR)/
	install -m 644 lua/strata/*.lua $(DESTDIR)$(LUADIR)/strata/
	install -m 755 $(BUILD)/strata.so $(DESTDIR)$(LUACDIR)/strata/core.so

FORCE:

clean:
	rm -rf build build-san-*

endif # STRATA_FIRST_PASS
