// The demo test set's ids through onnxruntime-node and onnxruntime-web: the same `sequences` as
// Python ONNX Runtime (fixtures written by examples/fixtures.py; `make examples` runs both).
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { generate, openModel } from "../generate.js";

const fixtures = fileURLToPath(new URL("../../../build/examples/", import.meta.url));
const idModel = `${fixtures}demo-en-zh-ids.onnx`;
const { batches } = JSON.parse(await readFile(`${fixtures}ids.json`, "utf8"));

const require = createRequire(import.meta.url);
const runtimes = {
  "onnxruntime-node": require("onnxruntime-node"),
  "onnxruntime-web (wasm)": require("onnxruntime-web"),
};
runtimes["onnxruntime-web (wasm)"].env.wasm.numThreads = 1; // no worker threads in a test process

for (const [name, ort] of Object.entries(runtimes)) {
  describe(name, () => {
    test("every batch (40 of one, 19 of 16) gives Python's sequences", async () => {
      const session = await openModel(ort, idModel);
      assert.ok(batches.length >= 59);
      for (const batch of batches) {
        const got = await generate(ort, session, batch.input_ids, batch.attention_mask);
        assert.deepEqual(got, batch.sequences);
      }
    });

    test("an empty batch gives no sequences", async () => {
      const session = await openModel(ort, idModel);
      assert.deepEqual(await generate(ort, session, [], []), []);
    });

    test("a missing file is a clear error", async () => {
      await assert.rejects(openModel(ort, `${fixtures}missing.onnx`), /model file not found/);
    });

    test("ragged rows are refused", async () => {
      const session = await openModel(ort, idModel);
      await assert.rejects(generate(ort, session, [[5, 6], [7]], [[1, 1], [1]]), /same length/);
    });
  });
}

test("onnxruntime-node refuses the text-level file with a pointer to --no-tokenizer", async () => {
  await assert.rejects(openModel(runtimes["onnxruntime-node"], `${fixtures}demo-en-zh.onnx`), /--no-tokenizer/);
});
