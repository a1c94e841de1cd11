// Text in, text out on onnxruntime-node and onnxruntime-web (wasm, run in Node): the demo test set
// and an NLLB file with three target languages give exactly Python's strings (fixtures written by
// examples/fixtures.py; `make examples` runs this).
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { openTranslator, readMetadata, translate } from "../translate.js";

const fixtures = fileURLToPath(new URL("../../../build/examples/", import.meta.url));
const lines = async (name) => (await readFile(`${fixtures}${name}`, "utf8")).split("\n").slice(0, -1);
const sources = await lines("sources.txt");
const expected = await lines("expected.txt");
const rows = (await lines("languages.tsv")).map((line) => line.split("\t"));
const [longSource, longTranslation] = await lines("long.txt");
const [emptyTranslation] = await lines("empty.txt");
const pythonInfo = JSON.parse(await readFile(`${fixtures}info.json`, "utf8")); // read_file_info's metadata per file

const require = createRequire(import.meta.url);
const runtimes = {
  "onnxruntime-node": require("onnxruntime-node"),
  "onnxruntime-web (wasm)": require("onnxruntime-web"),
};
runtimes["onnxruntime-web (wasm)"].env.wasm.numThreads = 1; // no worker threads in a test process

for (const [name, ort] of Object.entries(runtimes)) {
  describe(name, () => {
    test("the 300 demo sentences, one at a time and in batches of 16, give Python's translations", async () => {
      const translator = await openTranslator(ort, `${fixtures}demo-en-zh.onnx`);
      assert.equal(sources.length, 300);
      const single = [];
      for (const source of sources) {
        single.push(...(await translate(translator, [source])));
      }
      assert.deepEqual(single, expected);
      const batched = [];
      for (let start = 0; start < sources.length; start += 16) {
        batched.push(...(await translate(translator, sources.slice(start, start + 16))));
      }
      assert.deepEqual(batched, expected);
    });

    test("NLLB: three target languages, one per call and one per text, give Python's translations", async () => {
      // a copy with the languages kept as required inputs (graphgen bake --keep-languages)
      const translator = await openTranslator(ort, `${fixtures}nllb-languages.onnx`);
      assert.equal(rows.length, 72);
      for (const target of new Set(rows.map((row) => row[1]))) {
        const mine = rows.filter((row) => row[1] === target);
        const got = await translate(translator, mine.map((row) => row[2]), { sourceLanguage: "eng_Latn", targetLanguage: target });
        assert.deepEqual(got, mine.map((row) => row[3]));
      }
      const mixed = rows.filter((_, index) => index % 7 === 0);
      const got = await translate(translator, mixed.map((row) => row[2]), {
        sourceLanguage: "eng_Latn",
        targetLanguage: mixed.map((row) => row[1]),
      });
      assert.deepEqual(got, mixed.map((row) => row[3]));
    });

    test("files without string tensors (--no-strings) give the same translations", async () => {
      const translator = await openTranslator(ort, `${fixtures}demo-en-zh-no-strings.onnx`);
      assert.ok(!translator.session.outputNames.includes("translation"));
      const batched = [];
      for (let start = 0; start < 64; start += 16) {
        batched.push(...(await translate(translator, sources.slice(start, start + 16))));
      }
      assert.deepEqual(batched, expected.slice(0, 64));
      const nllb = await openTranslator(ort, `${fixtures}nllb-no-strings-languages.onnx`);
      const mixed = rows.filter((_, index) => index % 5 === 0);
      const got = await translate(nllb, mixed.map((row) => row[2]), {
        sourceLanguage: "eng_Latn",
        targetLanguage: mixed.map((row) => row[1]),
      });
      assert.deepEqual(got, mixed.map((row) => row[3]));
    });

    /** The first `count` demo sources through `file`, in batches of 16, against Python's `expected`. */
    async function matchesPython(file, count, expected) {
      const translator = await openTranslator(ort, `${fixtures}${file}`);
      const batched = [];
      for (let start = 0; start < count; start += 16) {
        batched.push(...(await translate(translator, sources.slice(start, start + 16))));
      }
      assert.deepEqual(batched, await lines(expected));
      return translator;
    }

    test("the --int4 file (MatMulNBits) gives Python's translations", async () => {
      await matchesPython("demo-en-zh-int4.onnx", 64, "expected-int4.txt");
    });

    test("the --int8 file gives Python's translations, which Python made one text at a time", async () => {
      const translator = await matchesPython("demo-en-zh-int8.onnx", 32, "expected-int8.txt");
      assert.equal(translator.info.precision, "int8");
    });

    test("the --fp16 file gives Python's translations", async () => {
      const translator = await matchesPython("demo-en-zh-fp16.onnx", 32, "expected-fp16.txt");
      assert.equal(translator.info.precision, "float16");
    });

    test("a translator's info is the file's metadata, read as Python reads it, from a path or bytes", async () => {
      const nllb = await openTranslator(ort, `${fixtures}nllb-languages.onnx`);
      assert.deepEqual(nllb.info.metadata, pythonInfo["nllb-languages.onnx"]);
      assert.ok(nllb.info.languages.includes("fra_Latn") && nllb.info.languages.length > 3);
      assert.equal(nllb.info.sourceLanguage, "eng_Latn");
      assert.equal(nllb.info.maxPositions, Number(pythonInfo["nllb-languages.onnx"]["graphgen.max_positions"]));
      assert.deepEqual(nllb.info.targetTags, []);
      // the demo file's target tags: HF's MarianTokenizer.supported_language_codes, in id order
      const demo = await openTranslator(ort, `${fixtures}demo-en-zh.onnx`);
      assert.deepEqual(demo.info.targetTags, [">>cmn_Hans<<", ">>cmn_Hant<<"]);
      const int4 = await openTranslator(ort, await readFile(`${fixtures}demo-en-zh-int4-32.onnx`));
      assert.deepEqual([int4.info.precision, int4.info.int4BlockSize], ["int4", 32]);
      const settings = await openTranslator(ort, `${fixtures}demo-en-zh-settings.onnx`);
      assert.equal(settings.info.generationDefaults.num_beams, 4);
      assert.deepEqual(settings.info.metadata, pythonInfo["demo-en-zh-settings.onnx"]);
      // every fixture, the files JavaScript cannot run (extensions) included
      assert.ok(Object.keys(pythonInfo).length >= 15);
      for (const [file, metadata] of Object.entries(pythonInfo)) {
        const bytes = await readFile(`${fixtures}${file}`);
        const fromBytes = await readMetadata(async (offset, length) => bytes.subarray(offset, offset + length));
        assert.deepEqual(fromBytes, metadata, file);
      }
    });

    test("on WebGPU an int4 file in blocks other than 16 or 32 is refused before it loads", async () => {
      // onnxruntime-web 1.31.1's WebGPU MatMulNBits computes blocks of 64 wrongly, without an error
      const webgpu = { executionProviders: ["webgpu"] };
      await assert.rejects(openTranslator(ort, `${fixtures}demo-en-zh-int4.onnx`, webgpu),
        /int4 file has blocks of 64.*--int4-block-size 32/);
      await assert.rejects(openTranslator(ort, `${fixtures}demo-en-zh-int4.onnx`, { executionProviders: [{ name: "webgpu" }] }),
        /blocks of 64/);
    });

    test("settings come from a baked copy; asking the default file for one is an error", async () => {
      const greedy = await openTranslator(ort, `${fixtures}demo-en-zh-greedy.onnx`);
      assert.deepEqual(await translate(greedy, sources.slice(0, 40)), await lines("expected-greedy.txt"));
      const translator = await openTranslator(ort, `${fixtures}demo-en-zh.onnx`);
      await assert.rejects(translate(translator, [sources[0]], { numBeams: 1 }), /graphgen bake --num-beams VALUE.*--keep num_beams/);
      await assert.rejects(translate(translator, [sources[0]], { targetLanguage: "x" }), /--keep-languages/);
    });

    test("settings chosen per call from a copy that keeps them (graphgen bake --keep num_beams,max_length)", async () => {
      const translator = await openTranslator(ort, `${fixtures}demo-en-zh-settings.onnx`);
      const chosen = await translate(translator, sources.slice(0, 16), { numBeams: 2, maxLength: 8 });
      assert.deepEqual(chosen, await lines("expected-settings.txt"));
      // kept inputs are required: no default to fall back on
      await assert.rejects(translate(translator, [sources[0]], { numBeams: 2 }), /takes max_length on every call.*pass maxLength/);
      await assert.rejects(translate(translator, [sources[0]], { numBeams: 2, maxLength: 8, minLength: 3 }), /--keep min_length/);
      // Python's rules (graphgen.contract.generation_settings), checked before running
      const bad = [
        [{ numBeams: 0, maxLength: 8 }, /numBeams must be at least 1, got 0/],
        [{ numBeams: 2.5, maxLength: 8 }, /numBeams must be an integer, got 2.5/],
        [{ numBeams: "2", maxLength: 8 }, /numBeams must be an integer/],
        [{ numBeams: 2, maxLength: 1 }, /maxLength must be at least 2, got 1/],
        [{ numBeams: 2, maxLength: 100_000 }, /maxLength must be at most the model's 512 positions, got 100000/],
      ];
      for (const [options, message] of bad) {
        await assert.rejects(translate(translator, [sources[0]], options), message);
      }
    });

    test("a baked copy with its weights beside it (--external-data) gives the same translations", async () => {
      const model = "demo-en-zh-greedy-external.onnx";
      // onnxruntime-node maps the data file beside the path; onnxruntime-web is handed it (externalData):
      // by openTranslator from beside the path, or as the caller gives it
      const expectedGreedy = await lines("expected-greedy.txt");
      const translator = await openTranslator(ort, `${fixtures}${model}`);
      assert.deepEqual(await translate(translator, sources.slice(0, 40)), expectedGreedy);
      if (name.startsWith("onnxruntime-web")) {
        const data = await readFile(`${fixtures}${model}.data`);
        const bytes = await readFile(`${fixtures}${model}`);
        const given = await openTranslator(ort, bytes, { externalData: [{ path: `${model}.data`, data }] });
        assert.deepEqual(await translate(given, sources.slice(0, 4)), expectedGreedy.slice(0, 4));
        await assert.rejects(openTranslator(ort, bytes), /keeps its weights in demo-en-zh-greedy-external\.onnx\.data/);
      }
    });

    test("a text over the model's limit: an error naming it, or cut by a copy baked with truncate", async () => {
      const translator = await openTranslator(ort, `${fixtures}demo-en-zh.onnx`);
      await assert.rejects(translate(translator, [longSource]), /longer than the model's limit of 512 tokens/);
      const cutting = await openTranslator(ort, `${fixtures}demo-en-zh-truncate.onnx`);
      assert.deepEqual(await translate(cutting, [longSource]), [longTranslation]);
    });

    test("a U+0000 inside a text is translated; a text that ends with one is refused, by its index", async () => {
      const translator = await openTranslator(ort, `${fixtures}demo-en-zh.onnx`);
      const [inside, without] = await translate(translator, ["a\u0000b", "ab"]);
      assert.notEqual(inside, without); // the character reached the tokenizer
      const why = "ends with U\\+0000, which the file's bytes input cannot carry \\(its rows are padded with zero bytes\\); remove it$";
      const refusals = [
        [["I have three cats.", "cats\u0000"], [1], new RegExp(`^text 1 of the batch ${why}`)],
        [["a", "b\u0000", "c\u0000d", "\u0000"], [1, 3], new RegExp(`^texts 1, 3 of the batch: each ${why}`)],
        [["cats\u0000"], [0], new RegExp(`^the text ${why}`)],
      ];
      for (const [texts, indices, message] of refusals) {
        await assert.rejects(translate(translator, texts), (error) => {
          assert.match(error.message, message);
          assert.deepEqual(error.indices, indices);
          return true;
        });
      }
    });

    test("empty input, an unknown language and a missing file", async () => {
      const translator = await openTranslator(ort, `${fixtures}demo-en-zh.onnx`);
      assert.deepEqual(await translate(translator, []), []);
      assert.deepEqual(await translate(translator, [""]), [emptyTranslation]);
      const nllb = await openTranslator(ort, `${fixtures}nllb-languages.onnx`);
      const klingon = { sourceLanguage: "eng_Latn", targetLanguage: "xx_Klingon" };
      await assert.rejects(translate(nllb, ["hi"], klingon), /unknown target_language/);
      await assert.rejects(translate(nllb, ["hi"], { sourceLanguage: "eng_Latn", targetLanguage: "fra" }),
        /unknown target_language "fra" .*did you mean fra_Latn/);
      await assert.rejects(openTranslator(ort, `${fixtures}missing.onnx`), /not found/);
    });
  });
}
