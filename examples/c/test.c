/* The demo test set and the NLLB fixture through the portable file from C (and, built as C++, from
 * C++): the same strings as graphgen's Python path. ORT_LIBRARY names libonnxruntime.so and
 * GRAPHGEN_FIXTURES the folder examples/fixtures.py wrote (`make examples` sets both). Exits 1 at
 * the first difference, naming it. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "translate.h"

typedef struct {
    char **items;
    size_t count;
} lines;

static const char *fixtures;
static int passed;

static void die(const char *what, const char *detail) {
    fprintf(stderr, "FAIL %s: %s\n", what, detail ? detail : "");
    exit(1);
}

static char *fixture(const char *name) {
    size_t size = strlen(fixtures) + strlen(name) + 2;
    char *path = (char *)malloc(size);
    if (path == NULL) die("fixture", "out of memory");
    snprintf(path, size, "%s/%s", fixtures, name);
    return path;
}

/* A fixture's lines, without the last newline (as the other examples read them). */
static lines read_lines(const char *name) {
    char *path = fixture(name), *data, *at, *end;
    FILE *file = fopen(path, "rb");
    long size;
    lines result = {NULL, 0};
    if (file == NULL) die("cannot open", path);
    fseek(file, 0, SEEK_END);
    size = ftell(file);
    fseek(file, 0, SEEK_SET);
    data = (char *)malloc((size_t)size + 1);
    if (data == NULL || fread(data, 1, (size_t)size, file) != (size_t)size) die("cannot read", path);
    fclose(file);
    free(path);
    data[size] = '\0';
    if (size > 0 && data[size - 1] == '\n') data[size - 1] = '\0';
    result.items = (char **)malloc(sizeof(char *) * ((size_t)size + 1));
    if (result.items == NULL) die("lines", "out of memory");
    for (at = data;; at = end + 1) {
        end = strchr(at, '\n');
        result.items[result.count++] = at;
        if (end == NULL) break;
        *end = '\0';
    }
    return result;
}

static void free_lines(lines *all) {
    if (all->count > 0) free(all->items[0]); /* the file's one buffer */
    free(all->items);
}

static gg_translator *open_file(const char *name, int languages) {
    char *path = fixture(name), *error = NULL;
    gg_translator *translator = NULL;
    if (gg_init(getenv("ORT_LIBRARY"), &error) != GG_OK) die("gg_init", error);
    if (gg_open(path, languages, &translator, &error) != GG_OK) die(path, error);
    free(path);
    return translator;
}

static char **translate(gg_translator *translator, const char *const *texts, size_t count, const char *source,
                        const char *const *targets, size_t target_count) {
    char **out = NULL, *error = NULL;
    gg_status status = gg_translate(translator, texts, count, source ? &source : NULL, source ? 1 : 0, targets,
                                    target_count, &out, &error);
    if (status != GG_OK) die("gg_translate", error);
    return out;
}

/* `got` against `want`, row by row; rows are named from `first` on. */
static void expect_equal(const char *what, char **got, const char *const *want, size_t count, size_t first) {
    size_t row;
    char detail[512];
    for (row = 0; row < count; ++row) {
        if (strcmp(got[row], want[row]) != 0) {
            snprintf(detail, sizeof detail, "row %zu is \"%s\", want \"%s\"", first + row, got[row], want[row]);
            die(what, detail);
        }
    }
}

/* A call that must fail with `status` and a message containing `part` (read through `error` once
 * the call has returned; freed and reset). */
static void expect_error(const char *what, gg_status got, gg_status status, char **error, const char *part) {
    char detail[1024];
    if (got != status || *error == NULL || strstr(*error, part) == NULL) {
        snprintf(detail, sizeof detail, "status %d (want %d), message \"%s\" (want it to contain \"%s\")", (int)got,
                 (int)status, *error ? *error : "", part);
        die(what, detail);
    }
    free(*error);
    *error = NULL;
}

static void pass(const char *name) {
    printf("ok   %s\n", name);
    ++passed;
}

static void demo_one_at_a_time_and_in_batches_of_16(void) {
    gg_translator *translator = open_file("demo-en-zh.onnx", 0);
    lines sources = read_lines("sources.txt"), expected = read_lines("expected.txt");
    size_t start, count;
    char **got;
    if (sources.count != 300 || expected.count != 300) die("fixtures", "not 300 sources and translations");
    for (start = 0; start < sources.count; ++start) {
        got = translate(translator, (const char *const *)sources.items + start, 1, NULL, NULL, 0);
        expect_equal("one at a time", got, (const char *const *)expected.items + start, 1, start);
        gg_free_translations(got, 1);
    }
    for (start = 0; start < sources.count; start += 16) {
        count = sources.count - start < 16 ? sources.count - start : 16;
        got = translate(translator, (const char *const *)sources.items + start, count, NULL, NULL, 0);
        expect_equal("batches of 16", got, (const char *const *)expected.items + start, count, start);
        gg_free_translations(got, count);
    }
    free_lines(&sources);
    free_lines(&expected);
    gg_close(translator);
    pass("demo sentences one at a time and in batches of 16");
}

typedef struct {
    gg_translator *translator;
    lines *sources, *expected;
    size_t first, step;
    int ok;
} share;

/* Every `step`-th batch of 8 from `first` on, through the shared translator. */
static void *translate_share(void *argument) {
    share *work = (share *)argument;
    size_t start, count, row;
    char **got, *error = NULL;
    for (start = work->first * 8; start < work->sources->count; start += work->step * 8) {
        count = work->sources->count - start < 8 ? work->sources->count - start : 8;
        if (gg_translate(work->translator, (const char *const *)work->sources->items + start, count, NULL, 0, NULL, 0,
                         &got, &error) != GG_OK) {
            fprintf(stderr, "thread %zu: %s\n", work->first, error);
            free(error);
            return NULL;
        }
        for (row = 0; row < count; ++row)
            if (strcmp(got[row], work->expected->items[start + row]) != 0) {
                fprintf(stderr, "thread %zu: row %zu differs\n", work->first, start + row);
                gg_free_translations(got, count);
                return NULL;
            }
        gg_free_translations(got, count);
    }
    work->ok = 1;
    return NULL;
}

static void one_translator_from_four_threads(void) {
    gg_translator *translator = open_file("demo-en-zh.onnx", 0);
    lines sources = read_lines("sources.txt"), expected = read_lines("expected.txt");
    pthread_t threads[4];
    share work[4];
    size_t at;
    for (at = 0; at < 4; ++at) {
        work[at].translator = translator;
        work[at].sources = &sources;
        work[at].expected = &expected;
        work[at].first = at;
        work[at].step = 4;
        work[at].ok = 0;
        if (pthread_create(&threads[at], NULL, translate_share, &work[at]) != 0) die("pthread_create", NULL);
    }
    for (at = 0; at < 4; ++at) pthread_join(threads[at], NULL);
    for (at = 0; at < 4; ++at)
        if (!work[at].ok) die("four threads", "a thread failed (above)");
    free_lines(&sources);
    free_lines(&expected);
    gg_close(translator);
    pass("one translator from four threads");
}

static void nllb_languages_per_call_and_per_text(void) {
    gg_translator *translator = open_file("nllb.onnx", 1); /* the file as exported: C feeds its optional inputs */
    lines rows = read_lines("languages.tsv");
    const char *columns[72][4];
    const char *texts[24], *want[24], *targets[8];
    const char *unknown[1] = {"xx_Nope"}, *hello[1] = {"Hello."}, *source = "eng_Latn";
    char **got, *error = NULL, *field;
    size_t row, column, start;
    if (rows.count != 72) die("languages.tsv", "not 72 rows");
    for (row = 0; row < 72; ++row) {
        field = rows.items[row];
        for (column = 0; column < 4; ++column) {
            columns[row][column] = field;
            field = strchr(field, '\t');
            if (field == NULL && column < 3) die("languages.tsv", "a row without 4 columns");
            if (field != NULL) *field++ = '\0';
        }
    }
    for (start = 0; start < 72; start += 24) {
        for (row = 0; row < 24; ++row) {
            texts[row] = columns[start + row][2];
            want[row] = columns[start + row][3];
        }
        got = translate(translator, texts, 24, columns[start][0], &columns[start][1], 1);
        expect_equal(columns[start][1], got, want, 24, start);
        gg_free_translations(got, 24);
    }
    for (row = 0; row < 8; ++row) {
        texts[row] = columns[(row % 3) * 24 + row][2];
        targets[row] = columns[(row % 3) * 24 + row][1];
        want[row] = columns[(row % 3) * 24 + row][3];
    }
    got = translate(translator, texts, 8, "eng_Latn", targets, 8);
    expect_equal("a target per text", got, want, 8, 0);
    gg_free_translations(got, 8);
    expect_error("an unknown code", gg_translate(translator, hello, 1, &source, 1, unknown, 1, &got, &error),
                 GG_RUNTIME, &error, "unknown target_language");
    expect_error("two targets for three texts",
                 gg_translate(translator, texts, 3, &source, 1, targets, 2, &got, &error), GG_BAD_ARGUMENT, &error,
                 "one per text");
    expect_error("no languages", gg_translate(translator, texts, 3, NULL, 0, NULL, 0, &got, &error),
                 GG_BAD_ARGUMENT, &error, "source language code");
    free_lines(&rows);
    gg_close(translator);
    pass("NLLB languages per call and per text");
}

static void long_source_empty_batch_and_wrong_files(void) {
    gg_translator *translator = open_file("demo-en-zh.onnx", 0), *cutting, *other = NULL;
    lines long_text = read_lines("long.txt"), empty = read_lines("empty.txt");
    const char *blank[1] = {""}, *code = "eng_Latn";
    char **got = NULL, *error = NULL, *path;
    expect_error("a long source",
                 gg_translate(translator, (const char *const *)long_text.items, 1, NULL, 0, NULL, 0, &got, &error),
                 GG_RUNTIME, &error, "longer than the model's limit of 512 tokens");
    cutting = open_file("demo-en-zh-truncate.onnx", 0);
    got = translate(cutting, (const char *const *)long_text.items, 1, NULL, NULL, 0);
    expect_equal("truncated", got, (const char *const *)long_text.items + 1, 1, 0);
    gg_free_translations(got, 1);
    gg_close(cutting);
    if (gg_translate(translator, NULL, 0, NULL, 0, NULL, 0, &got, &error) != GG_OK || got != NULL)
        die("an empty batch", error);
    got = translate(translator, blank, 1, NULL, NULL, 0);
    expect_equal("an empty text", got, (const char *const *)empty.items, 1, 0);
    gg_free_translations(got, 1);
    expect_error("languages for a one-pair file",
                 gg_translate(translator, blank, 1, &code, 1, &code, 1, &got, &error), GG_BAD_ARGUMENT, &error,
                 "opened without languages");
    path = fixture("missing.onnx");
    expect_error("a missing file", gg_open(path, 0, &other, &error), GG_NOT_FOUND, &error, "not found");
    free(path);
    path = fixture("demo-en-zh-extensions.onnx");
    expect_error("the extensions file", gg_open(path, 0, &other, &error), GG_WRONG_KIND, &error, "--tokenizer onnx");
    free(path);
    path = fixture("demo-en-zh.onnx");
    expect_error("languages of a one-pair file", gg_open(path, 1, &other, &error), GG_BAD_ARGUMENT, &error,
                 "open it without languages");
    free(path);
    if (other != NULL) die("a failed open", "left a translator");
    free_lines(&long_text);
    free_lines(&empty);
    gg_close(translator);
    pass("long source, empty batch and wrong files");
}

/* Settings chosen per call: the exported file's optional inputs (fed as they are) and a
 * `graphgen bake --keep num_beams,max_length` copy's required ones give Python's strings. */
static void settings_per_call(void) {
    static const char *const names[] = {"demo-en-zh.onnx", "demo-en-zh-settings.onnx"};
    lines sources = read_lines("sources.txt"), want = read_lines("expected-settings.txt");
    gg_settings settings = gg_default_settings();
    gg_translator *translator;
    char **out = NULL, *error = NULL;
    size_t at;
    settings.num_beams = 2;
    settings.max_length = 8;
    for (at = 0; at < 2; ++at) {
        translator = open_file(names[at], 0);
        if (gg_translate_settings(translator, (const char *const *)sources.items, 16, NULL, 0, NULL, 0, &settings, &out,
                                  &error) != GG_OK)
            die(names[at], error);
        expect_equal(names[at], out, (const char *const *)want.items, 16, 0);
        gg_free_translations(out, 16);
        if (at == 1) /* the kept inputs are required: ONNX Runtime names the one left out */
            expect_error("a kept setting left out",
                         gg_translate(translator, (const char *const *)sources.items, 1, NULL, 0, NULL, 0, &out, &error),
                         GG_RUNTIME, &error, "max_length");
        gg_close(translator);
    }
    free_lines(&sources);
    free_lines(&want);
    pass("settings per call");
}

/* The codes come from the file's metadata: the list Python reads (nllb-codes.txt), NLLB's 202;
 * none for a Marian file. */
static void languages_from_the_metadata(void) {
    gg_translator *nllb = open_file("nllb.onnx", 0), *demo = open_file("demo-en-zh.onnx", 0);
    lines want = read_lines("nllb-codes.txt");
    const char *const *codes = NULL;
    size_t count = 0;
    char *error = NULL, detail[64];
    if (gg_languages(nllb, &codes, &count, &error) != GG_OK) die("gg_languages", error);
    if (want.count != 202 || count != want.count) {
        snprintf(detail, sizeof detail, "%zu codes, want %zu (202)", count, want.count);
        die("nllb.onnx codes", detail);
    }
    expect_equal("nllb.onnx codes", (char **)codes, (const char *const *)want.items, count, 0);
    if (gg_languages(demo, &codes, &count, &error) != GG_OK || count != 0 || codes != NULL)
        die("a Marian file", "lists codes");
    expect_error("NULL arguments", gg_languages(demo, NULL, &count, &error), GG_BAD_ARGUMENT, &error, "NULL");
    free_lines(&want);
    gg_close(nllb);
    gg_close(demo);
    pass("languages from the metadata");
}

/* The target tags come from the file's metadata: the demo file's two (HF's
 * MarianTokenizer.supported_language_codes), in id order; none for an NLLB file. */
static void target_tags_from_the_metadata(void) {
    static const char *const want[] = {">>cmn_Hans<<", ">>cmn_Hant<<"};
    gg_translator *nllb = open_file("nllb.onnx", 0), *demo = open_file("demo-en-zh.onnx", 0);
    const char *const *tags = NULL;
    size_t count = 0;
    char *error = NULL, detail[64];
    if (gg_target_tags(demo, &tags, &count, &error) != GG_OK) die("gg_target_tags", error);
    if (count != 2) {
        snprintf(detail, sizeof detail, "%zu tags, want 2", count);
        die("demo-en-zh.onnx tags", detail);
    }
    expect_equal("demo-en-zh.onnx tags", (char **)tags, want, count, 0);
    if (gg_target_tags(nllb, &tags, &count, &error) != GG_OK || count != 0 || tags != NULL)
        die("an NLLB file", "lists target tags");
    expect_error("NULL arguments", gg_target_tags(demo, NULL, &count, &error), GG_BAD_ARGUMENT, &error, "NULL");
    gg_close(nllb);
    gg_close(demo);
    pass("target tags from the metadata");
}

static gg_settings with(int num_beams, int num_return_sequences, int max_length, int min_length, float length_penalty,
                        float repetition_penalty) {
    gg_settings settings;
    settings.num_beams = num_beams;
    settings.num_return_sequences = num_return_sequences;
    settings.max_length = max_length;
    settings.min_length = min_length;
    settings.length_penalty = length_penalty;
    settings.repetition_penalty = repetition_penalty;
    return settings;
}

/* Values Python's Translator refuses are refused before running, naming the setting; a negative
 * length_penalty (NAN, not a negative value, keeps the default) gives Python's strings. */
static void settings_checked_and_negative_length_penalty(void) {
    const float keep = (float)NAN, infinite = (float)INFINITY;
    struct {
        gg_settings settings;
        const char *part; /* of the message */
    } wrong[] = {
        {with(0, -1, -1, -1, keep, keep), "num_beams must be at least 1, got 0"},
        {with(-1, 0, -1, -1, keep, keep), "num_return_sequences must be at least 1, got 0"},
        {with(-1, -1, 1, -1, keep, keep), "max_length must be at least 2, got 1"},
        {with(-1, -1, 0, -1, keep, keep), "max_length must be at least 2, got 0"},
        {with(-1, -1, 513, -1, keep, keep), "max_length 513 exceeds the model's 512 positions"},
        {with(2, 3, -1, -1, keep, keep), "num_return_sequences must be between 1 and num_beams (2), got 3"},
        {with(-1, -1, 8, 9, keep, keep), "min_length must be between 0 and max_length (8), got 9"},
        {with(-1, -1, -1, -1, infinite, keep), "length_penalty must be finite"},
        {with(-1, -1, -1, -1, keep, 0.0f), "repetition_penalty must be positive"},
    };
    gg_translator *translator = open_file("demo-en-zh.onnx", 0);
    lines sources = read_lines("sources.txt"), want = read_lines("expected-length-penalty.txt");
    const char *const *texts = (const char *const *)sources.items;
    gg_settings settings;
    char **out = NULL, **usual = NULL, *error = NULL;
    size_t row, at, differ = 0;
    for (at = 0; at < sizeof wrong / sizeof wrong[0]; ++at) {
        expect_error(wrong[at].part,
                     gg_translate_settings(translator, texts, 1, NULL, 0, NULL, 0, &wrong[at].settings, &out, &error),
                     GG_BAD_ARGUMENT, &error, wrong[at].part);
        if (out != NULL) die(wrong[at].part, "returned translations");
    }
    /* 6 beams with and without length_penalty -3: Python's strings, not the same as the default's */
    settings = gg_default_settings();
    settings.num_beams = 6;
    if (gg_translate_settings(translator, texts, 16, NULL, 0, NULL, 0, &settings, &usual, &error) != GG_OK)
        die("6 beams", error);
    settings.length_penalty = -3.0f;
    if (gg_translate_settings(translator, texts, 16, NULL, 0, NULL, 0, &settings, &out, &error) != GG_OK)
        die("length_penalty -3", error);
    expect_equal("length_penalty -3", out, (const char *const *)want.items, 16, 0);
    for (row = 0; row < 16; ++row) differ += strcmp(out[row], usual[row]) != 0;
    if (differ == 0) die("length_penalty -3", "gave the default's strings (the setting was not fed)");
    gg_free_translations(out, 16);
    gg_free_translations(usual, 16);
    free_lines(&sources);
    free_lines(&want);
    gg_close(translator);
    pass("settings checked; a negative length_penalty");
}

int main(void) {
    char *path, *error = NULL;
    fixtures = getenv("GRAPHGEN_FIXTURES");
    if (fixtures == NULL || getenv("ORT_LIBRARY") == NULL) die("environment", "set GRAPHGEN_FIXTURES and ORT_LIBRARY");
    path = fixture("no-such-libonnxruntime.so");
    expect_error("a missing library", gg_init(path, &error), GG_NOT_FOUND, &error, "library not found");
    free(path);
    expect_error("a name the loader does not find", gg_init("libno-such-onnxruntime.so", &error), GG_NOT_FOUND, &error,
                 "cannot open libno-such-onnxruntime.so");
    pass("a missing library");
    demo_one_at_a_time_and_in_batches_of_16();
    one_translator_from_four_threads();
    nllb_languages_per_call_and_per_text();
    long_source_empty_batch_and_wrong_files();
    settings_per_call();
    languages_from_the_metadata();
    target_tags_from_the_metadata();
    settings_checked_and_negative_length_penalty();
    printf("%d passed\n", passed);
    return 0;
}
