// A real browser: headless Chromium (Debian's package) opens web/index.html from a server on
// 127.0.0.1, which translates the demo test set and NLLB sentences into three languages with
// onnxruntime-web (on WebGPU too, with mBART-50, T5 and mT5 sentences); the page's strings must be
// Python's (fixtures from examples/fixtures.py).
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

import { CHROMIUM_ARGS, serveFolders } from "../support/serve.js";

const here = fileURLToPath(new URL("..", import.meta.url));
const fixtures = fileURLToPath(new URL("../../../build/examples/", import.meta.url));
// Where each path of the page's server comes from: the page, the library, onnxruntime-web, fixtures.
const roots = [join(here, "web"), here, join(here, "node_modules", "onnxruntime-web", "dist"), fixtures];
const browserPath = process.env.CHROMIUM ?? "/usr/bin/chromium";

// WebGPU without a GPU: Chromium's own software Vulkan (SwiftShader, shipped in Debian's package).
const WEBGPU_ARGS = [...CHROMIUM_ARGS.filter((arg) => arg !== "--disable-gpu"), "--enable-unsafe-webgpu",
  "--use-webgpu-adapter=swiftshader"];

let server;
let browser;
let gpuBrowser;
let origin;

before(async () => {
  server = await serveFolders(roots);
  origin = server.origin;
  browser = await chromium.launch({ executablePath: browserPath, args: CHROMIUM_ARGS });
});

after(async () => {
  await browser?.close();
  await gpuBrowser?.close();
  server?.close();
});

async function pageOutcome(query, inBrowser) {
  const page = await inBrowser.newPage();
  const errors = [];
  page.on("pageerror", (error) => errors.push(String(error)));
  await page.goto(`${origin}/index.html?${new URLSearchParams(query)}`);
  await page.waitForFunction(() => window.graphgenResult !== undefined, null, { timeout: 600_000 });
  const result = await page.evaluate(() => window.graphgenResult);
  await page.close();
  assert.deepEqual(errors, []);
  return result;
}

async function pageResult(query, inBrowser = browser) {
  const result = await pageOutcome(query, inBrowser);
  assert.equal(result.error, undefined);
  return result;
}

/** The error the page shows for `query`. */
async function pageError(query, inBrowser = browser) {
  const result = await pageOutcome(query, inBrowser);
  assert.equal(result.translations, undefined);
  return result.error;
}

const lines = async (name) => (await readFile(`${fixtures}${name}`, "utf8")).split("\n").slice(0, -1);

describe(`headless Chromium (${browserPath})`, () => {
  test("the page translates the 300 demo sentences as Python does", async () => {
    const result = await pageResult({ model: "demo-en-zh.onnx", sources: "sources.txt", batch: "16" });
    assert.deepEqual(result.translations, await lines("expected.txt"));
    console.log(`300 sentences in the browser: ${Math.round(result.milliseconds)} ms`);
  });

  // a page the server isolates (Cross-Origin-Opener-Policy, -Embedder-Policy) may use worker threads
  test("the page translates with two worker threads as with one, as Python does", async () => {
    const query = { model: "demo-en-zh.onnx", sources: "sources.txt", count: "64", batch: "16" };
    const one = await pageResult(query);
    const two = await pageResult({ ...query, threads: "2" });
    assert.equal(two.isolated, true);
    assert.deepEqual(two.translations, (await lines("expected.txt")).slice(0, 64));
    assert.deepEqual(one.translations, two.translations);
    console.log(`64 sentences, 1 thread ${Math.round(one.milliseconds)} ms, 2 threads ${Math.round(two.milliseconds)} ms`);
  });

  test("a copy with its weights beside it (--external-data) loads them from beside its URL", async () => {
    const result = await pageResult({ model: "demo-en-zh-greedy-external.onnx", sources: "sources.txt", count: "40" });
    assert.deepEqual(result.translations, await lines("expected-greedy.txt"));
  });

  test("the page translates NLLB sentences into three languages as Python does", async () => {
    const rows = (await lines("languages.tsv")).map((line) => line.split("\t"));
    for (const target of new Set(rows.map((row) => row[1]))) {
      const mine = rows.filter((row) => row[1] === target);
      const result = await pageResult({
        model: "nllb-languages.onnx", // languages kept as required inputs (graphgen bake --keep-languages)
        sources: `nllb-${target}.txt`,
        options: JSON.stringify({ sourceLanguage: "eng_Latn", targetLanguage: target }),
      });
      assert.deepEqual(result.translations, mine.map((row) => row[3]));
    }
  });

  test("the page offers the file's languages (translator.info) and translates into the one picked", async () => {
    const [source, target, text, translation] = (await lines("languages.tsv")).map((line) => line.split("\t"))
      .find((row) => row[1] === "fra_Latn");
    const page = await browser.newPage();
    await page.goto(`${origin}/index.html?model=nllb-languages.onnx`);
    await page.waitForSelector("#go:not([disabled])", { timeout: 120_000 });
    const codes = await page.$$eval("#target option", (options) => options.map((option) => option.value));
    assert.ok(codes.includes("fra_Latn") && codes.includes("zho_Hans"), codes.join(" "));
    await page.selectOption("#source", source);
    await page.selectOption("#target", target);
    await page.fill("#input", text);
    await page.click("#go");
    await page.waitForFunction(() => document.getElementById("output").textContent !== "");
    assert.equal(await page.textContent("#output"), translation);
    await page.close();
  });
});

describe("onnxruntime-web's WebGPU provider in headless Chromium (SwiftShader's software GPU)", () => {
  before(async () => {
    gpuBrowser = await chromium.launch({ executablePath: browserPath, args: WEBGPU_ARGS });
  });

  // The attention, matrix products and layer norms run as WebGPU shaders (the nodes without a
  // WebGPU kernel, the tokenizer's among them, on the WebAssembly provider in the same session):
  // a software GPU makes it slow (~3 s per sentence), so a part of each set.
  test("the page translates demo sentences on WebGPU as Python does", async () => {
    const result = await pageResult({ model: "demo-en-zh.onnx", sources: "sources.txt", count: "8", batch: "8", ep: "webgpu" },
      gpuBrowser);
    assert.equal(result.webgpu, true);
    assert.equal(result.adapter, "swiftshader");
    assert.deepEqual(result.translations, (await lines("expected.txt")).slice(0, 8));
    console.log(`8 sentences on WebGPU (SwiftShader): ${Math.round(result.milliseconds)} ms`);
  });

  test("the page translates NLLB sentences on WebGPU as Python does", async () => {
    const rows = (await lines("languages.tsv")).map((line) => line.split("\t"));
    const target = rows[0][1];
    const result = await pageResult({
      model: "nllb-languages.onnx",
      sources: `nllb-${target}.txt`,
      count: "8",
      options: JSON.stringify({ sourceLanguage: "eng_Latn", targetLanguage: target }),
      ep: "webgpu",
    }, gpuBrowser);
    assert.equal(result.webgpu, true);
    assert.deepEqual(result.translations, rows.filter((row) => row[1] === target).slice(0, 8).map((row) => row[3]));
  });

  // int8: the integer products run on the WebAssembly side, the rows' scales on WebGPU
  test("the page translates with an --int8 file on WebGPU as Python does", async () => {
    const result = await pageResult(
      { model: "demo-en-zh-int8.onnx", sources: "sources.txt", count: "4", batch: "4", ep: "webgpu" },
      gpuBrowser,
    );
    assert.equal(result.webgpu, true);
    assert.deepEqual(result.translations, (await lines("expected-int8.txt")).slice(0, 4));
  });

  // int4 in blocks of 32: onnxruntime-web 1.31's WebGPU MatMulNBits computes blocks of 64 (the
  // default) and 128 wrongly, so a page on WebGPU takes an --int4-block-size 32 file
  test("the page translates with an --int4-block-size 32 file on WebGPU as Python does", async () => {
    const result = await pageResult(
      { model: "demo-en-zh-int4-32.onnx", sources: "sources.txt", count: "4", batch: "4", ep: "webgpu" },
      gpuBrowser,
    );
    assert.equal(result.webgpu, true);
    assert.deepEqual(result.translations, await lines("expected-int4-32.txt"));
  });

  // what the provider would translate wrongly without an error is refused: int4 in blocks of 64 (the
  // default) before loading, float16 once the session shows an adapter without shader-f16
  // (SwiftShader has none; there every translation came out empty)
  test("the page refuses an int4 file in blocks of 64 and, without shader-f16, a float16 file", async () => {
    const int4 = await pageError({ model: "demo-en-zh-int4.onnx", sources: "sources.txt", count: "1", ep: "webgpu" },
      gpuBrowser);
    assert.match(int4, /blocks of 64.*--int4-block-size 32/);
    const fp16 = await pageError({ model: "demo-en-zh-fp16.onnx", sources: "sources.txt", count: "1", ep: "webgpu" },
      gpuBrowser);
    assert.match(fp16, /no shader-f16.*float32 or --int8 file/);
  });

  // mBART-50's normalized embeddings, T5's relative position bias, mT5's gated feed-forward
  for (const family of ["mbart50", "t5", "mt5"]) {
    test(`the page translates ${family} sentences on WebGPU as Python does`, async () => {
      const result = await pageResult({ model: `${family}.onnx`, sources: `${family}-sources.txt`, ep: "webgpu" },
        gpuBrowser);
      assert.equal(result.webgpu, true);
      assert.deepEqual(result.translations, await lines(`${family}-expected.txt`));
    });
  }
});
