/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: common/text.c on arbitrary bytes (a session's name as a
 * client may send it, anything hbgctl or hbgd's log may show). Besides
 * "no crash, no overflow" it checks each style's promise against a
 * UTF-8 reader written here on its own:
 *   - every output is valid UTF-8, and TEXT_UTF8 and TEXT_JSON leave
 *     valid input without DEL, C1 or format characters as it was;
 *   - TEXT_TERMINAL has no control left and its escapes read back to the
 *     input byte for byte;
 *   - a cut output is a prefix of the whole one that ends on a character
 *     or escape boundary; text_write() writes the whole one.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "tests/fuzz/fuzz.h"

#define CHECK(cond)                                                                     \
        do {                                                                            \
                if (!(cond)) {                                                          \
                        fprintf(stderr, "fuzz_text: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
                        abort();                                                        \
                }                                                                       \
        } while (0)

/* The code point at s (n bytes there) by its bit pattern, then the
 * shortest-form, surrogate and range rules; 0 if not UTF-8. */
static size_t decode(const unsigned char *s, size_t n, unsigned long *ret) {
        size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
        if (!len || len > n)
                return 0;
        unsigned long cp = len == 1 ? s[0] : s[0] & (0xffu >> (len + 1));
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        static const unsigned long min[] = { 0, 0, 0x80, 0x800, 0x10000 };
        if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        *ret = cp;
        return len;
}

static bool unsafe(unsigned long cp) {
        return cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x200e || cp == 0x200f ||
               (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Valid UTF-8; *ret_plain: none of it C0 (but newline when allowed), DEL,
 * C1 or a format character. */
static bool valid(const char *s, size_t n, bool *ret_plain) {
        bool plain = true;
        for (size_t i = 0; i < n;) {
                unsigned long cp = 0;
                size_t k = decode((const unsigned char *)s + i, n - i, &cp);
                if (!k)
                        return false;
                plain = plain && cp >= 0x20 && !unsafe(cp);
                i += k;
        }
        *ret_plain = plain;
        return true;
}

static int hexval(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* TEXT_TERMINAL read back: its bytes into out (n at most); the length, or
 * -1 where an escape is malformed or cut. */
static long unescape(const char *s, size_t n, unsigned char *out) {
        size_t w = 0;
        for (size_t i = 0; i < n;) {
                if (s[i] != '\\') {
                        out[w++] = (unsigned char)s[i++];
                        continue;
                }
                if (i + 1 < n && s[i + 1] == '\\') {
                        out[w++] = '\\';
                        i += 2;
                } else if (i + 3 < n && s[i + 1] == 'x' && hexval(s[i + 2]) >= 0 && hexval(s[i + 3]) >= 0) {
                        out[w++] = (unsigned char)(hexval(s[i + 2]) << 4 | hexval(s[i + 3]));
                        i += 4;
                } else if (i + 5 < n && s[i + 1] == 'u') {
                        unsigned long cp = 0;
                        for (int k = 2; k < 6; k++) {
                                if (hexval(s[i + k]) < 0)
                                        return -1;
                                cp = cp << 4 | (unsigned long)hexval(s[i + k]);
                        }
                        if (!unsafe(cp) || cp < 0x80)
                                return -1;  /* only what needs \u gets it */
                        if (cp < 0x800) {
                                out[w++] = (unsigned char)(0xc0 | cp >> 6);
                        } else {
                                out[w++] = (unsigned char)(0xe0 | cp >> 12);
                                out[w++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
                        }
                        out[w++] = (unsigned char)(0x80 | (cp & 0x3f));
                        i += 6;
                } else {
                        return -1;
                }
        }
        return (long)w;
}

static void check_style(const uint8_t *data, size_t size, enum text_style style, size_t cut) {
        const char *in = (const char *)data;
        size_t cap = 6 * size + 1;
        char *full = malloc(cap), *part = malloc(cap);
        unsigned char *back = malloc(size + 1);
        CHECK(full && part && back);
        size_t n = text_copy(full, cap, in, size, style);
        CHECK(n < cap && full[n] == 0);
        bool plain_in, plain_out;
        bool valid_in = valid(in, size, &plain_in);
        CHECK(valid(full, n, &plain_out));
        if (style == TEXT_TERMINAL) {
                CHECK(plain_out);
                long b = unescape(full, n, back);
                CHECK(b == (long)size && memcmp(back, data, size) == 0);
        } else if (valid_in && (plain_in || style == TEXT_UTF8)) {
                CHECK(n == size && memcmp(full, data, size) == 0);
        }
        if (style == TEXT_JSON) {
                for (size_t i = 0; i < n;) {
                        unsigned long cp = 0;
                        size_t k = decode((const unsigned char *)full + i, n - i, &cp);
                        CHECK(k && !unsafe(cp));
                        i += k;
                }
        }

        /* cut: a prefix, on a boundary (no room for one more piece) */
        size_t sz = cut % cap + 1;
        size_t k = text_copy(part, sz, in, size, style);
        CHECK(k < sz && part[k] == 0 && k <= n && memcmp(part, full, k) == 0);
        CHECK(k == n || k + 6 + 1 > sz);
        bool plain_part;
        CHECK(valid(part, k, &plain_part));
        if (style == TEXT_TERMINAL)
                CHECK(unescape(part, k, back) >= 0);

        /* the stream form */
        char *buf = NULL;
        size_t blen = 0;
        FILE *f = open_memstream(&buf, &blen);
        CHECK(f);
        CHECK(text_write(f, in, size, style) == 0);
        CHECK(fclose(f) == 0);
        CHECK(blen == n && memcmp(buf, full, n) == 0);
        free(buf);
        free(full);
        free(part);
        free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* the first byte picks where the cut falls, the rest is the text */
        size_t cut = size ? data[0] : 0;
        const uint8_t *text = size ? data + 1 : data;
        size_t len = size ? size - 1 : 0;
        for (int st = 0; st < TEXT_STYLES; st++)
                check_style(text, len, (enum text_style)st, cut);
        return 0;
}

int fuzz_write_seeds(const char *dir) {
        static const struct {
                const char *name;
                const char *text;
                size_t len;
        } seeds[] = {
#define SEED(name, s) { name, s, sizeof(s) - 1 }
                SEED("plain", "\x40" "producer-7"),
                SEED("osc_title", "\x10\x1b]0;PWNED\x07\x1b[6n\x1b[21t"),
                SEED("c1_csi", "\x05\xc2\x9b" "6n\xc2\x9d" "0;x\xc2\x9c"),
                SEED("bidi", "\x09" "abc\xe2\x80\xae" "fed\xe2\x81\xa6" "x\xe2\x81\xa9\xe2\x80\xa8"),
                SEED("invalid", "\x03\xff\xfe\xc0\xaf\xe0\x80\x80\xed\xa0\x80\xf4\x90\x80\x80\x80"),
                SEED("truncated", "\x02" "a\xe2\x82" "b\xf0\x9f\x98"),
                SEED("multibyte", "\x3f\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"),
                SEED("backslash_del", "\x07\\x1b\\\\\x7f\\u009b"),
                SEED("session_name", "\x3f\x1b]0;PWNED\x07\xc2\x9b" "6n\xff\xfe\x7f"
                                     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xf0\x9f\x98\x80\xe2\x82\xac" "tail"),
#undef SEED
        };
        for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
                int err = fuzz_seed(dir, seeds[i].name, seeds[i].text, seeds[i].len);
                if (err < 0)
                        return err;
        }
        return 0;
}
