// Runs benchmarks/browser/kernels.html in headless Chromium for each model of a JSON file, on the
// WebAssembly and the WebGPU provider, and prints one JSON line per model and provider: the outputs
// or the error, and the WebGPU device's features. Used by benchmarks/webgpu_kernels.py.
//
//   node benchmarks/browser/kernels.mjs jobs.json
//
// jobs.json: {"files": FOLDER, "chromium": PATH, "adapter": "swiftshader" | "", "models": [NAME, ...]}
// (each NAME.onnx with its feeds in NAME.json). playwright-core and onnxruntime-web come from
// examples/node/node_modules (npm ci there first).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const node = fileURLToPath(new URL("../../examples/node/", import.meta.url));
const { chromium } = await import(pathToFileURL(join(node, "node_modules", "playwright-core", "index.mjs")).href);
const { serveFolders, CHROMIUM_ARGS } = await import(pathToFileURL(join(node, "support", "serve.js")).href);
const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const server = await serveFolders([here, join(node, "node_modules", "onnxruntime-web", "dist"), config.files]);
const args = [...CHROMIUM_ARGS.filter((arg) => arg !== "--disable-gpu"), "--enable-unsafe-webgpu"];
if (config.adapter) args.push(`--use-webgpu-adapter=${config.adapter}`);
const browser = await chromium.launch({ executablePath: config.chromium, args });
try {
  for (const model of config.models) {
    for (const ep of ["wasm", "webgpu"]) {
      const page = await browser.newPage();
      const query = new URLSearchParams({ model: `${model}.onnx`, feeds: `${model}.json`, ep });
      await page.goto(`${server.origin}/kernels.html?${query}`);
      await page.waitForFunction(() => window.kernelResult !== undefined, null, { timeout: 120_000 });
      console.log(JSON.stringify({ model, ep, ...(await page.evaluate(() => window.kernelResult)) }));
      await page.close();
    }
  }
} finally {
  await browser.close();
  server.close();
}
