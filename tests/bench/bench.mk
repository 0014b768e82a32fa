# tests/bench/bench.mk — build and run the benchmarks against $(BUILD)/libstrata.a.
# Invoked by the top-level `make bench` (which first builds the library and the strata
# binary and installs librocksdb-dev and wrk). Benchmarks print figures; they never fail
# on a speed target.
#
# Knobs (environment): BENCH_DIR (data directory, default $TMPDIR or /tmp),
# BENCH_SECONDS, BENCH_THREADS, BENCH_BATCHES (bench_append, bench_http);
# BENCH_MERGE_GEN_MB, BENCH_MERGE_GENS, BENCH_MERGE_VALUE, BENCH_MERGE_SHAPES,
# BENCH_MERGE_ZSTD_LEVEL, BENCH_MERGE_ROCKSDB, BENCH_MERGE_ROCKSDB_CONFIGS, BENCH_MERGE_THREADS,
# BENCH_MERGE_KEEP (bench_merge);
# BENCH_POLICY_RELOADS, BENCH_POLICY_THREADS, BENCH_POLICY_RATE, BENCH_POLICY_SYNC,
# BENCH_POLICY_SHARDS, BENCH_SWEEP_INTERVAL_MS, BENCH_SWEEP_SECONDS (bench_policy);
# BENCH_HTTP_SECONDS, BENCH_HTTP_BATCHES, BENCH_HTTP_CLIENTS (bench_http);
# BENCH_STALL_GENS, BENCH_STALL_GEN_MB, BENCH_STALL_VALUE, BENCH_STALL_IDLE_S,
# BENCH_STALL_PCT, BENCH_STALL_CAP_S, BENCH_STALL_RATE, BENCH_STALL_SETTLE_S,
# BENCH_STALL_ENGINES, BENCH_STALL_BYTES_PER_SYNC, BENCH_STALL_SFR,
# BENCH_STALL_ROCKSDB_BYTES_PER_SYNC, BENCH_STALL_MERGE_IOPRIO, BENCH_STALL_SAMPLES,
# BENCH_STALL_MERGE_THREADS
# (bench_stall; a quick run: BENCH_STALL_GENS=8 BENCH_STALL_GEN_MB=16);
# BENCH_GROWTH_GENS, BENCH_GROWTH_SHARDS, BENCH_GROWTH_ROWS, BENCH_GROWTH_REPLAY_MB,
# BENCH_GROWTH_ENGINES, BENCH_GROWTH_SVG (bench_growth);
# BENCH_GET_GENS, BENCH_GET_ROWS, BENCH_GET_MERGED_ROWS, BENCH_GET_SAMPLES, BENCH_GET_ROCKSDB,
# BENCH_GET_CACHE (bench_get);
# BENCH_OBJSTORE_GENS, BENCH_OBJSTORE_GEN_MB, BENCH_OBJSTORE_RATE (bench_objstore.sh);
# BENCH_WALSYNC_S, BENCH_WALSYNC_MB_S (bench_walsync);
# BENCH_CLUSTER_KILLS, BENCH_CLUSTER_SECONDS (bench_cluster.sh);
# BENCH_ONLY=append|merge|policy|http|stall|stall-http|walsync|growth|get|objstore|frame|sim|cluster|console|trace|whatif runs one of them.

CC      ?= cc
BUILD   ?= build
LIBSTRATA ?= $(BUILD)/libstrata.a
STRATA_BIN ?= $(BUILD)/strata
# The library holds the policy runtime: LuaJIT and libev come with it.
BENCH_PC := libzstd libisal libxxhash luajit
# jansson and libcurl are linked when present: later layers of the library may use them.
BENCH_PC += $(shell pkg-config --exists jansson 2>/dev/null && echo jansson)
BENCH_PC += $(shell pkg-config --exists libcurl 2>/dev/null && echo libcurl)

BENCH_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-missing-field-initializers -pthread \
                -D_GNU_SOURCE $(shell pkg-config --cflags $(BENCH_PC))
BENCH_ROCKSDB_VERSION := $(shell dpkg-query -W -f='$${Version}' librocksdb-dev 2>/dev/null)
ifneq ($(BENCH_ROCKSDB_VERSION),)
  BENCH_CFLAGS += -DBENCH_ROCKSDB_VERSION='"$(BENCH_ROCKSDB_VERSION) (Debian librocksdb-dev)"'
endif
BENCH_LDLIBS := $(shell pkg-config --libs $(BENCH_PC)) -lev -lpthread -lm
BENCH_ROCKSDB_LDLIBS := -lrocksdb

BENCH_BIN := $(BUILD)/bench/bench_append $(BUILD)/bench/bench_merge $(BUILD)/bench/bench_policy \
             $(BUILD)/bench/bench_stall $(BUILD)/bench/bench_growth $(BUILD)/bench/bench_get \
             $(BUILD)/bench/bench_walsync

.PHONY: bench bench-build

bench: bench-build
	@STRATA_BIN=$(STRATA_BIN) sh tests/bench/run.sh $(BUILD)/bench

bench-build: $(BENCH_BIN)

# bench_policy does not use RocksDB.
$(BUILD)/bench/bench_policy: tests/bench/bench_policy.c tests/bench/bench_util.h node/strata.h $(LIBSTRATA)
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $< $(LIBSTRATA) $(BENCH_LDLIBS)

# bench_stall also sets the fs store's bytes_per_sync and wraps env seams.
$(BUILD)/bench/bench_stall: node/lib/env.h node/objstore/objstore.h

$(BUILD)/bench/%: tests/bench/%.c tests/bench/bench_util.h node/strata.h $(LIBSTRATA)
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $< $(LIBSTRATA) $(BENCH_ROCKSDB_LDLIBS) $(BENCH_LDLIBS)

$(LIBSTRATA):
	@echo "bench: $@ is missing; build the library first (top-level make)"; exit 1
