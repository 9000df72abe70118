/* q35_read_bandwidth's read loop with 512-bit loads (body: membw_read.h). */
#define MEMBW_READ q35_membw_read_avx512
#include "kernels/membw_read.h"
