/* Translate with a graphgen text-level file through ONNX Runtime's C API: strings in, strings out,
 * one run. C and C++ (the header and translate.c compile as either).
 *
 * ONNX Runtime is a shared library opened at run time (gg_init), as the Go and Rust examples do;
 * nothing else is needed: the file's tokenizer is built from standard ONNX ops (graphgen export's
 * default, --tokenizer onnx). Texts go in as UTF-8 bytes (the file's text_utf8 input, uint8
 * [batch, bytes], zero-padded), which a C string already is; translations come back as bytes
 * (translation_utf8, translation_lengths). */
#ifndef GRAPHGEN_TRANSLATE_H
#define GRAPHGEN_TRANSLATE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a call returns: GG_OK, or why not (with a message, see below). */
typedef enum {
    GG_OK = 0,
    GG_NOT_FOUND,    /* the ONNX Runtime library or the model file does not exist */
    GG_WRONG_KIND,   /* not a text-level file with the portable tokenizer */
    GG_BAD_ARGUMENT, /* a call the translator cannot honour (the message says which) */
    GG_RUNTIME,      /* ONNX Runtime refused: its message (a source over the model's limit, an unknown language) */
    GG_NO_MEMORY
} gg_status;

typedef struct gg_translator gg_translator;

/* Every call takes `char **error`: on failure, where it is not NULL, it receives a message the
 * caller frees with free(); on success it is left as it is. */

/* Opens ONNX Runtime from `library` (libonnxruntime.so, e.g. a release archive's or the onnxruntime
 * Python wheel's, 1.17 or later) once per process; later calls reuse the first load. A path (with
 * a '/': "./libonnxruntime.so") names a file; a bare name is searched for as the dynamic loader
 * searches (LD_LIBRARY_PATH, the system's folders). */
gg_status gg_init(const char *library, char **error);

/* Loads `model`. With `languages` nonzero, source_language and target_language are inputs of every
 * run (NLLB, M2M100 and mBART-50 files: the C API feeds a file's optional inputs, so the file
 * works as exported). A translator may be used from several threads at once. */
gg_status gg_open(const char *model, int languages, gg_translator **translator, char **error);

/* The best translation of each of `count` NUL-terminated UTF-8 texts, in order: `*translations`
 * receives `count` NUL-terminated strings, freed with gg_free_translations (count 0 gives NULL).
 * `sources`/`targets`: language codes as the model's tokenizer spells them (eng_Latn, fr_XX),
 * one for every text (`*_count` 1) or one per text (`count`); NULL and 0 for a translator
 * opened without languages. */
gg_status gg_translate(gg_translator *translator, const char *const *texts, size_t count,
                       const char *const *sources, size_t source_count, const char *const *targets,
                       size_t target_count, char ***translations, char **error);

/* Generation settings for one call. An int below 0 and a float NAN keep the file's default (the
 * checkpoint's generation config): start from gg_default_settings(). A value Python's
 * graphgen.Translator refuses is GG_BAD_ARGUMENT, naming the setting, before running: num_beams or
 * num_return_sequences 0, more sequences than beams, max_length 0, 1 or past the model's positions
 * (the file's graphgen.max_positions), min_length over max_length, an infinite float, a
 * repetition_penalty not above 0. The C API feeds a file's optional inputs, so the exported file
 * takes them as it is (a `graphgen bake --keep` copy needs each kept one on every call). */
typedef struct {
    int num_beams;            /* beam width; 1 is greedy search */
    int num_return_sequences; /* hypotheses per text (gg_translate returns the best) */
    int max_length;           /* longest output in tokens, decoder start included */
    int min_length;           /* shortest output in tokens, decoder start included */
    float length_penalty;     /* exponent of the length normalisation of beam scores (below 0: shorter) */
    float repetition_penalty; /* 1.0 is off */
} gg_settings;

gg_settings gg_default_settings(void);

/* gg_translate with `settings` (NULL: the file's defaults). */
gg_status gg_translate_settings(gg_translator *translator, const char *const *texts, size_t count,
                                const char *const *sources, size_t source_count, const char *const *targets,
                                size_t target_count, const gg_settings *settings, char ***translations,
                                char **error);

void gg_free_translations(char **translations, size_t count);

/* The language codes the file knows, from its graphgen.languages metadata (NLLB, M2M100 and
 * mBART-50 files; none for the others): `*codes` receives `*count` NUL-terminated codes, owned by
 * the translator (valid until gg_close), for a language picker or to check a code before a call. */
gg_status gg_languages(const gg_translator *translator, const char *const **codes, size_t *count, char **error);

/* The tokens that, typed at the start of a text, choose the target language, in id order, from the
 * file's graphgen.target_tags metadata (opus-mt's >>cmn_Hans<<, MADLAD-400's <2de>; none for files
 * without such tokens: NLLB, mBART, T5): `*tags` receives `*count` NUL-terminated tags (NULL and 0
 * for none), owned by the translator (valid until gg_close), for a language picker. */
gg_status gg_target_tags(const gg_translator *translator, const char *const **tags, size_t *count, char **error);

void gg_close(gg_translator *translator);

#ifdef __cplusplus
}
#endif

#endif
