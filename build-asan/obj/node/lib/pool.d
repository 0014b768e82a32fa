build-asan/obj/node/lib/pool.o: node/lib/pool.c node/lib/pool.h \
  node/lib/diag.h node/lib/../strata_types.h node/lib/env.h \
  node/lib/fiber.h

node/lib/pool.h:

node/lib/diag.h:

node/lib/../strata_types.h:

node/lib/env.h:

node/lib/fiber.h:
