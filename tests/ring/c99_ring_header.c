/* c99_ring_header.c - include/flashattn_ring.h must compile as strict C99 on its own. */
#include "flashattn_ring.h"

int fa_ring_header_compiles(void);
int fa_ring_header_compiles(void) { return (int)sizeof(fa_ring_layout) + (int)sizeof(fa_ring_span); }
