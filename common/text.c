/* SPDX-License-Identifier: MIT */
/* Client-chosen strings as data (common/text.h). */
#include "common/text.h"

#include <errno.h>
#include <string.h>

/* The lead bytes of RFC 3629 UTF-8, each with the range its second byte
 * must be in (narrower than 80..BF where the short forms, the surrogates
 * and what lies above U+10FFFF would begin); later bytes are 80..BF. */
static const struct lead {
        unsigned char lo, hi, len, lo2, hi2;
} leads[] = {
        { 0x00, 0x7f, 1, 0, 0 },
        { 0xc2, 0xdf, 2, 0x80, 0xbf },  /* C0, C1: overlong */
        { 0xe0, 0xe0, 3, 0xa0, 0xbf },  /* E0 80..9F: overlong */
        { 0xe1, 0xec, 3, 0x80, 0xbf },
        { 0xed, 0xed, 3, 0x80, 0x9f },  /* ED A0..BF: surrogates */
        { 0xee, 0xef, 3, 0x80, 0xbf },
        { 0xf0, 0xf0, 4, 0x90, 0xbf },  /* F0 80..8F: overlong */
        { 0xf1, 0xf3, 4, 0x80, 0xbf },
        { 0xf4, 0xf4, 4, 0x80, 0x8f },  /* F4 90..: above U+10FFFF */
};

size_t text_utf8_char(const char *str, size_t len, uint32_t *ret_cp) {
        const unsigned char *s = (const unsigned char *)str;
        const struct lead *l = NULL;
        for (size_t i = 0; i < sizeof(leads) / sizeof(leads[0]) && !l; i++)
                if (s[0] >= leads[i].lo && s[0] <= leads[i].hi)
                        l = &leads[i];
        if (!l || l->len > len)
                return 0;
        if (l->len > 1 && (s[1] < l->lo2 || s[1] > l->hi2))
                return 0;
        uint32_t cp = s[0] & (l->len == 1 ? 0x7fu : 0x7fu >> l->len);
        for (size_t i = 1; i < l->len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3fu);
        }
        *ret_cp = cp;
        return l->len;
}

/* Valid characters that move a terminal or rearrange what it shows:
 * C1 controls (U+009B is CSI, U+009D OSC), and the format characters that
 * reorder text or break lines (bidi marks, embeddings, overrides,
 * isolates; line and paragraph separators). */
static const struct {
        uint32_t lo, hi;
} unsafe[] = {
        { 0x0080, 0x009f },
        { 0x200e, 0x200f },
        { 0x2028, 0x202e },
        { 0x2066, 0x2069 },
};

enum { C_PLAIN, C_BACKSLASH, C_C0, C_DEL, C_UNSAFE, C_INVALID, CLASSES };
enum { KEEP, HEX, UESC, DOUBLE, FFFD };

/* What each style does with each class (the table in common/text.h). */
static const unsigned char actions[TEXT_STYLES][CLASSES] = {
        [TEXT_UTF8] = { [C_PLAIN] = KEEP, [C_BACKSLASH] = KEEP, [C_C0] = KEEP, [C_DEL] = KEEP,
                        [C_UNSAFE] = KEEP, [C_INVALID] = FFFD },
        [TEXT_JSON] = { [C_PLAIN] = KEEP, [C_BACKSLASH] = KEEP, [C_C0] = KEEP, [C_DEL] = UESC,
                        [C_UNSAFE] = UESC, [C_INVALID] = FFFD },
        [TEXT_TERMINAL] = { [C_PLAIN] = KEEP, [C_BACKSLASH] = DOUBLE, [C_C0] = HEX, [C_DEL] = HEX,
                            [C_UNSAFE] = UESC, [C_INVALID] = HEX },
};

static int class_of(uint32_t cp) {
        if (cp < 0x20)
                return C_C0;
        if (cp == 0x7f)
                return C_DEL;
        if (cp == '\\')
                return C_BACKSLASH;
        for (size_t i = 0; i < sizeof(unsafe) / sizeof(unsafe[0]); i++)
                if (cp >= unsafe[i].lo && cp <= unsafe[i].hi)
                        return C_UNSAFE;
        return C_PLAIN;
}

/* Printable ASCII but the backslash: C_PLAIN, which every style keeps
 * as it is (actions[][C_PLAIN]). Most text is all of it, so runs of it
 * skip the decoding: these checks run for every name hbgd logs and every
 * string of the kernel table a client takes at connect. */
static inline bool plain_ascii(unsigned char b) {
        return b >= 0x20 && b < 0x7f && b != '\\';
}

static size_t plain_ascii_run(const char *s, size_t len) {
        size_t k = 0;
        while (k < len && plain_ascii((unsigned char)s[k]))
                k++;
        return k;
}

bool text_is_plain(const char *s, size_t max) {
        if (!s)
                return false;
        size_t n = strnlen(s, max);
        if (n >= max)
                return false;
        for (size_t at = 0; at < n;) {
                if (plain_ascii((unsigned char)s[at]) || s[at] == '\\') {
                        at++;
                        continue;
                }
                uint32_t cp;
                size_t k = text_utf8_char(s + at, n - at, &cp);
                if (k == 0)
                        return false;
                int c = class_of(cp);
                if (c != C_PLAIN && c != C_BACKSLASH)
                        return false;
                at += k;
        }
        return true;
}

/* The longest piece: "\u202e". */
#define PIECE_MAX 6

/* The character (or stray byte) at s, len > 0, in `style`: written to out,
 * its length returned; *ret_used the bytes of s it stands for. */
static size_t piece(const char *s, size_t len, enum text_style style, char out[PIECE_MAX], size_t *ret_used) {
        static const char hex[] = "0123456789abcdef";
        uint32_t cp = 0;
        size_t n = text_utf8_char(s, len, &cp);
        int cls = n ? class_of(cp) : C_INVALID;
        unsigned char byte = (unsigned char)s[0];
        *ret_used = n ? n : 1;
        switch (actions[style][cls]) {
        case KEEP:
                memcpy(out, s, n);
                return n;
        case HEX:
                out[0] = '\\';
                out[1] = 'x';
                out[2] = hex[byte >> 4];
                out[3] = hex[byte & 15];
                return 4;
        case UESC:
                out[0] = '\\';
                out[1] = 'u';
                for (int i = 0; i < 4; i++)
                        out[2 + i] = hex[(cp >> (12 - 4 * i)) & 15];
                return 6;
        case DOUBLE:
                out[0] = out[1] = '\\';
                return 2;
        default: /* FFFD */
                memcpy(out, "\xef\xbf\xbd", 3);
                return 3;
        }
}

size_t text_copy(char *dst, size_t sz, const char *src, size_t len, enum text_style style) {
        size_t w = 0;
        for (size_t i = 0; i < len;) {
                size_t run = plain_ascii_run(src + i, len - i);
                if (run) {
                        size_t room = sz > w + 1 ? sz - w - 1 : 0;
                        memcpy(dst + w, src + i, run < room ? run : room);
                        w += run < room ? run : room;
                        if (run > room)
                                break;
                        i += run;
                        continue;
                }
                char p[PIECE_MAX];
                size_t used, n = piece(src + i, len - i, style, p, &used);
                if (w + n + 1 > sz)
                        break;
                memcpy(dst + w, p, n);
                w += n;
                i += used;
        }
        dst[w] = 0;
        return w;
}

size_t text_copy_str(char *dst, size_t sz, const char *src, enum text_style style) {
        return text_copy(dst, sz, src, strlen(src), style);
}

int text_write(FILE *f, const char *src, size_t len, enum text_style style) {
        char buf[4096];
        size_t w = 0;
        for (size_t i = 0; i < len;) {
                if (w + PIECE_MAX > sizeof(buf)) {
                        if (fwrite(buf, 1, w, f) != w)
                                return -EIO;
                        w = 0;
                }
                size_t used;
                w += piece(src + i, len - i, style, buf + w, &used);
                i += used;
        }
        if (w && fwrite(buf, 1, w, f) != w)
                return -EIO;
        return 0;
}
