build-asan/obj/gen/policy_lua.o: build-asan/gen/policy_lua.c
