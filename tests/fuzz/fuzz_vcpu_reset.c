/* SPDX-License-Identifier: MIT */
/*
 * Fuzzer: random kind, SIPI vector, processor signature, old CR0, role and
 * activity state through vmm/emul/vcpu_reset.c.  Invariants: the state always
 * passes the VM-entry guest-state model (vmm/emul/guest_check.c, Bochs fixed bits,
 * unrestricted guest, IA-32e mode off) and the activity/interruptibility rules
 * it lacks; it is in real mode at the architectural CS:IP; the INIT/SIPI actions
 * follow Vol. 3C 26.2 and the state each action produces is consistent with it
 * (wait-for-SIPI exactly after INIT to an AP, never for the BSP).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "emul/vcpu_reset.h"
#include "emul/guest_check.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

#define CR0_PE (1ull << 0)
#define CR0_PG (1ull << 31)

static const char *entry_check(const struct vreset_state *s)
{
    uint64_t fixed0 = 0x80000021ull & ~(CR0_PE | CR0_PG); /* Bochs, unrestricted guest */
    struct vmx_guest_state g = {
        .seg = {{s->es.sel, s->es.base, s->es.limit, s->es.ar},
                {s->cs.sel, s->cs.base, s->cs.limit, s->cs.ar},
                {s->ss.sel, s->ss.base, s->ss.limit, s->ss.ar},
                {s->ds.sel, s->ds.base, s->ds.limit, s->ds.ar},
                {s->fs.sel, s->fs.base, s->fs.limit, s->fs.ar},
                {s->gs.sel, s->gs.base, s->gs.limit, s->gs.ar},
                {s->ldtr.sel, s->ldtr.base, s->ldtr.limit, s->ldtr.ar},
                {s->tr.sel, s->tr.base, s->tr.limit, s->tr.ar}},
        .cr0 = (s->cr0 | fixed0) & 0xffffffffull,
        .cr4 = (s->cr4 | 0x2000ull) & 0x3767ffull,
        .efer = s->efer,
        .rflags = s->rflags,
        .ia32e = false,
        .unrestricted = true,
        .cr0_fixed0 = 0x80000021ull,
        .cr0_fixed1 = 0xffffffffull,
        .cr4_fixed0 = 0x2000ull,
        .cr4_fixed1 = 0x3767ffull,
    };
    const char *why = vmx_guest_state_check(&g);
    if (why)
        return why;
    /* Vol. 3C 27.3.1.5 (not in guest_check.c): supported activity (Bochs
     * VMX_MISC 0x600401e0 has bits 6-8), no blocking, no pending debug trap;
     * 27.3.1.2/27.3.1.4: real-mode SS.DPL 0, 32-bit RIP and CS base */
    if (s->activity > GUEST_ACTIVITY_WAIT_SIPI || s->interruptibility || s->pending_dbg)
        return "non-register state";
    if (((s->ss.ar >> 5) & 3) || ((s->cs.ar >> 5) & 3) || (s->rip >> 32) || (s->cs.base >> 32))
        return "real-mode rules";
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct {
        uint64_t old_cr0;
        uint32_t sig, activity;
        uint8_t kind, vector, flags;
    } in = {0};
    memcpy(&in, data, size < sizeof(in) ? size : sizeof(in)); /* short inputs: zero-padded */
    enum vreset_kind kind = (enum vreset_kind)(in.kind % 3);
    bool is_bsp = in.flags & 1;
    /* mostly the four architectural states, sometimes any value */
    uint32_t activity = (in.flags & 2) ? in.activity : in.activity % 4;

    struct vreset_state s;
    memset(&s, in.flags, sizeof(s)); /* stale contents must not leak through */
    vreset_state(&s, kind, in.vector, in.sig, in.old_cr0);
    CHECK(entry_check(&s) == NULL);
    CHECK(s.gpr[2] == in.sig); /* RDX */
    for (unsigned i = 0; i < 16; i++)
        CHECK(i == 2 || s.gpr[i] == 0);
    CHECK(s.cr0 == (0x10 | (in.old_cr0 & 0x60000000ull)));
    CHECK(s.cr4 == 0 && s.cr3 == 0 && s.efer == 0 && s.rflags == 2 && s.dr7 == 0x400);
    if (kind == VRESET_SIPI) {
        CHECK(s.cs.sel == (uint16_t)(in.vector << 8) && s.cs.base == (uint64_t)in.vector << 12);
        CHECK(s.rip == 0 && s.activity == GUEST_ACTIVITY_ACTIVE);
    } else {
        CHECK(s.cs.sel == 0xf000 && s.cs.base == 0xffff0000ull && s.rip == 0xfff0);
        CHECK(s.activity ==
              (kind == VRESET_INIT_AP ? GUEST_ACTIVITY_WAIT_SIPI : GUEST_ACTIVITY_ACTIVE));
    }
    /* the linear start address is CS.base + IP and lies in the first MiB or at the
     * reset vector */
    uint64_t start = s.cs.base + s.rip;
    CHECK(start == 0xfffffff0ull || (start < 0x100000 && (start & 0xfff) == 0));

    /* actions: INIT is blocked only in wait-for-SIPI, SIPI acts only there */
    bool wfs = activity == GUEST_ACTIVITY_WAIT_SIPI;
    enum vreset_action ai = vreset_on_init(is_bsp, activity);
    enum vreset_action as = vreset_on_sipi(activity, in.vector);
    CHECK(ai == (wfs ? VRESET_DO_NOTHING : is_bsp ? VRESET_RESET_VECTOR : VRESET_WAIT_SIPI));
    CHECK(as == (wfs ? VRESET_START : VRESET_DO_NOTHING));
    /* each action's state enters the activity the action names */
    if (ai != VRESET_DO_NOTHING) {
        vreset_state(&s, ai == VRESET_WAIT_SIPI ? VRESET_INIT_AP : VRESET_INIT_BSP, in.vector,
                     in.sig, in.old_cr0);
        CHECK(s.activity ==
              (ai == VRESET_WAIT_SIPI ? GUEST_ACTIVITY_WAIT_SIPI : GUEST_ACTIVITY_ACTIVE));
        CHECK(is_bsp == (s.activity == GUEST_ACTIVITY_ACTIVE));
        /* after INIT only a SIPI moves an AP on, and an INIT is a no-op */
        CHECK(vreset_on_init(is_bsp, s.activity) ==
              (is_bsp ? VRESET_RESET_VECTOR : VRESET_DO_NOTHING));
        CHECK(vreset_on_sipi(s.activity, in.vector) == (is_bsp ? VRESET_DO_NOTHING : VRESET_START));
    }
    return 0;
}
