/* SPDX-License-Identifier: MIT */
/*
 * common/text.c: client-chosen strings as data. The UTF-8 reader against
 * an encoder written here from RFC 3629 (every code point, its overlong
 * forms, the surrogates, what lies above U+10FFFF), then each style on
 * C0, C1, DEL, backslashes, stray bytes, format characters and 2- to
 * 4-byte characters, and the cut on a character boundary.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "tests/check_main.h"
#include "tests/test_util.h"

/* cp in exactly n bytes (n larger than needed: an overlong form). */
static void encode(uint32_t cp, unsigned n, unsigned char *out) {
        static const unsigned char mark[] = { 0, 0, 0xc0, 0xe0, 0xf0 };
        for (unsigned i = n - 1; i > 0; i--, cp >>= 6)
                out[i] = (unsigned char)(0x80 | (cp & 0x3f));
        out[0] = (unsigned char)(mark[n] | cp);
}

static unsigned shortest(uint32_t cp) {
        return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

START_TEST(test_every_code_point) {
        unsigned char b[4];
        uint32_t got;
        for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
                unsigned n = shortest(cp);
                encode(cp, n, b);
                size_t r = text_utf8_char((const char *)b, n, &got);
                if (cp >= 0xd800 && cp <= 0xdfff) {
                        HOT_ASSERT_MSG(r == 0, "surrogate U+%04X accepted", (unsigned)cp);
                        continue;
                }
                HOT_ASSERT_MSG(r == n && got == cp, "U+%04X: length %zu, read U+%04X", (unsigned)cp, r, (unsigned)got);
                /* one byte short: not a character */
                HOT_ASSERT_MSG(n == 1 || text_utf8_char((const char *)b, n - 1, &got) == 0, "U+%04X cut short accepted",
                               (unsigned)cp);
                /* every longer form is overlong */
                for (unsigned m = n + 1; m <= 4 && cp < 0x10000; m++) {
                        unsigned char o[4];
                        encode(cp, m, o);
                        HOT_ASSERT_MSG(text_utf8_char((const char *)o, m, &got) == 0, "U+%04X in %u bytes accepted",
                                       (unsigned)cp, m);
                }
        }
        /* above U+10FFFF, with F4 and with the leads F5..FF */
        encode(0x110000, 4, b);
        ck_assert_uint_eq(text_utf8_char((const char *)b, 4, &got), 0);
        for (unsigned lead = 0xf5; lead <= 0xff; lead++) {
                unsigned char x[4] = { (unsigned char)lead, 0x80, 0x80, 0x80 };
                ck_assert_uint_eq(text_utf8_char((const char *)x, 4, &got), 0);
        }
        /* a lone continuation byte, a bad continuation */
        ck_assert_uint_eq(text_utf8_char("\x80", 1, &got), 0);
        ck_assert_uint_eq(text_utf8_char("\xe2\x28\xa1", 3, &got), 0);
        ck_assert_uint_eq(text_utf8_char("\xf0\x9f\x98\x41", 4, &got), 0);
}
END_TEST

struct bytes {
        const char *s;
        size_t n;
};
#define B(lit) { lit, sizeof(lit) - 1 }
#define S(lit) lit, sizeof(lit) - 1

struct example {
        struct bytes in, out[TEXT_STYLES];
};

static const struct example examples[] = {
        /* plain and multi-byte characters are kept by every style */
        { B("abc"), { B("abc"), B("abc"), B("abc") } },
        { B("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
          { B("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), B("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            B("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") } },
        /* C0: an OSC setting the window title, BEL, newline, tab */
        { B("\x1b]0;PWNED\x07"), { B("\x1b]0;PWNED\x07"), B("\x1b]0;PWNED\x07"), B("\\x1b]0;PWNED\\x07") } },
        { B("a\nb\tc\x01"), { B("a\nb\tc\x01"), B("a\nb\tc\x01"), B("a\\x0ab\\x09c\\x01") } },
        { B("a\0b"), { B("a\0b"), B("a\0b"), B("a\\x00b") } },
        /* DEL */
        { B("x\x7f"), { B("x\x7f"), B("x\\u007f"), B("x\\x7f") } },
        /* C1: CSI, NEL, and U+00A0 just past them (kept) */
        { B("\xc2\x9b" "6n\xc2\x85\xc2\x80\xc2\x9f\xc2\xa0"),
          { B("\xc2\x9b" "6n\xc2\x85\xc2\x80\xc2\x9f\xc2\xa0"), B("\\u009b6n\\u0085\\u0080\\u009f\xc2\xa0"),
            B("\\u009b6n\\u0085\\u0080\\u009f\xc2\xa0") } },
        /* bidi override, isolate, line separator; U+2030 kept */
        { B("\xe2\x80\xae\xe2\x81\xa6\xe2\x80\xa8\xe2\x80\xb0"),
          { B("\xe2\x80\xae\xe2\x81\xa6\xe2\x80\xa8\xe2\x80\xb0"), B("\\u202e\\u2066\\u2028\xe2\x80\xb0"),
            B("\\u202e\\u2066\\u2028\xe2\x80\xb0") } },
        /* backslashes: only the terminal doubles them (an escape is never
         * mistaken for the four characters \x1b) */
        { B("\\x1b"), { B("\\x1b"), B("\\x1b"), B("\\\\x1b") } },
        /* stray bytes: each one on its own */
        { B("\xff\xfe"), { B("\xef\xbf\xbd\xef\xbf\xbd"), B("\xef\xbf\xbd\xef\xbf\xbd"), B("\\xff\\xfe") } },
        /* overlong '/' and NUL */
        { B("\xc0\xaf\xe0\x80\x80"),
          { B("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"),
            B("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"), B("\\xc0\\xaf\\xe0\\x80\\x80") } },
        /* a surrogate, U+110000 */
        { B("\xed\xa0\x80"), { B("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"), B("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"),
                               B("\\xed\\xa0\\x80") } },
        { B("\xf4\x90\x80\x80"),
          { B("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"), B("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"),
            B("\\xf4\\x90\\x80\\x80") } },
        /* a character cut short by the end of the string, then one cut
         * short by the next character */
        { B("a\xe2\x82"), { B("a\xef\xbf\xbd\xef\xbf\xbd"), B("a\xef\xbf\xbd\xef\xbf\xbd"), B("a\\xe2\\x82") } },
        { B("\xf0\x9f\x98" "b"), { B("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "b"), B("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "b"),
                                  B("\\xf0\\x9f\\x98" "b") } },
};

START_TEST(test_styles) {
        const struct example *e = &examples[_i];
        for (int st = 0; st < TEXT_STYLES; st++) {
                char out[256];
                const struct bytes *want = &e->out[st];
                size_t n = text_copy(out, sizeof(out), e->in.s, e->in.n, (enum text_style)st);
                HOT_ASSERT_MSG(n == want->n && memcmp(out, want->s, n) == 0 && out[n] == 0,
                               "example %d style %d: got \"%.*s\" (%zu bytes), want \"%s\"", _i, st, (int)n, out, n,
                               want->s);
                /* the stream form writes the same bytes */
                char *buf = NULL;
                size_t sz = 0;
                FILE *f = open_memstream(&buf, &sz);
                ck_assert_ptr_nonnull(f);
                ck_assert_int_eq(text_write(f, e->in.s, e->in.n, (enum text_style)st), 0);
                fclose(f);
                HOT_ASSERT_MSG(sz == n && memcmp(buf, out, n) == 0, "example %d style %d: text_write differs", _i, st);
                free(buf);
        }
}
END_TEST

/* Where the output is full, it ends before the character or escape that
 * does not fit whole. */
START_TEST(test_cut_on_boundary) {
        char out[64];
        /* "abc€" in 5 bytes: the euro sign (3 bytes) needs 7 */
        ck_assert_uint_eq(text_copy(out, 5, S("abc\xe2\x82\xac"), TEXT_UTF8), 3);
        ck_assert_str_eq(out, "abc");
        ck_assert_uint_eq(text_copy(out, 7, S("abc\xe2\x82\xac"), TEXT_UTF8), 6);
        ck_assert_str_eq(out, "abc\xe2\x82\xac");
        /* a 4-byte character across the cut */
        ck_assert_uint_eq(text_copy(out, 6, S("ab\xf0\x9f\x98\x80"), TEXT_UTF8), 2);
        ck_assert_uint_eq(text_copy(out, 7, S("ab\xf0\x9f\x98\x80"), TEXT_UTF8), 6);
        /* an escape is not cut either */
        ck_assert_uint_eq(text_copy(out, 4, S("\x1b"), TEXT_TERMINAL), 0);
        ck_assert_str_eq(out, "");
        ck_assert_uint_eq(text_copy(out, 5, S("\x1b"), TEXT_TERMINAL), 4);
        ck_assert_uint_eq(text_copy(out, 7, S("a\xc2\x9b"), TEXT_TERMINAL), 1);
        ck_assert_uint_eq(text_copy(out, 8, S("a\xc2\x9b"), TEXT_TERMINAL), 7);
        /* nothing fits in one byte but the NUL */
        ck_assert_uint_eq(text_copy(out, 1, S("a"), TEXT_UTF8), 0);
        ck_assert_str_eq(out, "");
        /* hbgd's session name: 64 bytes with the NUL, a 2-byte character
         * across byte 63 */
        char name[80];
        memset(name, 'a', 62);
        memcpy(name + 62, "\xc3\xa9z", 4);
        ck_assert_uint_eq(text_copy_str(out, sizeof(out), name, TEXT_UTF8), 62);
        memset(name, 'a', 61);
        memcpy(name + 61, "\xc3\xa9z", 4);
        ck_assert_uint_eq(text_copy_str(out, sizeof(out), name, TEXT_UTF8), 63);
        ck_assert_str_eq(out + 61, "\xc3\xa9");
}
END_TEST

/* The stream form flushes its buffer more than once on a long input. */
START_TEST(test_write_long) {
        enum { N = 5000 };
        static char in[2 * N];
        for (size_t i = 0; i < N; i++)
                memcpy(in + 2 * i, "\xc2\x9b", 2);
        char *buf = NULL;
        size_t sz = 0;
        FILE *f = open_memstream(&buf, &sz);
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(text_write(f, in, sizeof(in), TEXT_JSON), 0);
        fclose(f);
        ck_assert_uint_eq(sz, 6 * N);
        for (size_t i = 0; i < N; i++)
                HOT_ASSERT_MSG(memcmp(buf + 6 * i, "\\u009b", 6) == 0, "piece %zu", i);
        free(buf);
}
END_TEST

/* text_copy() and text_is_plain() take runs of printable ASCII whole;
 * text_write() still goes one character at a time. Every pair of bytes
 * between ASCII on both sides (a backslash among them) must come out the
 * same both ways, whole and cut at every size, and be plain exactly when
 * the terminal style changes nothing but its doubled backslashes. */
START_TEST(test_ascii_runs) {
        for (unsigned b1 = 0; b1 < 256; b1++) {
                for (int st = 0; st < TEXT_STYLES; st++) {
                        char *buf = NULL;
                        size_t sz = 0;
                        FILE *f = open_memstream(&buf, &sz);
                        ck_assert_ptr_nonnull(f);
                        static char copied[256 * 64];
                        size_t w = 0;
                        for (unsigned b2 = 0; b2 < 256; b2++) {
                                const char in[] = { 'a', 'b', (char)b1, (char)b2, '\\', 'c' };
                                char out[64];
                                size_t n = text_copy(out, sizeof(out), in, sizeof(in), (enum text_style)st);
                                HOT_ASSERT_MSG(out[n] == 0, "bytes %02x %02x: no NUL", b1, b2);
                                memcpy(copied + w, out, n);
                                w += n;
                                HOT_ASSERT_MSG(text_write(f, in, sizeof(in), (enum text_style)st) == 0,
                                               "bytes %02x %02x style %d: text_write failed", b1, b2, st);
                                /* cut: a prefix of the whole, ending on a piece */
                                for (size_t cut = 1; cut < n + 1; cut++) {
                                        char part[64];
                                        size_t k = text_copy(part, cut, in, sizeof(in), (enum text_style)st);
                                        HOT_ASSERT_MSG(k < cut && memcmp(part, out, k) == 0 && part[k] == 0,
                                                       "bytes %02x %02x style %d cut %zu", b1, b2, st, cut);
                                }
                        }
                        fclose(f);
                        HOT_ASSERT_MSG(sz == w && memcmp(buf, copied, w) == 0,
                                       "byte %02x style %d: copy and write differ", b1, st);
                        free(buf);
                }
                for (unsigned b2 = 1; b2 < 256 && b1; b2++) {
                        const char in[] = { 'a', (char)b1, (char)b2, '\\', 0 };
                        char term[64], doubled[64];
                        text_copy_str(term, sizeof(term), in, TEXT_TERMINAL);
                        size_t d = 0;
                        for (const char *p = in; *p; p++) {
                                doubled[d++] = *p;
                                if (*p == '\\')
                                        doubled[d++] = '\\';
                        }
                        doubled[d] = 0;
                        HOT_ASSERT_MSG(text_is_plain(in, sizeof(in)) == (strcmp(term, doubled) == 0),
                                       "bytes %02x %02x: plain %d, terminal \"%s\"", b1, b2,
                                       text_is_plain(in, sizeof(in)), term);
                }
        }
}
END_TEST

static Suite *text_suite(void) {
        Suite *s = suite_create("text");
        TCase *tc = tcase_create("utf8");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_every_code_point);
        suite_add_tcase(s, tc);

        tc = tcase_create("styles");
        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_styles, 0, (int)(sizeof(examples) / sizeof(examples[0])));
        tcase_add_test(tc, test_cut_on_boundary);
        tcase_add_test(tc, test_write_long);
        tcase_add_test(tc, test_ascii_runs);
        suite_add_tcase(s, tc);
        return s;
}

const struct check_main check_main = { .suite = text_suite };
