/* SPDX-License-Identifier: MIT */
/*
 * Strings a client chose (a session's name from its Hello, a graph file's
 * names, hbgd's messages that quote them) are data, not text: before one
 * reaches a terminal, a log line, a journal field or a JSON document it is
 * made valid UTF-8 with every control visible (docs/SECURITY.md, "Strings
 * from clients"). hbgd, hbgctl and the client library share this one
 * implementation.
 *
 * A string is read as UTF-8 (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF). Each character or stray byte falls in a class
 * and each style says what becomes of it:
 *
 *   class                      TEXT_UTF8  TEXT_JSON  TEXT_TERMINAL
 *   printable UTF-8            kept       kept       kept
 *   backslash                  kept       kept       \\
 *   C0 control (U+0000-001F)   kept       kept       \x1b
 *   DEL                        kept       \u007f     \x7f
 *   C1 control (U+0080-009F),
 *   bidi and line-separator
 *   format characters          kept       \u009b     \u009b
 *   byte not valid UTF-8       U+FFFD     U+FFFD     \xff
 *
 * TEXT_JSON is for a serialised JSON document whose serialiser already
 * escaped C0 controls, quotes and backslashes inside strings (json-c
 * does); outside strings JSON is ASCII, so it changes strings only.
 * Output is never cut inside a character or an escape.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum text_style {
        TEXT_UTF8,      /* valid UTF-8: stray bytes become U+FFFD */
        TEXT_JSON,      /* and DEL, C1 and format characters \uXXXX */
        TEXT_TERMINAL,  /* every control and stray byte escaped */
        TEXT_STYLES
};

/* The valid UTF-8 character starting s[0] (len > 0 bytes there): its
 * length 1..4 and *ret_cp its code point, or 0 if s[0] does not start one
 * (a continuation byte, an overlong form, a surrogate, above U+10FFFF, or
 * cut short by len). */
size_t text_utf8_char(const char *s, size_t len, uint32_t *ret_cp);
/* Is s (NUL-terminated) shorter than max bytes and plain text: valid
 * UTF-8 with no control character (C0, DEL, C1) and none of the format
 * characters that rearrange what a terminal shows? false for NULL. */
bool text_is_plain(const char *s, size_t max);

/* src[0..len) in `style` into dst (sz >= 1 bytes, NUL-terminated): as many
 * whole characters and escapes as fit. Returns the bytes written, the NUL
 * not counted. */
size_t text_copy(char *dst, size_t sz, const char *src, size_t len, enum text_style style);

/* The same, NUL-terminated src. */
size_t text_copy_str(char *dst, size_t sz, const char *src, enum text_style style);

/* src[0..len) in `style` written to f. 0, or -EIO. */
int text_write(FILE *f, const char *src, size_t len, enum text_style style);
