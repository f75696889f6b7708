/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer differential of the x86 classifier (vmm/trace/x86_class.c) against Zydis:
 * the first byte picks the code size and the IP (near a 64 KiB / 4 GiB wrap or not),
 * the rest is the instruction.  The oracle, its mapping to the header's classes and
 * its documented exceptions are those of tests/unit/trace/test_x86_class.c, included here
 * (its cmocka part is left out under PTV_FUZZ).  The bytes sit in an exact-size heap
 * block, so ASan traps any read past `avail`; every shorter avail of an instruction
 * both decode must be X86_E_SHORT.
 */
#include "unit/trace/test_x86_class.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint64_t ips[4] = {0x1000, 0xfff0, 0xfffffff0u, 0xfffffffffffffff0ull};
    static struct diff_stats st;
    static uint8_t *blk;
    if (size < 1)
        return 0;
    oracle_init();
    if (!blk)
        blk = malloc(X86_MAX_INSN);
    int cs = data[0] % 3;
    uint64_t ip = ips[(data[0] >> 2) & 3];
    if (cs == X86_CODE16)
        ip &= 0xffff;
    else if (cs == X86_CODE32)
        ip &= 0xffffffffu;
    data++;
    size--;

    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    uint64_t before = st.disagree;
    unsigned len = diff_one(cs, buf, size, ip, &st);
    if (st.last_ok)
        check_truncations(cs, buf, len, blk, &st);
    free(buf);
    if (st.disagree != before) {
        fflush(stdout); /* the DISAGREE report, before abort() drops the buffer */
        abort();
    }
    return 0;
}
