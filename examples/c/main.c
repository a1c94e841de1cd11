/* Translate lines: `ORT_LIBRARY=libonnxruntime.so ./build/translate MODEL.onnx [SOURCE TARGET] < in > out`,
 * 16 lines per run; SOURCE and TARGET (eng_Latn fra_Latn) for NLLB, M2M100 and mBART-50 files.
 * Lines are read as `graphgen translate -i` reads them: they end at '\n' (a CRLF's '\r' dropped), a
 * UTF-8 byte order mark before the first is not text, and a line that is not UTF-8 (or holds a zero
 * byte, which would end the C string there) stops the run, naming it, after the lines before it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "translate.h"

#define BATCH 16

static int flush(gg_translator *translator, char **lines, size_t count, const char *source, const char *target) {
    char **out = NULL, *error = NULL;
    size_t at;
    gg_status status = gg_translate(translator, (const char *const *)lines, count, source ? &source : NULL,
                                    source ? 1 : 0, target ? &target : NULL, target ? 1 : 0, &out, &error);
    for (at = 0; at < count; ++at) {
        if (status == GG_OK) puts(out[at]);
        free(lines[at]);
    }
    gg_free_translations(out, count);
    if (status != GG_OK) {
        fprintf(stderr, "translate: %s\n", error);
        free(error);
    }
    return status == GG_OK;
}

/* The offset of the first byte of text[0..length) that is not well-formed UTF-8 (RFC 3629: no
 * overlong forms, surrogates or code points past U+10FFFF, as Python's decoder), or -1. */
static long utf8_error_at(const unsigned char *text, size_t length) {
    size_t at = 0;
    while (at < length) {
        unsigned char lead = text[at];
        size_t extra, i;
        unsigned char low = 0x80, high = 0xBF; /* the allowed range of the second byte */
        if (lead < 0x80) {
            ++at;
            continue;
        }
        if (lead >= 0xC2 && lead <= 0xDF) extra = 1;
        else if (lead >= 0xE0 && lead <= 0xEF) extra = 2;
        else if (lead >= 0xF0 && lead <= 0xF4) extra = 3;
        else return (long)at;
        if (lead == 0xE0) low = 0xA0;
        if (lead == 0xED) high = 0x9F;
        if (lead == 0xF0) low = 0x90;
        if (lead == 0xF4) high = 0x8F;
        for (i = 1; i <= extra; ++i) {
            unsigned char byte = at + i < length ? text[at + i] : 0;
            if (i == 1 ? (byte < low || byte > high) : (byte < 0x80 || byte > 0xBF)) return (long)at;
        }
        at += extra + 1;
    }
    return -1;
}

/* 1 when line (length bytes, its '\n' and '\r' removed) can be translated; otherwise says why. */
static int readable(const char *line, size_t length, size_t number) {
    long bad = utf8_error_at((const unsigned char *)line, length);
    if (memchr(line, 0, length) != NULL) {
        fprintf(stderr, "translate: line %zu: holds a zero byte\n", number);
        return 0;
    }
    if (bad >= 0) {
        fprintf(stderr, "translate: line %zu: not valid UTF-8 (byte 0x%02x at offset %ld)\n", number,
                (unsigned char)line[bad], bad);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv) {
    const char *library = getenv("ORT_LIBRARY"), *source = NULL, *target = NULL;
    gg_translator *translator = NULL;
    char *lines[BATCH], *line = NULL, *error = NULL;
    size_t count = 0, capacity = 0, number = 0;
    ssize_t length;
    int ok = 1;
    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: ORT_LIBRARY=libonnxruntime.so %s MODEL.onnx [SOURCE TARGET] < lines\n", argv[0]);
        return 2;
    }
    if (argc == 4) {
        source = argv[2];
        target = argv[3];
    }
    if (gg_init(library ? library : "libonnxruntime.so", &error) != GG_OK ||
        gg_open(argv[1], argc == 4, &translator, &error) != GG_OK) {
        fprintf(stderr, "translate: %s\n", error);
        free(error);
        return 1;
    }
    while (ok && (length = getline(&line, &capacity, stdin)) >= 0) {
        ++number;
        if (length > 0 && line[length - 1] == '\n') line[--length] = '\0';
        if (length > 0 && line[length - 1] == '\r') line[--length] = '\0';
        if (number == 1 && length >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
            memmove(line, line + 3, (size_t)length - 2); /* the text and its '\0' */
            length -= 3;
        }
        if (!readable(line, (size_t)length, number)) {
            if (count > 0) flush(translator, lines, count, source, target);
            count = 0;
            ok = 0;
            break;
        }
        lines[count++] = line;
        line = NULL;
        capacity = 0;
        if (count == BATCH) {
            ok = flush(translator, lines, count, source, target);
            count = 0;
        }
    }
    if (ok && count > 0) ok = flush(translator, lines, count, source, target);
    free(line);
    gg_close(translator);
    return ok ? 0 : 1;
}
