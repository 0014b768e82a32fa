build-tsan/obj/node/lib/crc.o: node/lib/crc.c node/lib/crc.h

node/lib/crc.h:
