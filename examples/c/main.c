/* Translate lines: `ORT_LIBRARY=libonnxruntime.so ./build/translate MODEL.onnx [SOURCE TARGET] < in > out`,
 * 16 lines per run; SOURCE and TARGET (eng_Latn fra_Latn) for NLLB, M2M100 and mBART-50 files. */
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

int main(int argc, char **argv) {
    const char *library = getenv("ORT_LIBRARY"), *source = NULL, *target = NULL;
    gg_translator *translator = NULL;
    char *lines[BATCH], *line = NULL, *error = NULL;
    size_t count = 0, capacity = 0;
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
        if (length > 0 && line[length - 1] == '\n') line[--length] = '\0';
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
