build-tsan/obj/node/lib/buf.o: node/lib/buf.c node/lib/buf.h \
  node/lib/../strata_types.h node/lib/env.h

node/lib/buf.h:

node/lib/../strata_types.h:

node/lib/env.h:
