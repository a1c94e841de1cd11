// Text in, text out from JavaScript with a graphgen file: one session.run, nothing but ONNX Runtime.
//
// The same code runs on onnxruntime-node (native), onnxruntime-web (WebAssembly, in Node or a
// browser page): pass either module as `ort`. The file's tokenizer is built from standard ONNX ops
// (graphgen export's default, `--tokenizer onnx`), so no onnxruntime-extensions library is needed.
// Texts go in as UTF-8 bytes (`text_utf8`, uint8 [batch, bytes], zero-padded) and translations come
// back as bytes too (`translation_utf8` and `translation_lengths`), decoded here with TextDecoder.
//
// onnxruntime-node and onnxruntime-web cannot feed a file's optional inputs (the generation
// settings, `truncate`, the languages: inputs with a default); they drop such feeds silently. A
// setting is therefore fixed by baking a copy of the file (`graphgen bake --num-beams 1`), or chosen
// per call with a copy that keeps it as a required input (`graphgen bake --keep num_beams,max_length`,
// `--keep-languages`), which must then be given on every call; asking for a setting the file does
// not take is an error here, not a silent default.

const SETTINGS = {
  numBeams: ["num_beams", "int32"],
  numReturnSequences: ["num_return_sequences", "int32"],
  maxLength: ["max_length", "int32"],
  minLength: ["min_length", "int32"],
  lengthPenalty: ["length_penalty", "float32"],
  repetitionPenalty: ["repetition_penalty", "float32"],
};

/**
 * Open a text-level graphgen file. `model` is a path (Node), a URL (browser) or the file's bytes.
 * Returns what `translate` takes. A file exported with `--external-data` keeps its weights in a
 * data file beside it: onnxruntime-node finds it there; onnxruntime-web is handed it here (from
 * beside a path or URL), unless `sessionOptions.externalData` says where it is.
 */
export async function openTranslator(ort, model, sessionOptions = {}) {
  let session;
  try {
    // enableMemPattern: false, as graphgen.Translator: ONNX Runtime's replay of a run's allocations
    // would hold a batch's search memory twice (README, Memory).
    session = await ort.InferenceSession.create(model, {
      logSeverityLevel: 3,
      enableMemPattern: false,
      ...sessionOptions,
    });
  } catch (error) {
    // onnxruntime-web names the data file it lacks: "external data file "NAME"" (a path or URL) or,
    // for bytes, "external data path ... does not exist: "/working/directory/NAME""
    const external = String(error).match(/external data (?:file|path)[^"]*"+([^"]+?)"+/i);
    if (external && !sessionOptions.externalData) {
      const name = external[1].replace(/^.*[/\\]/, "");
      if (typeof model !== "string") {
        throw new Error(`this file keeps its weights in ${name}: pass { externalData: [{ path: "${name}", data }] }`);
      }
      const data = model.replace(/[^/\\]*$/, "") + name; // beside the model: a path or a URL
      return openTranslator(ort, model, { ...sessionOptions, externalData: [{ path: name, data }] });
    }
    if (/SentencepieceTokenizer|ai\.onnx\.contrib/.test(String(error))) {
      throw new Error(
        "this file's tokenizer needs onnxruntime-extensions, which JavaScript runtimes cannot load; " +
          "export it with `graphgen export MODEL -o model.onnx` (the default --tokenizer onnx)",
      );
    }
    if (/no such file|ENOENT|doesn't exist|failed to load|404/i.test(String(error))) {
      throw new Error(`model file not found or unreadable: ${model}`);
    }
    throw error;
  }
  if (!session.inputNames.includes("text_utf8")) {
    throw new Error("not a text-level graphgen file with the portable tokenizer (no text_utf8 input)");
  }
  return { ort, session };
}

/** Texts as the `text_utf8` tensor: UTF-8 (lone surrogates become U+FFFD), zero-padded rows. */
export function utf8Tensor(ort, texts) {
  const encoder = new TextEncoder();
  const rows = texts.map((text) => encoder.encode(text));
  const width = rows.reduce((longest, row) => Math.max(longest, row.length), 0);
  const data = new Uint8Array(rows.length * width);
  rows.forEach((row, index) => data.set(row, index * width));
  return new ort.Tensor("uint8", data, [rows.length, width]);
}

/** A language input: strings, or UTF-8 rows in a file without strings (export --no-strings). */
function languages(ort, session, input, value, count, option) {
  const codes = typeof value === "string" ? [value] : Array.from(value);
  if (codes.length !== 1 && codes.length !== count) {
    throw new Error(`give one ${option}, or one per text (${count})`);
  }
  if (session.inputNames.includes(`${input}_utf8`)) {
    return [`${input}_utf8`, utf8Tensor(ort, codes)];
  }
  return [input, new ort.Tensor("string", codes, [codes.length])];
}

/**
 * Translate `texts` (an array of strings). Options: `sourceLanguage` and `targetLanguage` (NLLB,
 * M2M100, mBART-50 files: one code, or one per text), `truncate`, and the generation settings
 * `numBeams`, `numReturnSequences`, `maxLength`, `minLength`, `lengthPenalty`, `repetitionPenalty`
 * (the checkpoint's defaults otherwise). Returns one string per text, or an array of
 * `numReturnSequences` strings per text when that is above 1.
 */
export async function translate({ ort, session }, texts, options = {}) {
  if (!Array.isArray(texts) || texts.some((text) => typeof text !== "string")) {
    throw new TypeError("texts must be an array of strings");
  }
  if (texts.length === 0) {
    return [];
  }
  const feeds = { text_utf8: utf8Tensor(ort, texts) };
  const accepted = new Set(session.inputNames);
  const inputs = { ...Object.fromEntries(Object.entries(SETTINGS).map(([o, [i]]) => [o, i])), truncate: "truncate",
    sourceLanguage: "source_language", targetLanguage: "target_language" };
  for (const [option, input] of Object.entries(inputs)) {
    if (options[option] !== undefined && !accepted.has(input) && !accepted.has(`${input}_utf8`)) {
      const flag = input.replaceAll("_", "-");
      const how = option.endsWith("Language")
        ? "`graphgen bake --keep-languages`"
        : `\`graphgen bake --${flag}${option === "truncate" ? "" : " VALUE"}\` (fixed) or \`graphgen bake --keep ${input}\` (per call)`;
      throw new Error(`this file has no ${input} input that JavaScript runtimes can set; use a copy made with ${how}`);
    }
    // a required input (kept by graphgen bake --keep): no default to fall back on, but truncate's is false
    if (options[option] === undefined && option !== "truncate" && (accepted.has(input) || accepted.has(`${input}_utf8`))) {
      throw new Error(`this file takes ${input} on every call (a graphgen bake --keep copy): pass ${option}`);
    }
  }
  for (const [option, [input, type]] of Object.entries(SETTINGS)) {
    if (options[option] !== undefined) {
      const Array_ = type === "int32" ? Int32Array : Float32Array;
      feeds[input] = new ort.Tensor(type, Array_.from([options[option]]), [1]);
    }
  }
  for (const [option, input] of [["sourceLanguage", "source_language"], ["targetLanguage", "target_language"]]) {
    if (options[option] !== undefined) {
      const [name, tensor] = languages(ort, session, input, options[option], texts.length, option);
      feeds[name] = tensor;
    }
  }
  if (options.truncate !== undefined || accepted.has("truncate")) {
    feeds.truncate = new ort.Tensor("bool", Uint8Array.from([options.truncate ? 1 : 0]), [1]);
  }
  let results;
  try {
    results = await session.run(feeds, ["translation_utf8", "translation_lengths"]);
  } catch (error) {
    const message = String(error).match(/graphgen: .*?(?=' Status Message|$)/m);
    throw message ? new Error(message[0]) : error;
  }
  const { translation_utf8: bytes, translation_lengths: lengths } = results;
  const [batch, returned, width] = bytes.dims;
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const out = Array.from({ length: batch }, (_, b) =>
    Array.from({ length: returned }, (_, r) => {
      const row = b * returned + r;
      return decoder.decode(bytes.data.subarray(row * width, row * width + Number(lengths.data[row])));
    }),
  );
  return returned === 1 ? out.map((row) => row[0]) : out;
}
