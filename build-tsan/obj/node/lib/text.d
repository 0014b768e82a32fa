build-tsan/obj/node/lib/text.o: node/lib/text.c node/lib/text.h

node/lib/text.h:
