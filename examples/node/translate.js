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

// Where onnxruntime-web's WebGPU provider computes a file wrongly without an error (1.31.1,
// measured on SwiftShader: docs/platforms.md): int4 blocks other than these, and float16 on an
// adapter without `shader-f16` (every translation comes out empty).
const WEBGPU_INT4_BLOCKS = [16, 32];

/**
 * The file's graphgen metadata (`ModelProto.metadata_props`, as `graphgen.contract.read_file_info`
 * reads it in Python), read by walking the protobuf's top-level fields and skipping the graph
 * unread. `read(offset, length)` resolves to the file's bytes there (fewer at its end). An `.ort`
 * file has no such metadata: {} for it.
 */
export async function readMetadata(read) {
  const head = await read(0, 8);
  if (new TextDecoder().decode(head.subarray(4, 8)) === "ORTM") {
    return {};
  }
  const metadata = {};
  const utf8 = new TextDecoder("utf-8");
  let offset = 0;
  for (;;) {
    const chunk = await read(offset, 20); // a tag and a length: two varints of at most 10 bytes
    if (chunk.length === 0) {
      return metadata;
    }
    const tag = varint(chunk, 0);
    const field = Math.floor(tag.value / 8);
    const wire = tag.value % 8;
    let next;
    if (wire === 0) {
      next = offset + varint(chunk, tag.end).end;
    } else if (wire === 1 || wire === 5) {
      next = offset + tag.end + (wire === 1 ? 8 : 4);
    } else if (wire === 2) {
      const length = varint(chunk, tag.end);
      next = offset + length.end + length.value;
      if (field === 14) { // metadata_props: StringStringEntryProto, key = 1, value = 2
        const entry = await read(offset + length.end, length.value);
        const parts = {};
        for (let at = 0; at < entry.length;) {
          const key = varint(entry, at);
          const size = varint(entry, key.end);
          parts[Math.floor(key.value / 8)] = utf8.decode(entry.subarray(size.end, size.end + size.value));
          at = size.end + size.value;
        }
        metadata[parts[1] ?? ""] = parts[2] ?? "";
      }
    } else {
      throw new Error(`not an ONNX file (wire type ${wire} at byte ${offset})`);
    }
    offset = next;
  }
}

/** A protobuf varint at `at`: its value (exact below 2^53) and the offset after it. */
function varint(bytes, at) {
  let value = 0;
  let scale = 1;
  for (let end = at; end < bytes.length; end += 1) {
    value += (bytes[end] & 0x7f) * scale;
    scale *= 128;
    if (bytes[end] < 0x80) {
      return { value, end: end + 1 };
    }
  }
  throw new Error("not an ONNX file (a truncated varint)");
}

/** What a translator's `info` says about its file, from the metadata (see docs/io-contract.md). */
function fileInfo(metadata) {
  const json = (key, empty) => (metadata[key] === undefined ? empty : JSON.parse(metadata[key]));
  return {
    metadata,
    precision: metadata["graphgen.precision"], // float32, float16, int8 or int4
    int4BlockSize: metadata["graphgen.int4_block_size"] === undefined ? undefined : Number(metadata["graphgen.int4_block_size"]),
    languages: json("graphgen.languages", []), // NLLB, M2M100, mBART-50: the codes a file knows
    // opus-mt's >>cmn_Hans<<, MADLAD-400's <2de>: the tokens that, typed first in a text, choose the
    // target, in id order, for a language picker (empty for files without them: NLLB, mBART, T5)
    targetTags: json("graphgen.target_tags", []),
    sourceLanguage: metadata["graphgen.source_language"],
    targetLanguage: metadata["graphgen.target_language"],
    generationDefaults: json("graphgen.generation_defaults", {}),
    baked: json("graphgen.baked", {}), // what graphgen bake fixed in this copy
    maxPositions: metadata["graphgen.max_positions"] === undefined ? undefined : Number(metadata["graphgen.max_positions"]),
  };
}

const inNode = typeof process !== "undefined" && process.versions?.node !== undefined;

/** The model's bytes when they must be read here (given, or a URL outside Node); undefined for a Node path. */
async function modelBytes(model) {
  if (typeof model !== "string") {
    return model instanceof Uint8Array ? model : new Uint8Array(model);
  }
  if (inNode) {
    return undefined;
  }
  const response = await fetch(model);
  if (!response.ok) {
    throw new Error(`model file not found or unreadable: ${model} (HTTP ${response.status})`);
  }
  // Streamed into one buffer of the announced size, as onnxruntime-web reads a URL itself:
  // `arrayBuffer()` would hold the body's chunks and their copy at once (files up to 2 GB).
  const size = Number(response.headers.get("Content-Length") ?? 0);
  if (!size || !response.body || response.headers.get("Content-Encoding")) { // compressed: the length is not the file's
    return new Uint8Array(await response.arrayBuffer());
  }
  let buffer;
  try {
    buffer = new ArrayBuffer(size);
  } catch (error) {
    if (!(error instanceof RangeError)) {
      throw error;
    }
    buffer = new WebAssembly.Memory({ initial: Math.ceil(size / 65536), maximum: Math.ceil(size / 65536) }).buffer;
  }
  const bytes = new Uint8Array(buffer, 0, size);
  const reader = response.body.getReader();
  let offset = 0;
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
    if (offset + chunk.value.length > size) {
      throw new Error(`${model}: more bytes than its Content-Length (${size}); a compressed response?`);
    }
    bytes.set(chunk.value, offset);
    offset += chunk.value.length;
  }
  if (offset !== size) {
    throw new Error(`${model}: ${offset} of its ${size} bytes arrived`);
  }
  return bytes;
}

/** The metadata of a file in Node, read in small pieces (the graph's bytes are never read). */
async function pathMetadata(path) {
  const { open } = await import("node:fs/promises");
  let file;
  try {
    file = await open(path, "r");
  } catch (error) {
    throw new Error(`model file not found or unreadable: ${path} (${error.code ?? error})`);
  }
  try {
    return await readMetadata(async (offset, length) => {
      const buffer = new Uint8Array(length);
      const { bytesRead } = await file.read(buffer, 0, length, offset);
      return buffer.subarray(0, bytesRead);
    });
  } finally {
    await file.close();
  }
}

/** Why onnxruntime-web's WebGPU provider would translate this file wrongly, before loading it (or undefined). */
function webgpuInt4Problem(info) {
  if (info.precision !== "int4" || WEBGPU_INT4_BLOCKS.includes(info.int4BlockSize)) {
    return undefined;
  }
  const blocks = info.int4BlockSize === undefined ? "an unrecorded block size" : `blocks of ${info.int4BlockSize}`;
  return `this int4 file has ${blocks}, which onnxruntime-web's WebGPU provider computes wrongly (without an error); ` +
    "export it with `graphgen export MODEL -o model.onnx --int4 --int4-block-size 32`, or use an --int8 file";
}

const providerNames = (options) => (options.executionProviders ?? []).map((p) => (typeof p === "string" ? p : p.name));

/**
 * Open a text-level graphgen file. `model` is a path (Node), a URL (browser) or the file's bytes.
 * Returns what `translate` takes. A file exported with `--external-data` keeps its weights in a
 * data file beside it: onnxruntime-node finds it there; onnxruntime-web is handed it here (from
 * beside a path or URL), unless `sessionOptions.externalData` says where it is. The translator's
 * `info` holds what the file says about itself (its languages, precision, defaults: `fileInfo`).
 * On WebGPU (`executionProviders: ["webgpu"]`) a file the provider would translate wrongly is
 * refused: int4 in blocks other than 16 or 32, float16 on an adapter without `shader-f16`.
 */
export async function openTranslator(ort, model, sessionOptions = {}) {
  const bytes = await modelBytes(model);
  const info = fileInfo(bytes === undefined
    ? await pathMetadata(model)
    : await readMetadata(async (offset, length) => bytes.subarray(offset, offset + length)));
  const webgpu = providerNames(sessionOptions).includes("webgpu");
  const int4Problem = webgpu ? webgpuInt4Problem(info) : undefined;
  if (int4Problem) {
    throw new Error(int4Problem);
  }
  let session;
  try {
    // enableMemPattern: false, as graphgen.Translator: ONNX Runtime's replay of a run's allocations
    // would hold a batch's search memory twice (README, Memory).
    session = await ort.InferenceSession.create(bytes ?? model, {
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
      // the bytes already read, where they were (a page's URL), not fetched again
      return openTranslator(ort, bytes ?? model, { ...sessionOptions, externalData: [{ path: name, data }] });
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
    await session.release();
    throw new Error("not a text-level graphgen file with the portable tokenizer (no text_utf8 input)");
  }
  // the adapter onnxruntime-web chose for the session, known once it exists
  const adapter = webgpu ? ort.env.webgpu?.adapter : undefined;
  if (info.precision === "float16" && adapter !== undefined && !adapter.features?.has("shader-f16")) {
    await session.release();
    throw new Error("this WebGPU adapter has no shader-f16, where onnxruntime-web translates float16 files to " +
      "empty strings (without an error); use a float32 or --int8 file");
  }
  return { ort, session, info };
}

/**
 * Refuses the texts that end with U+0000, naming them (from 0) as Python's `Translator` does. The
 * file takes zero bytes after a row's last other byte as padding, so a U+0000 inside a text is
 * carried (and tokenized as HF tokenizes it), but a final one would be dropped without an error: a
 * different text translated. The error's `indices` lists them.
 */
function refuseFinalZeros(texts) {
  const refused = texts.flatMap((text, index) => (text.endsWith("\0") ? [index] : []));
  if (refused.length === 0) {
    return;
  }
  let which = `text ${refused[0]} of the batch`;
  if (texts.length === 1) {
    which = "the text";
  } else if (refused.length > 1) {
    which = `texts ${refused.join(", ")} of the batch: each`;
  }
  const error = new Error(`${which} ends with U+0000, which the file's bytes input cannot carry ` +
    "(its rows are padded with zero bytes); remove it");
  error.indices = refused;
  throw error;
}

/**
 * Texts as the `text_utf8` tensor: UTF-8 (lone surrogates become U+FFFD), zero-padded rows. A text
 * that ends with U+0000 is refused (the padding would swallow it: `refuseFinalZeros`).
 */
export function utf8Tensor(ort, texts) {
  refuseFinalZeros(texts);
  const encoder = new TextEncoder();
  const rows = texts.map((text) => encoder.encode(text));
  const width = rows.reduce((longest, row) => Math.max(longest, row.length), 0);
  const data = new Uint8Array(rows.length * width);
  rows.forEach((row, index) => data.set(row, index * width));
  return new ort.Tensor("uint8", data, [rows.length, width]);
}

/**
 * The settings a call runs with (the file's defaults, which a baked copy's are, and `options`),
 * checked by the rules of Python's `graphgen.contract.generation_settings`: the file checks some
 * itself, less clearly, and others (max_length 1, a fraction that Int32Array would cut) would run.
 */
function checkSettings(info, options) {
  const values = { ...info?.generationDefaults };
  const names = {};
  for (const [option, [input]] of Object.entries(SETTINGS)) {
    names[input] = option;
    if (options[option] !== undefined) {
      values[input] = options[option];
    }
  }
  for (const [option, [input, type]] of Object.entries(SETTINGS)) {
    const value = values[input];
    if (type === "int32" && options[option] !== undefined && !(Number.isInteger(value) && Math.abs(value) < 2 ** 31)) {
      throw new TypeError(`${option} must be an integer, got ${JSON.stringify(value)}`);
    }
    if (type === "float32" && options[option] !== undefined && !(typeof value === "number" && Number.isFinite(value))) {
      throw new TypeError(`${option} must be a finite number, got ${JSON.stringify(value)}`);
    }
  }
  const rule = (input, holds, wanted) => {
    if (values[input] !== undefined && !holds(values[input])) {
      throw new RangeError(`${names[input]} must be ${wanted}, got ${values[input]}`);
    }
  };
  const beams = values.num_beams ?? 1;
  rule("num_beams", (v) => v >= 1, "at least 1");
  rule("num_return_sequences", (v) => v >= 1 && v <= beams, `between 1 and numBeams (${beams})`);
  rule("max_length", (v) => v >= 2, "at least 2");
  rule("max_length", (v) => !info?.maxPositions || v <= info.maxPositions, `at most the model's ${info?.maxPositions} positions`);
  rule("min_length", (v) => v >= 0 && v <= (values.max_length ?? Infinity), "between 0 and maxLength");
  rule("repetition_penalty", (v) => v > 0, "positive");
}

/** A language input: strings, or UTF-8 rows in a file without strings (export --no-strings). */
function languages(ort, { session, info }, input, value, count, option) {
  const codes = typeof value === "string" ? [value] : Array.from(value);
  if (codes.length !== 1 && codes.length !== count) {
    throw new Error(`give one ${option}, or one per text (${count})`);
  }
  const known = info?.languages ?? [];
  for (const code of codes) {
    // "" is no target language (the file's own first token); the file would refuse others too, less clearly
    if (known.length > 0 && !known.includes(code) && !(code === "" && input === "target_language")) {
      const close = known.filter((language) => language.slice(0, 3) === String(code).slice(0, 3)).slice(0, 3);
      throw new Error(`unknown ${input} ${JSON.stringify(code)} (translator.info.languages lists ` +
        `${known.length})${close.length > 0 ? `; did you mean ${close.join(", ")}?` : ""}`);
    }
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
 * `numReturnSequences` strings per text when that is above 1. A text that ends with U+0000 is
 * refused before running (an Error naming it; one inside a text is translated).
 */
export async function translate(translator, texts, options = {}) {
  const { ort, session } = translator;
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
  checkSettings(translator.info, options);
  for (const [option, [input, type]] of Object.entries(SETTINGS)) {
    if (options[option] !== undefined) {
      const Array_ = type === "int32" ? Int32Array : Float32Array;
      feeds[input] = new ort.Tensor(type, Array_.from([options[option]]), [1]);
    }
  }
  for (const [option, input] of [["sourceLanguage", "source_language"], ["targetLanguage", "target_language"]]) {
    if (options[option] !== undefined) {
      const [name, tensor] = languages(ort, translator, input, options[option], texts.length, option);
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
