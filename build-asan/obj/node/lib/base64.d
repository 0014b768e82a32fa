build-asan/obj/node/lib/base64.o: node/lib/base64.c node/lib/base64.h \
  node/lib/buf.h node/lib/../strata_types.h

node/lib/base64.h:

node/lib/buf.h:

node/lib/../strata_types.h:
