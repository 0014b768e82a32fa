build-tsan/obj/node/core/merge_iter.o: node/core/merge_iter.c \
  node/core/../lib/diag.h node/core/../lib/../strata_types.h \
  node/core/../lib/env.h node/core/shard_int.h node/core/manifest.h \
  node/core/../lib/buf.h node/core/../objstore/objstore.h \
  node/core/../objstore/../lib/buf.h node/core/mem.h \
  node/core/../strata_types.h node/core/reaper.h node/core/run.h \
  node/core/shard.h node/core/wal.h

node/core/../lib/diag.h:

node/core/../lib/../strata_types.h:

node/core/../lib/env.h:

node/core/shard_int.h:

node/core/manifest.h:

node/core/../lib/buf.h:

node/core/../objstore/objstore.h:

node/core/../objstore/../lib/buf.h:

node/core/mem.h:

node/core/../strata_types.h:

node/core/reaper.h:

node/core/run.h:

node/core/shard.h:

node/core/wal.h:
