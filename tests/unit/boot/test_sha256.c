/* SPDX-License-Identifier: MIT */
/*
 * Host tests for the loader's SHA-256 (boot/sha256.c) and its vmm.elf pin check
 * (boot/vmm_pin.c):
 *   - the FIPS 180-4 example messages (NIST's published digests);
 *   - coreutils' sha256sum as an independent oracle on pseudo-random files of
 *     every length 0..320, the lengths around each block boundary up to 10 KiB
 *     (64k-9 .. 64k+8: where the padding spills into a second block) and random
 *     lengths up to 10 KiB;
 *   - randomized split updates (chunks of 0..~200 bytes, and byte by byte) == one shot;
 *   - the pin verdict and its exact lines: the pinned bytes match, any one-byte change,
 *     a byte less or a byte more does not, an unpinned loader says so.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../../boot/sha256.h"
#include "../../../boot/vmm_pin.h"

#define MAX_LEN (10 * 1024 + 64)

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void) /* xorshift64: reproducible pseudo-random bytes and lengths */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)next();
}

static void to_hex(const uint8_t d[PTV_SHA256_LEN], char out[2 * PTV_SHA256_LEN + 1])
{
    for (int i = 0; i < PTV_SHA256_LEN; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

static void expect_digest(const void *msg, size_t len, const char *hex)
{
    uint8_t d[PTV_SHA256_LEN];
    char got[2 * PTV_SHA256_LEN + 1];
    ptv_sha256(msg, len, d);
    to_hex(d, got);
    assert_string_equal(got, hex);
}

/* FIPS 180-4 examples (csrc.nist.gov "Example Values": SHA256.pdf, SHA2_Additional.pdf) */
static void test_fips_examples(void **state)
{
    static const char m448[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    static const char m896[] = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                               "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    uint8_t *a = malloc(1000000);

    expect_digest("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect_digest("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect_digest(m448, strlen(m448),
                  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    expect_digest(m896, strlen(m896),
                  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    assert_non_null(a);
    memset(a, 'a', 1000000);
    expect_digest(a, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

/* the lengths checked against sha256sum */
#define MAX_FILES 4096
static size_t oracle_lengths(size_t lens[MAX_FILES])
{
    size_t n = 0;
    for (size_t l = 0; l <= 320; l++)
        lens[n++] = l;
    for (size_t k = 6; k * 64 <= 10240; k++)
        for (size_t l = k * 64 - 9; l <= k * 64 + 8; l++)
            lens[n++] = l;
    for (int i = 0; i < 60; i++)
        lens[n++] = (size_t)(next() % 10241);
    return n; /* 3171 <= MAX_FILES */
}

static void test_vs_sha256sum(void **state)
{
    static size_t lens[MAX_FILES];
    size_t n = oracle_lengths(lens), checked = 0;
    char dir[] = "/tmp/test_sha256.XXXXXX", path[128], cmd[200], line[256];
    uint8_t *buf = malloc(MAX_LEN), d[PTV_SHA256_LEN];
    char want[2 * PTV_SHA256_LEN + 1];
    FILE *f;

    assert_non_null(buf);
    assert_non_null(mkdtemp(dir));
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%05zu", dir, i);
        f = fopen(path, "wb");
        assert_non_null(f);
        fill(buf, lens[i]);
        assert_int_equal(fwrite(buf, 1, lens[i], f), lens[i]);
        fclose(f);
    }
    /* sha256sum prints "<64 hex>  <path>", in argument order */
    snprintf(cmd, sizeof(cmd), "sha256sum %s/*", dir);
    f = popen(cmd, "r");
    assert_non_null(f);
    for (size_t i = 0; i < n && fgets(line, sizeof(line), f); i++) {
        FILE *in;
        size_t len;
        snprintf(path, sizeof(path), "%s/%05zu", dir, i);
        assert_true(strlen(line) > 66 && line[64] == ' ');
        assert_string_equal(line + 66, strcat(strcpy((char[160]){0}, path), "\n"));
        in = fopen(path, "rb");
        assert_non_null(in);
        len = fread(buf, 1, MAX_LEN, in);
        fclose(in);
        assert_int_equal(len, lens[i]);
        ptv_sha256(buf, len, d);
        to_hex(d, want);
        line[64] = '\0';
        if (strcmp(line, want))
            fail_msg("length %zu: sha256sum %s, ptv_sha256 %s", len, line, want);
        checked++;
        unlink(path);
    }
    assert_int_equal(pclose(f), 0);
    assert_int_equal(checked, n); /* sha256sum answered for every file */
    rmdir(dir);
    free(buf);
    printf("sha256sum agrees on %zu files of 0..%d bytes\n", checked, 10240);
}

/* update() in random pieces (including empty ones) gives the one-shot digest */
static void test_split_updates(void **state)
{
    uint8_t *buf = malloc(4096), one[PTV_SHA256_LEN], split[PTV_SHA256_LEN];
    struct ptv_sha256 s;

    assert_non_null(buf);
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = (size_t)(next() % (iter < 1000 ? 300 : 4096)), off = 0;
        fill(buf, len);
        ptv_sha256(buf, len, one);
        ptv_sha256_init(&s);
        while (off < len) {
            uint64_t r = next();
            /* mostly small pieces, some exactly a block or around one, some empty */
            size_t piece = r % 4 == 0   ? (size_t)(r >> 8) % 3 + 63
                           : r % 4 == 1 ? (size_t)(r >> 8) % 8
                                        : (size_t)(r >> 8) % 200;
            if (piece > len - off)
                piece = len - off;
            ptv_sha256_update(&s, buf + off, piece);
            off += piece;
        }
        ptv_sha256_final(&s, split);
        if (memcmp(one, split, sizeof(one)))
            fail_msg("iteration %d, length %zu: split updates differ from one shot", iter, len);
    }
    for (size_t len = 0; len <= 200; len++) { /* byte by byte */
        fill(buf, len);
        ptv_sha256(buf, len, one);
        ptv_sha256_init(&s);
        for (size_t i = 0; i < len; i++)
            ptv_sha256_update(&s, buf + i, 1);
        ptv_sha256_final(&s, split);
        assert_memory_equal(one, split, sizeof(one));
    }
    free(buf);
}

static const char VMM[] = "\\ptvisor\\vmm.elf";

static enum ptv_pin_verdict check(const struct ptv_vmm_pin *pin, const void *p, size_t n, char *msg)
{
    enum ptv_pin_verdict v = ptv_vmm_pin_check(pin, p, n, VMM, msg, PTV_PIN_MSG_MAX);
    assert_true(strlen(msg) < PTV_PIN_MSG_MAX - 1); /* never cut */
    return v;
}

static void test_pin_lines(void **state)
{
    struct ptv_vmm_pin pin = {.pinned = true};
    char msg[PTV_PIN_MSG_MAX];

    ptv_sha256("abc", 3, pin.sha256);
    assert_int_equal(check(&pin, "abc", 3, msg), PTV_PIN_MATCH);
    assert_string_equal(msg, "\\ptvisor\\vmm.elf: SHA-256 ba7816bf8f01cfea... matches the "
                             "loader's built-in digest");
    assert_int_equal(check(&pin, "abd", 3, msg), PTV_PIN_MISMATCH);
    assert_string_equal(msg, "\\ptvisor\\vmm.elf: SHA-256 mismatch: expected ba7816bf8f01cfea..., "
                             "found a52d159f262b2c6d... (not the vmm.elf this loader was built "
                             "with) -- booting natively");
    pin.pinned = false;
    assert_int_equal(check(&pin, "", 0, msg), PTV_PIN_UNPINNED);
    assert_string_equal(msg, "\\ptvisor\\vmm.elf: SHA-256 e3b0c44298fc1c14... not checked: this "
                             "loader has no built-in digest (a test build)");
}

/* every one-byte change of a pinned file, a byte less, a byte more: refused */
static void test_pin_refuses_any_change(void **state)
{
    enum { N = 3000 };
    static uint8_t file[N + 1];
    struct ptv_vmm_pin pin = {.pinned = true};
    char msg[PTV_PIN_MSG_MAX];

    fill(file, N);
    ptv_sha256(file, N, pin.sha256);
    assert_int_equal(check(&pin, file, N, msg), PTV_PIN_MATCH);
    for (size_t i = 0; i < N; i++) {
        uint8_t old = file[i];
        file[i] ^= (uint8_t)(1u << (i % 8)); /* one bit of one byte */
        if (check(&pin, file, N, msg) != PTV_PIN_MISMATCH)
            fail_msg("byte %zu changed and still accepted", i);
        file[i] = old;
    }
    assert_int_equal(check(&pin, file, N - 1, msg), PTV_PIN_MISMATCH);
    file[N] = 0;
    assert_int_equal(check(&pin, file, N + 1, msg), PTV_PIN_MISMATCH);
    assert_int_equal(check(&pin, file, N, msg), PTV_PIN_MATCH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_examples),          cmocka_unit_test(test_vs_sha256sum),
        cmocka_unit_test(test_split_updates),          cmocka_unit_test(test_pin_lines),
        cmocka_unit_test(test_pin_refuses_any_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
