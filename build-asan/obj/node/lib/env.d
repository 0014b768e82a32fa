build-asan/obj/node/lib/env.o: node/lib/env.c node/lib/env.h \
  node/lib/diag.h node/lib/../strata_types.h

node/lib/env.h:

node/lib/diag.h:

node/lib/../strata_types.h:
