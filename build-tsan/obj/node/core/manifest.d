build-tsan/obj/node/core/manifest.o: node/core/manifest.c \
  node/core/manifest.h node/core/../lib/buf.h \
  node/core/../objstore/objstore.h node/core/../objstore/../lib/buf.h \
  node/core/../lib/crc.h node/core/../lib/diag.h \
  node/core/../lib/../strata_types.h node/core/../lib/env.h

node/core/manifest.h:

node/core/../lib/buf.h:

node/core/../objstore/objstore.h:

node/core/../objstore/../lib/buf.h:

node/core/../lib/crc.h:

node/core/../lib/diag.h:

node/core/../lib/../strata_types.h:

node/core/../lib/env.h:
