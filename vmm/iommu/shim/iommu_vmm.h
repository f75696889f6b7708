/* SPDX-License-Identifier: MIT */
/* DMA isolation in the VMM: VT-d programmed from the firmware's DMAR (see iommu_vmm.c). */
#ifndef PTV_IOMMU_VMM_H
#define PTV_IOMMU_VMM_H

#include <stdbool.h>
#include <stdint.h>
#include "ptv/handoff.h"

/* the BSP polls the units' fault records every this many of its VM exits */
#define IOMMU_POLL_EXITS 1024u

struct ept;

/*
 * On the BSP, once, after the guest's EPT is built and before the guest first runs: program
 * every remapping unit the DMAR names and make their registers read-only in ept.  Never fails
 * the boot: where DMA cannot be isolated it logs "DMA not isolated: <reason>" and returns false.
 */
bool iommu_setup(const struct ptv_handoff *h, struct ept *ept);

/* the faults the units recorded since the last call: counted and logged, rate-limited (BSP) */
void iommu_poll_faults(void);

/* gpa lies in a remapping unit's registers the VMM owns (read-only to the guest) */
bool iommu_owns(uint64_t gpa);

/* DMA faults seen so far (all units) */
unsigned long iommu_faults_seen(void);

/* units translating (0: DMA not isolated); the newest fault seen (false: none yet) */
unsigned iommu_units_on(void);
bool iommu_last_fault(uint64_t *addr, uint16_t *sid, bool *write);

#endif
