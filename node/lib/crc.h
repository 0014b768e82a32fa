/* crc.h — CRC32C (Castagnoli) through Intel ISA-L, which picks SSE4.2/PCLMUL at run time. */
#ifndef STRATA_CRC_H
#define STRATA_CRC_H

#include <stddef.h>
#include <stdint.h>

/** Extend crc (0 to start) over buf; the result is the standard CRC32C value. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

#endif
