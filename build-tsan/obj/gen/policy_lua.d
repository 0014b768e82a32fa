build-tsan/obj/gen/policy_lua.o: build-tsan/gen/policy_lua.c
