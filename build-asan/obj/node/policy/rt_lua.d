build-asan/obj/node/policy/rt_lua.o: node/policy/rt_lua.c \
  node/policy/runtime_int.h node/policy/runtime.h \
  node/policy/../strata_types.h node/policy/policy.h \
  /usr/include/luajit-2.1/lua.h /usr/include/luajit-2.1/luaconf.h \
  /usr/include/luajit-2.1/lauxlib.h node/policy/../core/store.h \
  node/policy/../core/../strata_types.h node/policy/../host/host.h \
  node/policy/../host/../lib/pool.h node/policy/../lib/pool.h \
  node/policy/../lib/diag.h node/policy/../host/../lib/../strata_types.h \
  node/policy/../lib/env.h

node/policy/runtime_int.h:

node/policy/runtime.h:

node/policy/../strata_types.h:

node/policy/policy.h:

/usr/include/luajit-2.1/lua.h:

/usr/include/luajit-2.1/luaconf.h:

/usr/include/luajit-2.1/lauxlib.h:

node/policy/../core/store.h:

node/policy/../core/../strata_types.h:

node/policy/../host/host.h:

node/policy/../host/../lib/pool.h:

node/policy/../lib/pool.h:

node/policy/../lib/diag.h:

node/policy/../host/../lib/../strata_types.h:

node/policy/../lib/env.h:
