build-tsan/obj/node/objstore/fs.o: node/objstore/fs.c \
  node/objstore/objstore.h node/objstore/../lib/buf.h \
  node/objstore/../lib/diag.h node/objstore/../lib/../strata_types.h \
  node/objstore/../lib/env.h

node/objstore/objstore.h:

node/objstore/../lib/buf.h:

node/objstore/../lib/diag.h:

node/objstore/../lib/../strata_types.h:

node/objstore/../lib/env.h:
