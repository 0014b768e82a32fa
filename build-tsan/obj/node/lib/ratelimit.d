build-tsan/obj/node/lib/ratelimit.o: node/lib/ratelimit.c \
  node/lib/ratelimit.h node/lib/diag.h node/lib/../strata_types.h \
  node/lib/env.h

node/lib/ratelimit.h:

node/lib/diag.h:

node/lib/../strata_types.h:

node/lib/env.h:
