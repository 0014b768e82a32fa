build-tsan/obj/node/lib/hist.o: node/lib/hist.c node/lib/hist.h \
  node/lib/../strata_types.h node/lib/diag.h node/lib/env.h

node/lib/hist.h:

node/lib/../strata_types.h:

node/lib/diag.h:

node/lib/env.h:
