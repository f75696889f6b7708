# Toolchains and flag sets: freestanding VMM, GNU-EFI loader/test guests, host tests, fuzzers.

WARN := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes -Wvla \
        -Wwrite-strings -Wformat=2 -Wno-unused-parameter
ifeq ($(CI),true)
WARN += -Werror
endif
ifeq ($(WERROR),1)
WARN += -Werror
endif

# --- VMM (vmm.elf): freestanding, position independent, no SSE, no red zone
VMM_CC      ?= gcc
VMM_LD      ?= ld
VMM_CFLAGS  := -std=gnu11 -O2 -g $(WARN) -ffreestanding -fno-stack-protector -fno-stack-check \
               -fpie -fno-plt -mno-red-zone -mgeneral-regs-only -fno-omit-frame-pointer \
               -fno-asynchronous-unwind-tables -fcf-protection=none -mcmodel=small \
               -Iinclude -Ivmm -DPTV_VMM=1 -MMD -MP
VMM_ASFLAGS := -Iinclude -Ivmm -MMD -MP -DPTV_VMM=1

# --- GNU-EFI applications (loader, in-guest test programs)
EFI_INC     := /usr/include/efi
EFI_LIB     := /usr/lib
EFI_CC      ?= gcc
EFI_CFLAGS  := -std=gnu11 -O2 -g $(WARN) -Wno-strict-prototypes -Wno-missing-prototypes \
               -ffreestanding -fpic -fshort-wchar -fno-stack-protector -fno-stack-check \
               -mno-red-zone -maccumulate-outgoing-args -DEFI_FUNCTION_WRAPPER \
               -DGNU_EFI_USE_MS_ABI -I$(EFI_INC) -I$(EFI_INC)/x86_64 -Iinclude -MMD -MP
EFI_LDFLAGS := -nostdlib -znocombreloc -shared -Bsymbolic -L$(EFI_LIB) \
               -T$(EFI_LIB)/elf_x86_64_efi.lds $(EFI_LIB)/crt0-efi-x86_64.o
EFI_LIBS    := -lefi -lgnuefi
EFI_OBJCOPY := objcopy -j .text -j .sdata -j .data -j .rodata -j .dynamic -j .dynsym \
               -j .rel -j .rela -j .rel.* -j .rela.* -j .reloc --target efi-app-x86_64 \
               --subsystem=10

# --- host unit tests: the real .c files + cmocka, under ASan/UBSan
HOST_CC      ?= gcc
HOST_CFLAGS  := -std=gnu11 -O1 -g $(WARN) -fsanitize=address,undefined \
                -fno-sanitize-recover=undefined -fno-omit-frame-pointer -Iinclude -Ivmm -Itests \
                -DPTV_HOST=1 -MMD -MP
HOST_LDLIBS  := -lcmocka

# The flag sets below are the only place compiler flags are spelled out; a rule elsewhere in mk/
# adds at most its own -I, -D or -include.

# --- EFI programs that include or link VMM code (the loader, vtd-dma.efi, the in-guest tests)
EFI_VMM_CFLAGS := $(EFI_CFLAGS) -Ivmm

# --- host programs built as the VMM is (-O2, no sanitizers) from the project's real sources:
# benchmarks (instructions counted under callgrind) and the long differential run
HOST_BENCH_CFLAGS := -std=gnu11 -O2 -g $(WARN) -Iinclude -Ivmm -Itests -DPTV_HOST=1

# --- host programs of the project that are not tests (no sanitizers): ptvisor-trace's user
# build, host-side checkers, the native stepper, the console viewer
HOST_TOOL_CFLAGS := -std=gnu11 -O2 -g $(WARN) -Iinclude

# --- programs that are traced or single-stepped (ptrace tracees, the traced workloads): plain
# -O1, no sanitizers, frames and calls kept so their traces read like the source
TRACEE_CFLAGS     := -std=gnu11 -O1 -g $(WARN)
PTT_WORK_CFLAGS   := $(TRACEE_CFLAGS) -fno-inline -fno-omit-frame-pointer -static -no-pie
# no libc at all: the same instructions on every x86-64 Linux and CPU, entry to exit
PTT_EXACT_CFLAGS  := $(TRACEE_CFLAGS) -static -nostdlib -no-pie -fno-pie -fno-stack-protector \
                     -fno-builtin -fcf-protection=none

# --- programs of the Linux guest image (ptv-probe, ptvisor-ctl): static, stripped
GUEST_CFLAGS := -std=gnu11 -O2 -static -s $(WARN) -Iinclude

# --- host tests and fuzzers of the VMM's own sources on a fake machine (mk/85-vmm-host.mk): added
# to HOST_CFLAGS / FUZZ_CFLAGS.  The VMM's code paths (-DPTV_VMM=1); tests/fakes/vmm/'s stand-ins
# for the instruction headers found ahead of vmm/'s (-iquote is searched before -I for "..."
# includes); no PIE, since the fake machine's image bounds are absolute symbols
VMM_FAKE_CFLAGS  := -iquote tests/fakes/vmm -DPTV_VMM=1 -fno-pie
VMM_FAKE_LDLIBS  := -no-pie
# vmm/lib/string.c on the host: the VMM's declarations, not libc's, and no builtins for them
VMM_LIBC_CFLAGS  := -UPTV_HOST -fno-builtin

# --- libFuzzer
FUZZ_CC      ?= clang
FUZZ_CFLAGS  := -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined \
                -fno-sanitize-recover=undefined -Iinclude -Ivmm -Itests -DPTV_HOST=1 -DPTV_FUZZ=1
FUZZ_SMOKE_RUNS ?= 20000
FUZZ_SMOKE_SECONDS ?= 15
FUZZ_SECONDS    ?= 600
