build-asan/obj/node/strata.o: node/strata.c node/core/store.h \
  node/core/../strata_types.h node/lib/buf.h node/lib/diag.h \
  node/lib/../strata_types.h node/lib/env.h node/strata.h \
  node/strata_types.h node/policy/runtime.h \
  node/policy/../strata_types.h node/policy/policy.h \
  /usr/include/luajit-2.1/lua.h /usr/include/luajit-2.1/luaconf.h \
  node/strata_host.h node/host/host.h node/host/../lib/pool.h

node/core/store.h:

node/core/../strata_types.h:

node/lib/buf.h:

node/lib/diag.h:

node/lib/../strata_types.h:

node/lib/env.h:

node/strata.h:

node/strata_types.h:

node/policy/runtime.h:

node/policy/../strata_types.h:

node/policy/policy.h:

/usr/include/luajit-2.1/lua.h:

/usr/include/luajit-2.1/luaconf.h:

node/strata_host.h:

node/host/host.h:

node/host/../lib/pool.h:
