/* SPDX-License-Identifier: MIT */
/*
 * The fake machine of vmm_world.h, and the symbols the VMM's assembly and linker script provide
 * (vmx_enter, run_on_stack, the exception stubs, the fix-up table, the image bounds).
 */
#include "fakes/vmm_world.h"
#include "hw/cpu.h"
#include "hw/percpu.h"
#include "vmx/vcpu.h"
#include "vmx/vmcs_fields.h"
#include "host/desc.h"
#include "base/vmm_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- VMCS: one slot per row of vmcs_fields.def ---- */
enum {
#define VMCS_FIELD(name, enc, width) FAKE_SLOT_##name,
#include "vmx/vmcs_fields.def"
#undef VMCS_FIELD
    FAKE_VMCS_SLOTS
};
static uint64_t vmcs_val[FAKE_VMCS_SLOTS];
static bool vmcs_written[FAKE_VMCS_SLOTS];
unsigned long fake_vmcs_fails;
bool fake_vmcs_current = true;

static int vmcs_slot(uint32_t field)
{
    switch (field) {
#define VMCS_FIELD(name, enc, width)                                                               \
    case enc:                                                                                      \
        return FAKE_SLOT_##name;
#include "vmx/vmcs_fields.def"
#undef VMCS_FIELD
    }
    return -1;
}

static uint64_t width_mask(uint32_t field)
{
    switch (VMCS_WIDTH_OF(field)) {
    case VMCS_W16:
        return 0xffff;
    case VMCS_W32:
        return 0xffffffff;
    }
    return ~0ull;
}

bool fake_vmread(uint32_t field, uint64_t *val)
{
    int s = vmcs_slot(field);
    if (s < 0 || !fake_vmcs_current) {
        fake_vmcs_fails++;
        return false;
    }
    *val = vmcs_val[s] & width_mask(field);
    return true;
}

bool fake_vmwrite(uint32_t field, uint64_t val)
{
    int s = vmcs_slot(field);
    /* encoding bits 11:10 = 1: VM-exit information, read-only (SDM Vol. 3D B) */
    if (s < 0 || !fake_vmcs_current || ((field >> 10) & 3) == 1) {
        fake_vmcs_fails++;
        return false;
    }
    vmcs_val[s] = val & width_mask(field);
    vmcs_written[s] = true;
    return true;
}

void fake_vmcs_set(uint32_t field, uint64_t val)
{
    int s = vmcs_slot(field);
    if (s < 0) {
        fprintf(stderr, "fake_vmcs_set: field %#x not in vmcs_fields.def\n", field);
        abort();
    }
    vmcs_val[s] = val & width_mask(field);
}

uint64_t fake_vmcs_get(uint32_t field)
{
    int s = vmcs_slot(field);
    if (s < 0) {
        fprintf(stderr, "fake_vmcs_get: field %#x not in vmcs_fields.def\n", field);
        abort();
    }
    return vmcs_val[s];
}

bool fake_vmcs_was_written(uint32_t field)
{
    int s = vmcs_slot(field);
    return s >= 0 && vmcs_written[s];
}

void fake_vmcs_clear_written(void)
{
    memset(vmcs_written, 0, sizeof(vmcs_written));
}

/* ---- MSRs ---- */
#define FAKE_MSRS 512
static struct {
    uint32_t msr;
    bool used, gp_write;
    uint64_t val;
} msrs[FAKE_MSRS];
unsigned long fake_root_faults;
uint32_t fake_root_fault_msr;

static int msr_slot(uint32_t msr, bool add)
{
    for (int i = 0; i < FAKE_MSRS; i++)
        if (msrs[i].used && msrs[i].msr == msr)
            return i;
    if (!add)
        return -1;
    for (int i = 0; i < FAKE_MSRS; i++)
        if (!msrs[i].used) {
            msrs[i].used = true;
            msrs[i].msr = msr;
            msrs[i].gp_write = false;
            return i;
        }
    fprintf(stderr, "fake MSR map full\n");
    abort();
}

void fake_msr_set(uint32_t msr, uint64_t val)
{
    msrs[msr_slot(msr, true)].val = val;
}

bool fake_msr_get(uint32_t msr, uint64_t *val)
{
    int i = msr_slot(msr, false);
    if (i < 0)
        return false;
    *val = msrs[i].val;
    return true;
}

void fake_msr_gp_on_write(uint32_t msr, bool gp)
{
    msrs[msr_slot(msr, true)].gp_write = gp;
}

void fake_msr_remove(uint32_t msr)
{
    int i = msr_slot(msr, false);
    if (i >= 0)
        msrs[i].used = false;
}

bool fake_rdmsr(uint32_t msr, uint64_t *val)
{
    return fake_msr_get(msr, val);
}

bool fake_wrmsr(uint32_t msr, uint64_t val)
{
    int i = msr_slot(msr, false);
    if (i < 0 || msrs[i].gp_write)
        return false;
    msrs[i].val = val;
    return true;
}

int rdmsr_safe(uint32_t msr, uint64_t *val)
{
    uint64_t v;
    if (!fake_rdmsr(msr, &v))
        return -1;
    *val = v;
    return 0;
}

int wrmsr_safe(uint32_t msr, uint64_t val)
{
    return fake_wrmsr(msr, val) ? 0 : -1;
}

/* ---- CPUID ---- */
#define FAKE_LEAVES 64
static struct {
    bool used;
    uint32_t leaf, sub;
    struct cpuid_regs r;
} leaves[FAKE_LEAVES];

void fake_cpuid_set(uint32_t leaf, uint32_t sub, uint32_t eax, uint32_t ebx, uint32_t ecx,
                    uint32_t edx)
{
    int free_slot = -1;
    for (int i = 0; i < FAKE_LEAVES; i++) {
        if (leaves[i].used && leaves[i].leaf == leaf && leaves[i].sub == sub) {
            free_slot = i;
            break;
        }
        if (!leaves[i].used && free_slot < 0)
            free_slot = i;
    }
    if (free_slot < 0) {
        fprintf(stderr, "fake CPUID table full\n");
        abort();
    }
    leaves[free_slot].used = true;
    leaves[free_slot].leaf = leaf;
    leaves[free_slot].sub = sub;
    leaves[free_slot].r = (struct cpuid_regs){eax, ebx, ecx, edx};
}

void fake_cpuid(uint32_t leaf, uint32_t sub, struct cpuid_regs *r)
{
    for (int i = 0; i < FAKE_LEAVES; i++)
        if (leaves[i].used && leaves[i].leaf == leaf && leaves[i].sub == sub) {
            *r = leaves[i].r;
            return;
        }
    *r = (struct cpuid_regs){0};
}

/* ---- registers ---- */
struct fake_cpu fake_cpu;

void fake_load_desc(int which, const struct desc_ptr *p)
{
    if (which == 0) {
        fake_cpu.gdt_base = p->base;
        fake_cpu.gdt_limit = p->limit;
    } else {
        fake_cpu.idt_base = p->base;
        fake_cpu.idt_limit = p->limit;
    }
}

void fake_store_desc(int which, struct desc_ptr *p)
{
    p->base = which == 0 ? fake_cpu.gdt_base : fake_cpu.idt_base;
    p->limit = which == 0 ? fake_cpu.gdt_limit : fake_cpu.idt_limit;
}

bool fake_xsetbv(uint32_t index, uint64_t val)
{
    if (index != 0 || !(val & 1))
        return false;
    fake_cpu.xcr0 = val;
    return true;
}

int xsetbv_safe(uint32_t index, uint64_t val)
{
    return fake_xsetbv(index, val) ? 0 : -1;
}

/* ---- ports: a 16550 at 0x3f8 / 0x2f8 whose transmitter is always ready ---- */
char fake_console[1 << 16];
size_t fake_console_len;
static uint8_t uart_lcr[2];

void fake_out(uint16_t port, uint32_t val, unsigned size)
{
    if ((port & ~7u) != 0x3f8 && (port & ~7u) != 0x2f8)
        return;
    unsigned u = (port & ~7u) == 0x2f8, reg = port & 7;
    if (reg == 3)
        uart_lcr[u] = (uint8_t)val;
    else if (reg == 0 && !(uart_lcr[u] & 0x80) && fake_console_len < sizeof(fake_console) - 1)
        fake_console[fake_console_len++] = (char)val;
}

uint32_t fake_in(uint16_t port, unsigned size)
{
    if ((port & 7) == 5)
        return 0x60; /* LSR: THR and transmitter empty, no data */
    return 0;
}

void fake_console_clear(void)
{
    fake_console_len = 0;
    fake_console[0] = 0;
}

bool fake_console_has(const char *needle)
{
    fake_console[fake_console_len] = 0;
    return strstr(fake_console, needle) != NULL;
}

/* ---- halt ---- */
void (*fake_halt_hook)(void);
unsigned long fake_halts;

void fake_halt(void)
{
    fake_halts++;
    if (fake_halt_hook)
        fake_halt_hook();
    fake_console[fake_console_len] = 0;
    fprintf(stderr, "the VMM halted outside a test's expectation; console:\n%s\n", fake_console);
    abort();
}

struct percpu *fake_this_cpu = &percpu_area[0];

/* ---- the guest ---- */
fake_guest_fn fake_guest;
void *fake_guest_ctx;
unsigned long fake_entries;
int fake_entry_fail;

/* what a VM exit loads from the host-state area (SDM Vol. 3C 28.5) */
static void vm_exit_load_host(void)
{
    uint32_t ctls = (uint32_t)fake_vmcs_get(VM_EXIT_CONTROLS);
    fake_cpu.cr0 = fake_vmcs_get(HOST_CR0);
    fake_cpu.cr3 = fake_vmcs_get(HOST_CR3);
    fake_cpu.cr4 = fake_vmcs_get(HOST_CR4);
    fake_cpu.dr7 = 0x400;
    fake_cpu.rflags = 2;
    fake_cpu.cs = (uint16_t)fake_vmcs_get(HOST_CS_SELECTOR);
    fake_cpu.ss = (uint16_t)fake_vmcs_get(HOST_SS_SELECTOR);
    fake_cpu.ds = (uint16_t)fake_vmcs_get(HOST_DS_SELECTOR);
    fake_cpu.es = (uint16_t)fake_vmcs_get(HOST_ES_SELECTOR);
    fake_cpu.fs = (uint16_t)fake_vmcs_get(HOST_FS_SELECTOR);
    fake_cpu.gs = (uint16_t)fake_vmcs_get(HOST_GS_SELECTOR);
    fake_cpu.tr = (uint16_t)fake_vmcs_get(HOST_TR_SELECTOR);
    fake_cpu.ldtr = 0;
    fake_cpu.gdt_base = fake_vmcs_get(HOST_GDTR_BASE);
    fake_cpu.gdt_limit = 0xffff;
    fake_cpu.idt_base = fake_vmcs_get(HOST_IDTR_BASE);
    fake_cpu.idt_limit = 0xffff;
    fake_msr_set(MSR_FS_BASE, fake_vmcs_get(HOST_FS_BASE));
    fake_msr_set(MSR_GS_BASE, fake_vmcs_get(HOST_GS_BASE));
    fake_msr_set(MSR_IA32_SYSENTER_CS, fake_vmcs_get(HOST_IA32_SYSENTER_CS));
    fake_msr_set(MSR_IA32_SYSENTER_ESP, fake_vmcs_get(HOST_IA32_SYSENTER_ESP));
    fake_msr_set(MSR_IA32_SYSENTER_EIP, fake_vmcs_get(HOST_IA32_SYSENTER_EIP));
    fake_msr_set(MSR_IA32_DEBUGCTLMSR, 0);
    if (ctls & VM_EXIT_LOAD_IA32_EFER)
        fake_msr_set(MSR_EFER, fake_vmcs_get(HOST_IA32_EFER));
    if (ctls & VM_EXIT_LOAD_IA32_PAT)
        fake_msr_set(MSR_IA32_CR_PAT, fake_vmcs_get(HOST_IA32_PAT));
    if (ctls & VM_EXIT_LOAD_IA32_PERF_GLOBAL_CTRL)
        fake_msr_set(0x38f, fake_vmcs_get(HOST_IA32_PERF_GLOBAL_CTRL));
}

int vmx_enter(struct guest_regs *regs, int launched);
int vmx_enter(struct guest_regs *regs, int launched)
{
    fake_entries++;
    if (fake_entry_fail)
        return fake_entry_fail;
    if (!fake_guest) {
        fprintf(stderr, "VM entry with no scripted guest\n");
        abort();
    }
    fake_guest(fake_guest_ctx);
    vm_exit_load_host();
    return 0;
}

/* vmx_entry.S's stack switch: the test's stack is the VMM's */
uint64_t run_on_stack(uint64_t stack_top, uint64_t (*fn)(void *), void *arg)
{
    return fn(arg);
}

/* what the assembly and the linker script define */
char vmx_exit_stub[16];
void ptv_vmm_entry(void);
void ptv_vmm_entry(void)
{
    abort();
}
const int32_t exc_stub_table[32];
/* an empty fix-up table (both bounds at one address), and the image's text and read-only bounds
 * inside the fake VMM image (vmm_boot.h: 0x12000000 + 1 MiB; the test links without PIE) */
const int32_t fake_extable[2];
asm(".globl __extable_start\n.set __extable_start, fake_extable\n"
    ".globl __extable_end\n.set __extable_end, fake_extable\n"
    ".globl __text_start\n.set __text_start, 0x12010000\n"
    ".globl __text_end\n.set __text_end, 0x12020000\n"
    ".globl __rodata_start\n.set __rodata_start, 0x12020000\n"
    ".globl __rodata_end\n.set __rodata_end, 0x12030000\n");

void fake_world_reset(void)
{
    memset(vmcs_val, 0, sizeof(vmcs_val));
    fake_vmcs_clear_written();
    fake_vmcs_fails = 0;
    fake_vmcs_current = true;
    memset(msrs, 0, sizeof(msrs));
    memset(leaves, 0, sizeof(leaves));
    fake_root_faults = 0;
    memset(&fake_cpu, 0, sizeof(fake_cpu));
    fake_console_clear();
    fake_halt_hook = NULL;
    fake_halts = 0;
    fake_guest = NULL;
    fake_entries = 0;
    fake_entry_fail = 0;
}
