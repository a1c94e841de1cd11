// A static file server on 127.0.0.1 for a page under test: each path is looked up in `roots` in
// order (the page, the library, onnxruntime-web's files, the fixtures). Used by the browser test and
// by benchmarks/browser/driver.mjs.
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { extname, join, normalize } from "node:path";

const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm" };

/** Serve `roots`; resolves to `{ origin, close }`. */
export async function serveFolders(roots) {
  const server = createServer(async (request, response) => {
    const path = normalize(decodeURIComponent(new URL(request.url, "http://x").pathname)).replace(/^[/\\]+/, "");
    for (const root of roots) {
      const file = join(root, path || "index.html");
      if (file.startsWith(root) && existsSync(file) && !file.endsWith("/")) {
        try {
          const body = await readFile(file);
          response.writeHead(200, {
            "content-type": types[extname(file)] ?? "application/octet-stream",
            "content-length": body.length, // as static servers send it: translate.js streams into one buffer
            // cross-origin isolation, which a page needs for onnxruntime-web's worker threads
            // (SharedArrayBuffer): ort.env.wasm.numThreads above 1
            "cross-origin-opener-policy": "same-origin",
            "cross-origin-embedder-policy": "require-corp",
          });
          response.end(body);
          return;
        } catch {
          // a directory: try the next root
        }
      }
    }
    response.writeHead(404).end();
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { origin: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

// Chromium's flags for a headless run on a machine without a network or a sandbox.
export const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
