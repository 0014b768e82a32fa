build-tsan/obj/node/host/host.o: node/host/host.c node/host/host.h \
  node/host/../lib/pool.h node/host/../lib/diag.h \
  node/host/../lib/../strata_types.h node/host/../lib/env.h

node/host/host.h:

node/host/../lib/pool.h:

node/host/../lib/diag.h:

node/host/../lib/../strata_types.h:

node/host/../lib/env.h:
