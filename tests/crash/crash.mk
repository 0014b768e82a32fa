# tests/crash/crash.mk — the crash-kill harness (crash_driver + crash_child) against
# $(BUILD)/libstrata.a.
#
#   make -f tests/crash/crash.mk BUILD=build crash-test   short run: CRASH_KILLS (60) kills
#   make -f tests/crash/crash.mk BUILD=build soak         SOAK_KILLS (1000) kills, with figures
#
# Knobs: CRASH_SEED / SOAK_SEED (default: time-based; every run prints its seed and a
# command reproducing it), CRASH_FLAGS (extra driver flags, e.g. --strict-tmp --verbose),
# TMPDIR (where the store lives). The caller passes the library's link needs:
# LDLIBS="$(LDLIBS)" and, for sanitizer builds, SANFLAGS="$(SANFLAGS)".

CC          ?= cc
BUILD       ?= build
LIBSTRATA   ?= $(BUILD)/libstrata.a
CRASH_KILLS ?= 60
SOAK_KILLS  ?= 1000
CRASH_FLAGS ?= --strict-tmp
CRASH_PC    := libzstd libisal libxxhash
LDLIBS      ?= $(shell pkg-config --libs $(CRASH_PC)) -lpthread -lm
CRASH_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-missing-field-initializers -pthread \
                -D_GNU_SOURCE $(shell pkg-config --cflags $(CRASH_PC)) $(SANFLAGS)
CRASH_BIN   := $(BUILD)/crash/crash_driver $(BUILD)/crash/crash_child

.PHONY: crash-build crash-test soak

crash-build: $(CRASH_BIN)

crash-test: crash-build
	$(BUILD)/crash/crash_driver --kills $(CRASH_KILLS) $(if $(CRASH_SEED),--seed $(CRASH_SEED)) $(CRASH_FLAGS)

soak: crash-build
	$(BUILD)/crash/crash_driver --kills $(SOAK_KILLS) $(if $(SOAK_SEED),--seed $(SOAK_SEED)) $(CRASH_FLAGS)

$(BUILD)/crash/%: tests/crash/%.c tests/crash/crash_common.h node/strata.h $(LIBSTRATA)
	@mkdir -p $(dir $@)
	$(CC) $(CRASH_CFLAGS) -o $@ $< $(LIBSTRATA) $(LDLIBS) $(SANFLAGS)
