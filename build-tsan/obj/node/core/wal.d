build-tsan/obj/node/core/wal.o: node/core/wal.c node/core/wal.h \
  node/core/../strata_types.h node/core/../lib/buf.h \
  node/core/../lib/crc.h node/core/../lib/diag.h \
  node/core/../lib/../strata_types.h node/core/../lib/env.h

node/core/wal.h:

node/core/../strata_types.h:

node/core/../lib/buf.h:

node/core/../lib/crc.h:

node/core/../lib/diag.h:

node/core/../lib/../strata_types.h:

node/core/../lib/env.h:
