build-tsan/obj/node/core/run.o: node/core/run.c node/core/run.h \
  node/core/../objstore/objstore.h node/core/../objstore/../lib/buf.h \
  node/core/../lib/crc.h node/core/../lib/diag.h \
  node/core/../objstore/../lib/../strata_types.h node/core/../lib/env.h \
  node/core/../lib/ratelimit.h

node/core/run.h:

node/core/../objstore/objstore.h:

node/core/../objstore/../lib/buf.h:

node/core/../lib/crc.h:

node/core/../lib/diag.h:

node/core/../objstore/../lib/../strata_types.h:

node/core/../lib/env.h:

node/core/../lib/ratelimit.h:
