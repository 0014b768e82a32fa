build-asan/obj/node/lib/diag.o: node/lib/diag.c node/lib/diag.h \
  node/lib/../strata_types.h node/lib/env.h

node/lib/diag.h:

node/lib/../strata_types.h:

node/lib/env.h:
