build-asan/tests/test_host: tests/unit/test_host.c \
  tests/unit/../../node/host/host.h \
  tests/unit/../../node/host/../lib/pool.h \
  tests/unit/../../node/lib/fiber.h tests/unit/../../node/lib/env.h \
  tests/unit/../../node/strata_types.h tests/unit/harness.h

tests/unit/../../node/host/host.h:

tests/unit/../../node/host/../lib/pool.h:

tests/unit/../../node/lib/fiber.h:

tests/unit/../../node/lib/env.h:

tests/unit/../../node/strata_types.h:

tests/unit/harness.h:
