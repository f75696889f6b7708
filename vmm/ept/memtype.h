/* SPDX-License-Identifier: MIT */
/*
 * Memory types, as encoded in MTRRs, in the PAT and in EPT leaf bits 5:3.
 * SDM Vol. 3A 11.3 Table 11-2 / 11.11 (12.x in recent editions); pt-facts.md G.6.
 * Encodings 2, 3 and 7 (and above) are reserved: an EPT leaf holding one is an
 * EPT misconfiguration (SDM Vol. 3C 28.2.3.1), an MTRR holding one #GPs.
 */
#ifndef PTV_EPT_MEMTYPE_H
#define PTV_EPT_MEMTYPE_H

#include <stdbool.h>

#define EPT_MT_UC 0u /* uncacheable */
#define EPT_MT_WC 1u /* write combining */
#define EPT_MT_WT 4u /* write through */
#define EPT_MT_WP 5u /* write protected */
#define EPT_MT_WB 6u /* write back */

static inline bool ept_memtype_valid(unsigned mt)
{
    return mt == EPT_MT_UC || mt == EPT_MT_WC || mt == EPT_MT_WT || mt == EPT_MT_WP ||
           mt == EPT_MT_WB;
}

#endif
