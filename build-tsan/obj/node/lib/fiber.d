build-tsan/obj/node/lib/fiber.o: node/lib/fiber.c node/lib/fiber.h \
  node/lib/diag.h node/lib/../strata_types.h node/lib/env.h

node/lib/fiber.h:

node/lib/diag.h:

node/lib/../strata_types.h:

node/lib/env.h:
