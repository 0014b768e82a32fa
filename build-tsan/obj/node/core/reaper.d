build-tsan/obj/node/core/reaper.o: node/core/reaper.c node/core/reaper.h \
  node/core/../objstore/objstore.h node/core/../objstore/../lib/buf.h \
  node/core/../lib/diag.h node/core/../objstore/../lib/../strata_types.h \
  node/core/../lib/env.h

node/core/reaper.h:

node/core/../objstore/objstore.h:

node/core/../objstore/../lib/buf.h:

node/core/../lib/diag.h:

node/core/../objstore/../lib/../strata_types.h:

node/core/../lib/env.h:
