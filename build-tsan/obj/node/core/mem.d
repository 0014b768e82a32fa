build-tsan/obj/node/core/mem.o: node/core/mem.c node/core/mem.h \
  node/core/../strata_types.h node/core/../lib/diag.h \
  node/core/../lib/../strata_types.h node/core/../lib/env.h

node/core/mem.h:

node/core/../strata_types.h:

node/core/../lib/diag.h:

node/core/../lib/../strata_types.h:

node/core/../lib/env.h:
