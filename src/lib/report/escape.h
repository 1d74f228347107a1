/* Untrusted text for reports (escape.c): UTF-8, display width, and whole strings escaped for
 * one context. The bottom of the report room: it calls nothing above it. Internal. */
#ifndef PC_ESCAPE_H
#define PC_ESCAPE_H

#include <paritycheck/report.h> /* pc_escape_context */

#include <stddef.h> /* size_t */
#include <stdio.h>  /* FILE */

/** Length of the valid UTF-8 sequence at p (1 to 4), or 0 when the bytes there are not one. */
size_t pc_report_utf8_len(const unsigned char *p);

/** s as XML (or HTML attribute) text: pc_escape_put in PC_ESCAPE_XML. */
void pc_report_put_xml(FILE *out, const char *s);

/** Untrusted s as text for ctx (pc_escape_put of all of s). */
void pc_report_put_escaped(FILE *out, const char *s, pc_escape_context ctx);

/** Where the longest tail of s whose rendering for ctx is at most width columns wide starts (an
 * offset into s at a character's start; strlen(s) when not even its last character fits). */
size_t pc_report_escape_tail(const char *s, size_t width, pc_escape_context ctx);

/** The display width of s's rendering for ctx, in terminal columns: a CJK character takes two, a
 * combining mark none (docs/reports.md, "Display width"). What aligns the text report's columns. */
size_t pc_report_columns(const char *s, pc_escape_context ctx);

/** The longest head of s's rendering for ctx that is at most width columns wide and fits size
 * bytes with its NUL, whole characters only, into buf; returns its width in columns. */
size_t pc_report_escape_head(char *buf, size_t size, const char *s, size_t width,
                             pc_escape_context ctx);

#endif
