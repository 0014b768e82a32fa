build-tsan/obj/node/policy/policy.o: node/policy/policy.c \
  node/policy/policy.h /usr/include/luajit-2.1/lua.h \
  /usr/include/luajit-2.1/luaconf.h /usr/include/luajit-2.1/lauxlib.h \
  /usr/include/luajit-2.1/luajit.h /usr/include/luajit-2.1/lualib.h \
  node/policy/../lib/diag.h node/policy/../lib/../strata_types.h \
  node/policy/../lib/env.h node/policy/../lib/text.h \
  node/policy/policy_lua.h

node/policy/policy.h:

/usr/include/luajit-2.1/lua.h:

/usr/include/luajit-2.1/luaconf.h:

/usr/include/luajit-2.1/lauxlib.h:

/usr/include/luajit-2.1/luajit.h:

/usr/include/luajit-2.1/lualib.h:

node/policy/../lib/diag.h:

node/policy/../lib/../strata_types.h:

node/policy/../lib/env.h:

node/policy/../lib/text.h:

node/policy/policy_lua.h:
