# tests/load/load.mk — load tests against a live node (tests/load/live.sh starts
# `strata serve` on an ephemeral port in a temporary directory and stops it by PID).
# Invoked by the top-level Makefile once $(BUILD)/strata is built:
#
#   $(MAKE) -f tests/load/load.mk BUILD=$(BUILD) load-smoke   # make test: smoke.lua, correctness only;
#                                                            # prints "# load-smoke: N passed, N failed"
#   $(MAKE) -f tests/load/load.mk BUILD=$(BUILD) bench-load   # make bench: append_during_merge.lua and
#                                                            # mixed.lua, summaries and the p99.9 ratio
#   $(MAKE) -f tests/load/load.mk BUILD=$(BUILD) load-spec    # busted specs of strata load
#
# Knobs (environment): LOAD_DURATION (bench, default 30s), LOAD_SHARDS, LOAD_SYNC,
# LOAD_ADM_ARGS, LOAD_MIXED_ARGS (see tests/load/live.sh).

BUILD  ?= build
STRATA ?= $(BUILD)/strata

.PHONY: load-smoke bench-load load-spec

load-smoke: $(STRATA)
	@STRATA_BIN=$(STRATA) sh tests/load/live.sh smoke

bench-load: $(STRATA)
	@STRATA_BIN=$(STRATA) sh tests/load/live.sh bench

load-spec: $(STRATA)
	@BUILD=$(BUILD) sh tests/busted.sh load-spec tests/spec/load_spec.lua

$(STRATA):
	@echo "load: $@ is missing; build it first (top-level make)"; exit 1
