# tests/fault/fault.mk — the fault-injection test against $(BUILD)/libstrata.a.
#
#   make -f tests/fault/fault.mk BUILD=build fault-test
#
# $(BUILD)/tests/test_fault is a tests/unit-style binary ("# test_fault: N passed, N failed");
# the top-level test list may run it directly. The caller passes LDLIBS="$(LDLIBS)" and,
# for sanitizer builds, SANFLAGS="$(SANFLAGS)".

CC        ?= cc
BUILD     ?= build
LIBSTRATA ?= $(BUILD)/libstrata.a
FAULT_PC  := libzstd libisal libxxhash
LDLIBS    ?= $(shell pkg-config --libs $(FAULT_PC)) -lpthread -lm
FAULT_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Wno-unused-parameter -Wno-missing-field-initializers -pthread \
                -D_GNU_SOURCE $(shell pkg-config --cflags $(FAULT_PC)) $(SANFLAGS)

.PHONY: fault-build fault-test

fault-build: $(BUILD)/tests/test_fault

fault-test: fault-build
	$(BUILD)/tests/test_fault

$(BUILD)/tests/test_fault: tests/fault/test_fault.c tests/unit/harness.h node/strata.h $(LIBSTRATA)
	@mkdir -p $(dir $@)
	$(CC) $(FAULT_CFLAGS) -o $@ $< $(LIBSTRATA) $(LDLIBS) $(SANFLAGS)
