# tests/bench/bench.mk — build and run the benchmarks against $(BUILD)/libstrata.a.
# Invoked by the top-level `make bench` (which first builds the library and installs
# librocksdb-dev). Benchmarks print figures; they never fail on a speed target.
#
# Knobs (environment): BENCH_DIR (data directory, default $TMPDIR or /tmp),
# BENCH_SECONDS, BENCH_THREADS, BENCH_BATCHES (bench_append);
# BENCH_MERGE_GEN_MB, BENCH_MERGE_GENS, BENCH_MERGE_ROCKSDB (bench_merge);
# BENCH_ONLY=append|merge runs one of them.

CC      ?= cc
BUILD   ?= build
LIBSTRATA ?= $(BUILD)/libstrata.a
BENCH_PC := libzstd libisal libxxhash
# jansson is linked when present: later layers of the library may use it.
BENCH_PC += $(shell pkg-config --exists jansson 2>/dev/null && echo jansson)

BENCH_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Wno-unused-parameter -pthread \
                -D_GNU_SOURCE $(shell pkg-config --cflags $(BENCH_PC))
BENCH_ROCKSDB_VERSION := $(shell dpkg-query -W -f='$${Version}' librocksdb-dev 2>/dev/null)
ifneq ($(BENCH_ROCKSDB_VERSION),)
  BENCH_CFLAGS += -DBENCH_ROCKSDB_VERSION='"$(BENCH_ROCKSDB_VERSION) (Debian librocksdb-dev)"'
endif
BENCH_LDLIBS := $(shell pkg-config --libs $(BENCH_PC)) -lrocksdb -lpthread -lm

BENCH_BIN := $(BUILD)/bench/bench_append $(BUILD)/bench/bench_merge

.PHONY: bench bench-build

bench: bench-build
	@sh tests/bench/run.sh $(BUILD)/bench

bench-build: $(BENCH_BIN)

$(BUILD)/bench/%: tests/bench/%.c tests/bench/bench_util.h node/strata.h $(LIBSTRATA)
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -o $@ $< $(LIBSTRATA) $(BENCH_LDLIBS)

$(LIBSTRATA):
	@echo "bench: $@ is missing; build the library first (top-level make)"; exit 1
