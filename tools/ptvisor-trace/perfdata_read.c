/* SPDX-License-Identifier: MIT */
/* The perf.data reader (pd_parse, perfdata.h): checks the structure of a file the writer made,
 * for the tests and the fuzzer. */
#define _GNU_SOURCE
#include "perfdata.h"

#include <stdbool.h>
#include <string.h>

#include "perfdata_abi.h"

/* ---- the reader ---- */

struct rdr {
    const uint8_t *p;
    size_t len;
    char *err;
    size_t errlen;
};

static bool in_file(const struct rdr *r, uint64_t off, uint64_t size)
{
    return off <= r->len && size <= r->len - off;
}

static bool id_known(const uint64_t *ids, unsigned n, uint64_t id)
{
    for (unsigned i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

#define PARSE_MAX_IDS 8192

int pd_parse(const uint8_t *p, size_t len, struct pd_info *info, char *err, size_t errlen)
{
    struct rdr r = {p, len, err, errlen};
    static uint64_t ids[PARSE_MAX_IDS];
    uint32_t queue_cpu[PD_INFO_MAX_QUEUES];
    bool cpu_started[4096] = {false};
    unsigned nids = 0;
    uint32_t attr_type[2] = {0, 0};
    uint64_t attr_sample[2] = {0, 0};

    memset(info, 0, sizeof(*info));
    memset(queue_cpu, 0xff, sizeof(queue_cpu));
    if (len < FILE_HEADER_SIZE || memcmp(p, "PERFILE2", 8) != 0) {
        pd_set_err(err, errlen, "not a perf.data file (no PERFILE2 header)");
        return -1;
    }
    uint64_t hsize = pd_rd(p + 8, 8), attr_size = pd_rd(p + 16, 8);
    uint64_t attrs_off = pd_rd(p + 24, 8), attrs_sz = pd_rd(p + 32, 8);
    uint64_t data_off = pd_rd(p + 40, 8), data_sz = pd_rd(p + 48, 8);
    info->features = pd_rd(p + 72, 8);
    if (hsize != FILE_HEADER_SIZE || attr_size < 64 + 16 || attr_size > 4096 ||
        !in_file(&r, attrs_off, attrs_sz) || attrs_sz % attr_size ||
        !in_file(&r, data_off, data_sz)) {
        pd_set_err(err, errlen, "bad file header (sizes or sections outside the file)");
        return -1;
    }
    info->nattr = (unsigned)(attrs_sz / attr_size);
    if (info->nattr < 1 || info->nattr > 2) {
        pd_set_err(err, errlen, "%u attrs (expected the intel_pt and the dummy event)",
                   info->nattr);
        return -1;
    }
    for (unsigned a = 0; a < info->nattr; a++) {
        const uint8_t *at = p + attrs_off + a * attr_size;
        uint64_t asz = pd_rd(at + 4, 4);
        if (asz + 16 != attr_size) {
            pd_set_err(err, errlen, "attr %u: size %llu, file says %llu", a,
                       (unsigned long long)asz, (unsigned long long)attr_size - 16);
            return -1;
        }
        attr_type[a] = (uint32_t)pd_rd(at, 4);
        attr_sample[a] = pd_rd(at + 24, 8);
        if (!(pd_rd(at + 40, 8) & AF_SAMPLE_ID_ALL) || attr_sample[a] != attr_sample[0]) {
            pd_set_err(err, errlen, "attr %u: sample_id_all off or sample_type differs", a);
            return -1;
        }
        if (a == 0)
            info->pt_config = pd_rd(at + 8, 8);
        uint64_t ioff = pd_rd(at + asz, 8), isz = pd_rd(at + asz + 8, 8);
        if (!in_file(&r, ioff, isz) || isz % 8 || isz / 8 > PARSE_MAX_IDS - nids || !isz) {
            pd_set_err(err, errlen, "attr %u: bad ids section", a);
            return -1;
        }
        for (uint64_t i = 0; i < isz / 8; i++) {
            uint64_t id = pd_rd(p + ioff + 8 * i, 8);
            if (id_known(ids, nids, id)) {
                pd_set_err(err, errlen, "id %llu in two attrs", (unsigned long long)id);
                return -1;
            }
            ids[nids++] = id;
        }
    }
    info->nids = nids;
    if (attr_sample[0] != SAMPLE_TYPE) {
        pd_set_err(err, errlen, "sample_type %#llx (this reader knows IP|TID|CPU|IDENTIFIER)",
                   (unsigned long long)attr_sample[0]);
        return -1;
    }

    /* records */
    bool have_info = false;
    uint64_t off = data_off, end = data_off + data_sz;
    while (off < end) {
        if (end - off < 8) {
            pd_set_err(err, errlen, "record at %#llx: truncated header", (unsigned long long)off);
            return -1;
        }
        uint32_t type = (uint32_t)pd_rd(p + off, 4);
        uint64_t size = pd_rd(p + off + 6, 2);
        if (size < 8 || size % 8 || size > end - off) {
            pd_set_err(err, errlen, "record at %#llx (type %u): size %llu", (unsigned long long)off,
                       type, (unsigned long long)size);
            return -1;
        }
        const uint8_t *rp = p + off;
        uint64_t payload = 0;
        bool has_trailer = type < 64; /* kernel records carry the sample_id trailer */
        if (has_trailer) {
            if (size < 8 + TRAILER_SIZE) {
                pd_set_err(err, errlen, "record at %#llx (type %u): no room for sample_id",
                           (unsigned long long)off, type);
                return -1;
            }
            uint64_t id = pd_rd(rp + size - 8, 8);
            if (!id_known(ids, nids, id)) {
                pd_set_err(err, errlen, "record at %#llx (type %u): unknown id %llu",
                           (unsigned long long)off, type, (unsigned long long)id);
                return -1;
            }
        }
        uint64_t body = size - 8 - (has_trailer ? TRAILER_SIZE : 0);
        switch (type) {
        case PERF_RECORD_COMM:
        case PERF_RECORD_MMAP2: {
            uint64_t fixed = type == PERF_RECORD_COMM ? 8 : 64;
            if (body <= fixed || !memchr(rp + 8 + fixed, 0, body - fixed)) {
                pd_set_err(err, errlen, "record at %#llx (type %u): name not terminated",
                           (unsigned long long)off, type);
                return -1;
            }
            if (type == PERF_RECORD_COMM) {
                info->ncomm++;
            } else {
                uint64_t start = pd_rd(rp + 16, 8), l = pd_rd(rp + 24, 8);
                bool k = (pd_rd(rp + 4, 2) & 7) == PERF_RECORD_MISC_KERNEL;
                if (!l || start + l < start || (k != (start >= PD_KERNEL_START))) {
                    pd_set_err(err, errlen, "MMAP2 at %#llx: bad range or cpumode",
                               (unsigned long long)off);
                    return -1;
                }
                info->nmmap++;
            }
            break;
        }
        case PERF_RECORD_ITRACE_START: {
            uint32_t cpu = (uint32_t)pd_rd(rp + size - 16, 4);
            if (body != 8 || cpu >= 4096) {
                pd_set_err(err, errlen, "ITRACE_START at %#llx: bad size or cpu",
                           (unsigned long long)off);
                return -1;
            }
            cpu_started[cpu] = true;
            info->nitrace++;
            break;
        }
        case PERF_RECORD_AUX:
            if (body != 24) {
                pd_set_err(err, errlen, "AUX at %#llx: bad size", (unsigned long long)off);
                return -1;
            }
            info->naux++;
            break;
        case PERF_RECORD_FINISHED_ROUND:
            info->nround++;
            break;
        case PERF_RECORD_ID_INDEX: {
            uint64_t n = size >= 16 ? pd_rd(rp + 8, 8) : ~0ull;
            if (n > (size - 16) / 32 || n * 32 != size - 16) {
                pd_set_err(err, errlen, "ID_INDEX at %#llx: bad count", (unsigned long long)off);
                return -1;
            }
            for (uint64_t i = 0; i < n; i++)
                if (!id_known(ids, nids, pd_rd(rp + 16 + 32 * i, 8))) {
                    pd_set_err(err, errlen, "ID_INDEX at %#llx: unknown id",
                               (unsigned long long)off);
                    return -1;
                }
            info->nid_index++;
            break;
        }
        case PERF_RECORD_AUXTRACE_INFO: {
            if (size < 16 + 8 * (PT_PER_CPU_MMAPS + 1) ||
                pd_rd(rp + 8, 4) != PERF_AUXTRACE_INTEL_PT) {
                pd_set_err(err, errlen, "AUXTRACE_INFO at %#llx: not intel_pt or too short",
                           (unsigned long long)off);
                return -1;
            }
            const uint8_t *priv = rp + 16;
            uint64_t npriv = (size - 16) / 8;
            info->pmu_type = (uint32_t)pd_rd(priv, 8);
            info->noretcomp_bit = pd_rd(priv + 8 * PT_NORETCOMP_BIT, 8);
            if (npriv > PT_FILTER_STR_LEN) {
                uint64_t fl = pd_rd(priv + 8 * PT_FILTER_STR_LEN, 8);
                uint64_t room = (npriv - PT_FILTER_STR_LEN - 1) * 8;
                if (fl && (fl >= room || priv[8 * PT_PRIV_MAX + fl] != 0)) {
                    pd_set_err(err, errlen, "AUXTRACE_INFO: filter string length %llu",
                               (unsigned long long)fl);
                    return -1;
                }
            }
            have_info = true;
            info->nauxtrace_info++;
            break;
        }
        case PERF_RECORD_AUXTRACE: {
            if (size != AUXTRACE_REC_SIZE) {
                pd_set_err(err, errlen, "AUXTRACE at %#llx: record size %llu",
                           (unsigned long long)off, (unsigned long long)size);
                return -1;
            }
            payload = pd_rd(rp + 8, 8);
            uint32_t idx = (uint32_t)pd_rd(rp + 32, 4), cpu = (uint32_t)pd_rd(rp + 40, 4);
            if (!have_info || payload > end - off - size || payload % 8 || cpu >= 4096 ||
                !cpu_started[cpu] || idx >= PD_INFO_MAX_QUEUES) {
                pd_set_err(err, errlen,
                           "AUXTRACE at %#llx: no AUXTRACE_INFO or ITRACE_START before it, or "
                           "data past the end, or cpu/idx out of range",
                           (unsigned long long)off);
                return -1;
            }
            if (queue_cpu[idx] != 0xffffffffu && queue_cpu[idx] != cpu) {
                pd_set_err(err, errlen, "AUXTRACE at %#llx: queue %u on two cpus",
                           (unsigned long long)off, idx);
                return -1;
            }
            queue_cpu[idx] = cpu;
            info->queue_bytes[idx] += payload;
            if (idx + 1 > info->nqueue)
                info->nqueue = idx + 1;
            info->aux_bytes += payload;
            info->nauxtrace++;
            break;
        }
        default:
            pd_set_err(err, errlen, "record at %#llx: type %u not written by this writer",
                       (unsigned long long)off, type);
            return -1;
        }
        info->nrec++;
        off += size + payload;
    }
    if (!have_info) {
        pd_set_err(err, errlen, "no AUXTRACE_INFO record");
        return -1;
    }
    if (attr_type[0] != info->pmu_type || info->pmu_type < PERF_TYPE_MAX) {
        pd_set_err(err, errlen, "intel_pt attr type %u, AUXTRACE_INFO PMU type %u", attr_type[0],
                   info->pmu_type);
        return -1;
    }

    /* feature sections: the table at the end of the data */
    uint64_t table = data_off + data_sz;
    unsigned nfeat = 0;
    for (unsigned i = 0; i < 64; i++)
        nfeat += (info->features >> i) & 1;
    if (pd_rd(p + 80, 8) || pd_rd(p + 88, 8) || pd_rd(p + 96, 8)) {
        pd_set_err(err, errlen, "feature bits above 63 set (this writer sets none)");
        return -1;
    }
    if (!in_file(&r, table, (uint64_t)nfeat * 16)) {
        pd_set_err(err, errlen, "feature table outside the file");
        return -1;
    }
    for (unsigned i = 0, bit = 0; i < nfeat; i++, bit++) {
        while (!((info->features >> bit) & 1))
            bit++;
        uint64_t fo = pd_rd(p + table + 16 * i, 8), fs = pd_rd(p + table + 16 * i + 8, 8);
        if (!in_file(&r, fo, fs)) {
            pd_set_err(err, errlen, "feature section %u outside the file", bit);
            return -1;
        }
        if (bit != FEAT_AUXTRACE)
            continue;
        /* the index: every entry the start of an AUXTRACE record, every record listed */
        uint64_t n = fs >= 8 ? pd_rd(p + fo, 8) : ~0ull;
        if (n > (fs - 8) / 16 || n != info->nauxtrace) {
            pd_set_err(err, errlen, "AUXTRACE index: %llu entries for %u records",
                       (unsigned long long)n, info->nauxtrace);
            return -1;
        }
        for (uint64_t e = 0; e < n; e++) {
            uint64_t ro = pd_rd(p + fo + 8 + 16 * e, 8), rs = pd_rd(p + fo + 16 + 16 * e, 8);
            if (rs != AUXTRACE_REC_SIZE || ro < data_off || ro > end - AUXTRACE_REC_SIZE ||
                pd_rd(p + ro, 4) != PERF_RECORD_AUXTRACE || pd_rd(p + ro + 6, 2) != rs) {
                pd_set_err(err, errlen, "AUXTRACE index entry %llu: no AUXTRACE record at %#llx",
                           (unsigned long long)e, (unsigned long long)ro);
                return -1;
            }
        }
        info->naux_index = (unsigned)n;
    }
    return 0;
}
