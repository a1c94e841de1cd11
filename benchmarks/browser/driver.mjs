// Runs benchmarks/browser/index.html in headless Chromium for each job of a JSON file and prints
// one JSON line per job: the page's timings and output, and the renderer's peak resident memory
// (VmHWM of Chromium's renderer processes, read from /proc: the page's WebAssembly heap, the fetched
// file and the JavaScript heap). A fresh browser per job, so each peak is that file's alone.
//
//   node benchmarks/browser/driver.mjs jobs.json
//
// jobs.json: {"files": FOLDER, "chromium": PATH, "jobs": [{"model": NAME, "texts": [...], "runs": N}]}
// (or "ids": [...] instead of "texts" for an id-level file; "threads": N for onnxruntime-web's
// worker threads, 1 otherwise; "warmup": TEXT to translate once after loading, timed as warmupMs).
// playwright-core and onnxruntime-web come from examples/node/node_modules (npm ci there first).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const node = fileURLToPath(new URL("../../examples/node/", import.meta.url));
const { chromium } = await import(pathToFileURL(join(node, "node_modules", "playwright-core", "index.mjs")).href);
const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const roots = [here, node, join(node, "node_modules", "onnxruntime-web", "dist"), config.files];

const { serveFolders, CHROMIUM_ARGS } = await import(pathToFileURL(join(node, "support", "serve.js")).href);
const server = await serveFolders(roots);
const origin = server.origin;

function rendererPeakMiB() {
  let peak = 0;
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("--type=renderer")) continue;
      const kib = Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/VmHWM:\s+(\d+)/)[1]);
      peak = Math.max(peak, kib / 1024);
    } catch {
      // the process ended meanwhile
    }
  }
  return peak;
}

for (const job of config.jobs) {
  const browser = await chromium.launch({ executablePath: config.chromium, args: CHROMIUM_ARGS });
  let result;
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (error) => errors.push(String(error)));
    const query = new URLSearchParams({ model: job.model, runs: String(job.runs) });
    query.set(job.ids ? "ids" : "texts", JSON.stringify(job.ids ?? job.texts));
    if (job.config) query.set("config", JSON.stringify(job.config));
    if (job.data) query.set("data", job.data);
    if (job.threads) query.set("threads", String(job.threads)); // worker threads: the server isolates the page
    if (job.warmup !== undefined) query.set("warmup", job.warmup); // a text translated once after loading, apart
    await page.goto(`${origin}/index.html?${query}`);
    await page.waitForFunction(() => window.benchmarkResult !== undefined, null, { timeout: 1_800_000 });
    result = await page.evaluate(() => window.benchmarkResult);
    if (errors.length) result.error = errors.join("; ");
    result.rendererPeakMiB = rendererPeakMiB();
  } catch (error) {
    result = { error: String(error), rendererPeakMiB: rendererPeakMiB() };
  }
  await browser.close();
  console.log(JSON.stringify({ model: job.model, ...result }));
}
server.close();
