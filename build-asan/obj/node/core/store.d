build-asan/obj/node/core/store.o: node/core/store.c \
  node/core/../lib/diag.h node/core/../lib/../strata_types.h \
  node/core/../lib/env.h node/core/../strata_types.h \
  node/core/../lib/ratelimit.h node/core/reaper.h \
  node/core/../objstore/objstore.h node/core/../objstore/../lib/buf.h \
  node/core/shard.h node/core/run.h node/core/store.h

node/core/../lib/diag.h:

node/core/../lib/../strata_types.h:

node/core/../lib/env.h:

node/core/../strata_types.h:

node/core/../lib/ratelimit.h:

node/core/reaper.h:

node/core/../objstore/objstore.h:

node/core/../objstore/../lib/buf.h:

node/core/shard.h:

node/core/run.h:

node/core/store.h:
