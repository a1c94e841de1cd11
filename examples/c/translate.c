/* A graphgen text-level file through ONNX Runtime's C API (see translate.h). Valid C11 and C++11:
 * the tests build it both ways. POSIX (dlopen, pthreads); on Windows, LoadLibrary and
 * GetProcAddress take their place. */
#include "translate.h"

#include <dlfcn.h>
#include <math.h>
#include <onnxruntime_c_api.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The API version asked of the library: ONNX Runtime 1.17's, graphgen's oldest runtime. Every
 * function used here is older; a newer library serves an older version as it was. */
#define GG_ORT_API_VERSION 17

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static const OrtApi *ort; /* set once by gg_init, then only read */
static OrtEnv *env;

struct gg_translator {
    OrtSession *session;
    int languages;
    long max_positions; /* the file's graphgen.max_positions (0: not recorded), the longest max_length */
    char **codes;       /* the file's graphgen.languages: code_count strings in one allocation */
    size_t code_count;
    char **tags;        /* the file's graphgen.target_tags: tag_count strings in one allocation */
    size_t tag_count;
};

static const char *const WRONG_KIND =
    "not a text-level file with the portable tokenizer: export it with `graphgen export MODEL -o "
    "FILE` (the default, --tokenizer onnx); a --tokenizer extensions file needs "
    "onnxruntime-extensions";

static gg_status fail(char **error, gg_status status, const char *format, ...) {
    va_list args;
    int size;
    if (error == NULL) return status;
    va_start(args, format);
    size = vsnprintf(NULL, 0, format, args);
    va_end(args);
    *error = (char *)malloc((size_t)size + 1);
    if (*error == NULL) return status;
    va_start(args, format);
    vsnprintf(*error, (size_t)size + 1, format, args);
    va_end(args);
    return status;
}

/* GG_OK for no status; otherwise ONNX Runtime's message, and the status released. */
static gg_status check(OrtStatus *status, char **error) {
    gg_status result;
    if (status == NULL) return GG_OK;
    result = fail(error, GG_RUNTIME, "%s", ort->GetErrorMessage(status));
    ort->ReleaseStatus(status);
    return result;
}

/* In a function with `gg_status result` and a `done:` label that releases what was made. */
#define TRY(call)                                       \
    do {                                                \
        if ((result = check((call), error)) != GG_OK) { \
            goto done;                                  \
        }                                               \
    } while (0)

static gg_status load(const char *library, char **error) {
    struct stat info;
    void *handle;
    const OrtApiBase *(*get_api_base)(void);
    const OrtApi *api;
    OrtStatus *status;
    if (library == NULL) return fail(error, GG_NOT_FOUND, "ONNX Runtime library not found: none given");
    /* a path names a file; a bare name is looked up as the dynamic loader does */
    if (strchr(library, '/') != NULL && stat(library, &info) != 0)
        return fail(error, GG_NOT_FOUND, "ONNX Runtime library not found: %s", library);
    handle = dlopen(library, RTLD_NOW | RTLD_LOCAL); /* kept open: sessions live on it */
    if (handle == NULL)
        return fail(error, strchr(library, '/') != NULL ? GG_RUNTIME : GG_NOT_FOUND, "cannot open %s: %s", library,
                    dlerror());
    /* POSIX's way to read a function pointer out of dlsym's void * */
    *(void **)(&get_api_base) = dlsym(handle, "OrtGetApiBase");
    if (get_api_base == NULL) return fail(error, GG_RUNTIME, "%s is not ONNX Runtime (no OrtGetApiBase)", library);
    api = get_api_base()->GetApi(GG_ORT_API_VERSION);
    if (api == NULL)
        return fail(error, GG_RUNTIME, "%s is ONNX Runtime %s; 1.17 or later is needed", library,
                    get_api_base()->GetVersionString());
    /* every error comes back to the caller in a status: ONNX Runtime's log would print it twice */
    status = api->CreateEnv(ORT_LOGGING_LEVEL_FATAL, "graphgen", &env);
    if (status != NULL) {
        gg_status result = fail(error, GG_RUNTIME, "%s", api->GetErrorMessage(status));
        api->ReleaseStatus(status);
        return result;
    }
    ort = api;
    return GG_OK;
}

gg_status gg_init(const char *library, char **error) {
    gg_status result = GG_OK;
    pthread_mutex_lock(&init_lock);
    if (ort == NULL) result = load(library, error);
    pthread_mutex_unlock(&init_lock);
    return result;
}

/* Which of `names` (count `wanted`) the session takes: a bit per name. A file's optional inputs
 * (initializers with a default) are not among its inputs for the C API but among its
 * "overridable initializers", which a run feeds by name as it feeds the inputs. */
static gg_status has_inputs(OrtSession *session, const char *const *names, size_t wanted, unsigned *found,
                            char **error) {
    gg_status result = GG_OK;
    OrtAllocator *allocator = NULL;
    char *name = NULL;
    size_t inputs = 0, optional = 0, index, at;
    *found = 0;
    TRY(ort->GetAllocatorWithDefaultOptions(&allocator));
    TRY(ort->SessionGetInputCount(session, &inputs));
    TRY(ort->SessionGetOverridableInitializerCount(session, &optional));
    for (index = 0; index < inputs + optional; ++index) {
        if (index < inputs)
            TRY(ort->SessionGetInputName(session, index, allocator, &name));
        else
            TRY(ort->SessionGetOverridableInitializerName(session, index - inputs, allocator, &name));
        for (at = 0; at < wanted; ++at)
            if (strcmp(name, names[at]) == 0) *found |= 1u << at;
        TRY(ort->AllocatorFree(allocator, name));
        name = NULL;
    }
done:
    if (name != NULL) ort->ReleaseStatus(ort->AllocatorFree(allocator, name));
    return result;
}

/* The codes of graphgen.languages or the tags of graphgen.target_tags, a JSON list of strings
 * that hold no quote or backslash (codes: ASCII letters, digits, '_', '-'; tags: those and '<',
 * '>', as in >>cmn_Hans<< and <2de>): an array of `*count` pointers into one block after it, freed
 * with one free(); NULL with *count 0 for an empty list; -1 for anything else, 0 otherwise. */
static int parse_codes(const char *list, char ***codes, size_t *count) {
    size_t quotes = 0, at, length = strlen(list);
    const char *read;
    char *text, **array;
    *codes = NULL;
    *count = 0;
    for (at = 0; at < length; ++at) {
        if (list[at] == '\\') return -1;
        if (list[at] == '"') ++quotes;
    }
    if (quotes % 2 != 0) return -1;
    if (quotes == 0) { /* only "[]", with any spaces */
        for (read = list; *read == ' '; ++read) continue;
        if (*read++ != '[') return -1;
        for (; *read == ' '; ++read) continue;
        if (*read++ != ']') return -1;
        for (; *read == ' '; ++read) continue;
        return *read == '\0' ? 0 : -1;
    }
    array = (char **)malloc(quotes / 2 * sizeof(char *) + length + 1);
    if (array == NULL) return -1;
    text = (char *)(array + quotes / 2);
    read = list;
    for (; *read == ' '; ++read) continue;
    if (*read++ != '[') goto wrong;
    for (;;) {
        for (; *read == ' '; ++read) continue;
        if (*read++ != '"') goto wrong;
        array[*count] = text;
        while (*read != '"') *text++ = *read++;
        if (text == array[*count]) goto wrong; /* an empty code */
        *text++ = '\0';
        ++*count;
        for (++read; *read == ' '; ++read) continue;
        if (*read == ']') break;
        if (*read++ != ',') goto wrong;
    }
    for (++read; *read == ' '; ++read) continue;
    if (*read != '\0') goto wrong;
    *codes = array;
    return 0;
wrong:
    free(array);
    *count = 0;
    return -1;
}

/* Reads the metadata the translator keeps: graphgen.max_positions, graphgen.languages and
 * graphgen.target_tags. */
static gg_status read_metadata(const char *model, gg_translator *translator, char **error) {
    gg_status result = GG_OK;
    OrtAllocator *allocator = NULL;
    OrtModelMetadata *metadata = NULL;
    char *value = NULL;
    TRY(ort->GetAllocatorWithDefaultOptions(&allocator));
    TRY(ort->SessionGetModelMetadata(translator->session, &metadata));
    TRY(ort->ModelMetadataLookupCustomMetadataMap(metadata, allocator, "graphgen.max_positions", &value));
    if (value != NULL) {
        translator->max_positions = strtol(value, NULL, 10);
        TRY(ort->AllocatorFree(allocator, value));
        value = NULL;
    }
    TRY(ort->ModelMetadataLookupCustomMetadataMap(metadata, allocator, "graphgen.languages", &value));
    if (value != NULL) {
        if (parse_codes(value, &translator->codes, &translator->code_count) != 0) {
            result = fail(error, GG_WRONG_KIND, "%s: graphgen.languages is not a JSON list of codes", model);
            goto done;
        }
        TRY(ort->AllocatorFree(allocator, value));
        value = NULL;
    }
    TRY(ort->ModelMetadataLookupCustomMetadataMap(metadata, allocator, "graphgen.target_tags", &value));
    if (value != NULL && parse_codes(value, &translator->tags, &translator->tag_count) != 0)
        result = fail(error, GG_WRONG_KIND, "%s: graphgen.target_tags is not a JSON list of tags", model);
done:
    if (value != NULL) ort->ReleaseStatus(ort->AllocatorFree(allocator, value));
    if (metadata != NULL) ort->ReleaseModelMetadata(metadata);
    return result;
}

gg_status gg_languages(const gg_translator *translator, const char *const **codes, size_t *count, char **error) {
    if (translator == NULL || codes == NULL || count == NULL)
        return fail(error, GG_BAD_ARGUMENT, "translator, codes and count must not be NULL");
    *codes = (const char *const *)translator->codes;
    *count = translator->code_count;
    return GG_OK;
}

gg_status gg_target_tags(const gg_translator *translator, const char *const **tags, size_t *count, char **error) {
    if (translator == NULL || tags == NULL || count == NULL)
        return fail(error, GG_BAD_ARGUMENT, "translator, tags and count must not be NULL");
    *tags = (const char *const *)translator->tags;
    *count = translator->tag_count;
    return GG_OK;
}

gg_status gg_open(const char *model, int languages, gg_translator **translator, char **error) {
    static const char *const inputs[] = {"text_utf8", "source_language", "target_language"};
    gg_status result = GG_OK;
    OrtSessionOptions *options = NULL;
    OrtSession *session = NULL;
    OrtStatus *status;
    struct stat info;
    unsigned found = 0;
    *translator = NULL;
    if (ort == NULL) return fail(error, GG_BAD_ARGUMENT, "call gg_init before gg_open");
    if (model == NULL || stat(model, &info) != 0)
        return fail(error, GG_NOT_FOUND, "model file not found: %s", model ? model : "(none given)");
    TRY(ort->CreateSessionOptions(&options));
    /* As graphgen.Translator: ONNX Runtime's replay of a run's allocations would hold a batch's
     * search memory twice (README, Memory). */
    TRY(ort->DisableMemPattern(options));
    status = ort->CreateSession(env, model, options, &session);
    if (status != NULL) {
        const char *message = ort->GetErrorMessage(status);
        /* the extensions' ops are in the ai.onnx.contrib domain, which this runtime does not know */
        result = strstr(message, "ai.onnx.contrib") != NULL ? fail(error, GG_WRONG_KIND, "%s: %s", model, WRONG_KIND)
                                                             : fail(error, GG_RUNTIME, "%s", message);
        ort->ReleaseStatus(status);
        goto done;
    }
    if ((result = has_inputs(session, inputs, 3, &found, error)) != GG_OK) goto done;
    if (!(found & 1u)) {
        result = fail(error, GG_WRONG_KIND, "%s: %s", model, WRONG_KIND);
        goto done;
    }
    if (languages && found != 7u) {
        result = fail(error, GG_BAD_ARGUMENT,
                      "%s has no source_language and target_language inputs (a file of a model "
                      "with one language pair): open it without languages",
                      model);
        goto done;
    }
    *translator = (gg_translator *)malloc(sizeof(gg_translator));
    if (*translator == NULL) {
        result = fail(error, GG_NO_MEMORY, "out of memory");
        goto done;
    }
    (*translator)->session = session;
    (*translator)->languages = languages != 0;
    (*translator)->max_positions = 0;
    (*translator)->codes = NULL;
    (*translator)->code_count = 0;
    (*translator)->tags = NULL;
    (*translator)->tag_count = 0;
    session = NULL;
    if ((result = read_metadata(model, *translator, error)) != GG_OK) {
        gg_close(*translator);
        *translator = NULL;
    }
done:
    if (session != NULL) ort->ReleaseSession(session);
    if (options != NULL) ort->ReleaseSessionOptions(options);
    return result;
}

static gg_status codes_argument(const char *what, const char *const *codes, size_t codes_count, size_t count,
                                char **error) {
    size_t at;
    if (codes == NULL || (codes_count != 1 && codes_count != count))
        return fail(error, GG_BAD_ARGUMENT, "give one %s language code, or one per text (%zu); got %zu", what, count,
                    codes == NULL ? (size_t)0 : codes_count);
    for (at = 0; at < codes_count; ++at)
        if (codes[at] == NULL) return fail(error, GG_BAD_ARGUMENT, "%s language %zu is NULL", what, at);
    return GG_OK;
}

/* A string tensor [count] holding `codes`: what the file's language inputs take. */
static gg_status string_tensor(const char *const *codes, size_t count, OrtValue **value, char **error) {
    gg_status result = GG_OK;
    OrtAllocator *allocator = NULL;
    int64_t shape[1];
    shape[0] = (int64_t)count;
    TRY(ort->GetAllocatorWithDefaultOptions(&allocator));
    TRY(ort->CreateTensorAsOrtValue(allocator, shape, 1, ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING, value));
    TRY(ort->FillStringTensor(*value, codes, count));
done:
    return result;
}

gg_settings gg_default_settings(void) {
    gg_settings settings;
    settings.num_beams = settings.num_return_sequences = settings.max_length = settings.min_length = -1;
    settings.length_penalty = settings.repetition_penalty = (float)NAN;
    return settings;
}

/* The rules of Python's graphgen.contract.generation_settings among the values given (the file
 * checks them against its defaults itself): a value that would run wrongly or fail deep in the
 * search is named here. */
static gg_status check_settings(const gg_translator *translator, const gg_settings *settings, char **error) {
    if (settings->num_beams == 0) return fail(error, GG_BAD_ARGUMENT, "num_beams must be at least 1, got 0");
    if (settings->num_return_sequences == 0)
        return fail(error, GG_BAD_ARGUMENT, "num_return_sequences must be at least 1, got 0");
    if (settings->num_beams > 0 && settings->num_return_sequences > settings->num_beams)
        return fail(error, GG_BAD_ARGUMENT, "num_return_sequences must be between 1 and num_beams (%d), got %d",
                    settings->num_beams, settings->num_return_sequences);
    if (settings->max_length == 0 || settings->max_length == 1)
        return fail(error, GG_BAD_ARGUMENT, "max_length must be at least 2, got %d", settings->max_length);
    if (translator->max_positions > 0 && settings->max_length > translator->max_positions)
        return fail(error, GG_BAD_ARGUMENT, "max_length %d exceeds the model's %ld positions", settings->max_length,
                    translator->max_positions);
    if (settings->max_length > 0 && settings->min_length > settings->max_length)
        return fail(error, GG_BAD_ARGUMENT, "min_length must be between 0 and max_length (%d), got %d",
                    settings->max_length, settings->min_length);
    if (isinf(settings->length_penalty))
        return fail(error, GG_BAD_ARGUMENT, "length_penalty must be finite, got %f", (double)settings->length_penalty);
    if (isinf(settings->repetition_penalty) || settings->repetition_penalty <= 0.0f)
        return fail(error, GG_BAD_ARGUMENT, "repetition_penalty must be positive and finite, got %f",
                    (double)settings->repetition_penalty);
    return GG_OK;
}

gg_status gg_translate(gg_translator *translator, const char *const *texts, size_t count,
                       const char *const *sources, size_t source_count, const char *const *targets,
                       size_t target_count, char ***translations, char **error) {
    return gg_translate_settings(translator, texts, count, sources, source_count, targets, target_count, NULL,
                                 translations, error);
}

/* The inputs the run feeds, at most: the texts, two languages, six settings. */
#define MAX_INPUTS 9

gg_status gg_translate_settings(gg_translator *translator, const char *const *texts, size_t count,
                                const char *const *sources, size_t source_count, const char *const *targets,
                                size_t target_count, const gg_settings *settings, char ***translations,
                                char **error) {
    static const char *const output_names[] = {"translation_utf8", "translation_lengths"};
    static const char *const int_names[] = {"num_beams", "num_return_sequences", "max_length", "min_length"};
    static const char *const float_names[] = {"length_penalty", "repetition_penalty"};
    const char *input_names[MAX_INPUTS] = {"text_utf8", "source_language", "target_language"};
    int32_t ints[4];
    float floats[2];
    int64_t one = 1;
    size_t fed;
    gg_status result = GG_OK;
    OrtMemoryInfo *memory = NULL;
    OrtValue *inputs[MAX_INPUTS] = {NULL};
    OrtValue *outputs[2] = {NULL, NULL};
    OrtTensorTypeAndShapeInfo *info = NULL;
    uint8_t *bytes = NULL;
    const uint8_t *utf8;
    const int64_t *lengths;
    int64_t shape[2], dims[3];
    size_t width = 0, row, at, dims_count = 0, returned, size, length;
    char **out = NULL;

    if (translations == NULL) return fail(error, GG_BAD_ARGUMENT, "translations is NULL");
    *translations = NULL;
    if (translator == NULL) return fail(error, GG_BAD_ARGUMENT, "translator is NULL");
    if (settings != NULL && (result = check_settings(translator, settings, error)) != GG_OK) return result;
    if (translator->languages) {
        if ((result = codes_argument("source", sources, source_count, count, error)) != GG_OK) return result;
        if ((result = codes_argument("target", targets, target_count, count, error)) != GG_OK) return result;
    } else if (sources != NULL || targets != NULL || source_count != 0 || target_count != 0) {
        return fail(error, GG_BAD_ARGUMENT, "this translator was opened without languages: open it with languages "
                                            "to choose them per call");
    }
    if (count == 0) return GG_OK;
    if (texts == NULL) return fail(error, GG_BAD_ARGUMENT, "texts is NULL");
    for (row = 0; row < count; ++row) {
        if (texts[row] == NULL) return fail(error, GG_BAD_ARGUMENT, "text %zu is NULL", row);
        length = strlen(texts[row]);
        if (length > width) width = length;
    }
    if (width == 0) width = 1; /* ONNX Runtime refuses an empty buffer: one zero byte of padding */
    bytes = (uint8_t *)calloc(count, width);
    out = (char **)calloc(count, sizeof(char *));
    if (bytes == NULL || out == NULL) {
        result = fail(error, GG_NO_MEMORY, "out of memory");
        goto done;
    }
    for (row = 0; row < count; ++row) memcpy(bytes + row * width, texts[row], strlen(texts[row]));
    shape[0] = (int64_t)count;
    shape[1] = (int64_t)width;
    TRY(ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &memory));
    TRY(ort->CreateTensorWithDataAsOrtValue(memory, bytes, count * width, shape, 2,
                                            ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, &inputs[0]));
    fed = 1;
    if (translator->languages) {
        if ((result = string_tensor(sources, source_count, &inputs[1], error)) != GG_OK) goto done;
        if ((result = string_tensor(targets, target_count, &inputs[2], error)) != GG_OK) goto done;
        fed = 3;
    }
    if (settings != NULL) {
        ints[0] = settings->num_beams;
        ints[1] = settings->num_return_sequences;
        ints[2] = settings->max_length;
        ints[3] = settings->min_length;
        floats[0] = settings->length_penalty;
        floats[1] = settings->repetition_penalty;
        for (at = 0; at < 4; ++at) {
            if (ints[at] < 0) continue;
            input_names[fed] = int_names[at];
            TRY(ort->CreateTensorWithDataAsOrtValue(memory, &ints[at], sizeof(int32_t), &one, 1,
                                                    ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, &inputs[fed]));
            ++fed;
        }
        for (at = 0; at < 2; ++at) {
            if (isnan(floats[at])) continue;
            input_names[fed] = float_names[at];
            TRY(ort->CreateTensorWithDataAsOrtValue(memory, &floats[at], sizeof(float), &one, 1,
                                                    ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &inputs[fed]));
            ++fed;
        }
    }
    /* outputs allocated by ONNX Runtime: their shapes depend on the run */
    TRY(ort->Run(translator->session, NULL, input_names, (const OrtValue *const *)inputs, fed, output_names, 2,
                 outputs));
    TRY(ort->GetTensorTypeAndShape(outputs[0], &info));
    TRY(ort->GetDimensionsCount(info, &dims_count));
    if (dims_count != 3) {
        result = fail(error, GG_WRONG_KIND, "translation_utf8 has %zu dimensions, not 3", dims_count);
        goto done;
    }
    TRY(ort->GetDimensions(info, dims, 3)); /* [batch, num_return_sequences, bytes] */
    if (dims[0] != (int64_t)count) {
        result = fail(error, GG_RUNTIME, "%lld translations for %zu texts", (long long)dims[0], count);
        goto done;
    }
    returned = (size_t)dims[1];
    size = (size_t)dims[2];
    TRY(ort->GetTensorMutableData(outputs[0], (void **)&utf8));
    TRY(ort->GetTensorMutableData(outputs[1], (void **)&lengths));
    for (row = 0; row < count; ++row) {
        at = row * returned; /* the best hypothesis of each text */
        if (lengths[at] < 0 || (size_t)lengths[at] > size) {
            result = fail(error, GG_RUNTIME, "translation %zu: length %lld outside its %zu bytes", row,
                          (long long)lengths[at], size);
            goto done;
        }
        length = (size_t)lengths[at];
        out[row] = (char *)malloc(length + 1);
        if (out[row] == NULL) {
            result = fail(error, GG_NO_MEMORY, "out of memory");
            goto done;
        }
        if (length > 0) memcpy(out[row], utf8 + at * size, length);
        out[row][length] = '\0';
    }
    *translations = out;
    out = NULL;
done:
    if (out != NULL) gg_free_translations(out, count);
    if (info != NULL) ort->ReleaseTensorTypeAndShapeInfo(info);
    for (at = 0; at < 2; ++at)
        if (outputs[at] != NULL) ort->ReleaseValue(outputs[at]);
    for (at = 0; at < MAX_INPUTS; ++at)
        if (inputs[at] != NULL) ort->ReleaseValue(inputs[at]);
    if (memory != NULL) ort->ReleaseMemoryInfo(memory);
    free(bytes);
    return result;
}

void gg_free_translations(char **translations, size_t count) {
    size_t at;
    if (translations == NULL) return;
    for (at = 0; at < count; ++at) free(translations[at]);
    free(translations);
}

void gg_close(gg_translator *translator) {
    if (translator == NULL) return;
    ort->ReleaseSession(translator->session);
    free(translator->codes);
    free(translator->tags);
    free(translator);
}
