// The playground's build (playground/: the page and its compiler worker, bundled by esbuild for the
// browser) and a static server on localhost — with onnxruntime-web's wasm files under /ort/, and
// the headers that make the page cross-origin isolated. `npm run playground` (./playground.ts),
// test/browser.test.ts and the browser bench use them.
import { copyFileSync, createReadStream, existsSync, mkdirSync, statSync } from "node:fs"
import { createServer } from "node:http"
import * as path from "node:path"
import { build } from "esbuild"

const TYPES: Readonly<Record<string, string>> = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".json": "application/json", ".map": "application/json", ".bin": "application/octet-stream", ".css": "text/css" }

/** The playground bundled into `outdir` (page, worker, index.html). */
export const buildPlayground = async (outdir: string, root = process.cwd()): Promise<void> => {
  mkdirSync(outdir, { recursive: true })
  await build({
    entryPoints: { main: path.join(root, "playground/main.ts"), worker: path.join(root, "playground/worker.ts") },
    outdir,
    bundle: true,
    platform: "browser",
    format: "esm",
    target: "es2022",
    // (onnxruntime-web comes from /ort/ at run time; the Node runtime's loader is never called here)
    external: ["/ort/*", "onnxruntime-web", "onnxruntime-node"],
    logLevel: "warning",
  })
  copyFileSync(path.join(root, "playground/index.html"), path.join(outdir, "index.html"))
}

/** Serves `dirs` (URL prefix → folder) on localhost; `port` 0 takes a free one. */
export const serveFolders = (dirs: Readonly<Record<string, string>>, port = 0): Promise<{ readonly url: string; readonly close: () => Promise<void> }> =>
  new Promise((resolve) => {
    const server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://localhost")
      const prefix = Object.keys(dirs).sort((a, b) => b.length - a.length).find((p) => url.pathname.startsWith(p))
      const rel = prefix === undefined ? "" : decodeURIComponent(url.pathname.slice(prefix.length)) || "index.html"
      const file = prefix === undefined ? "" : path.join(dirs[prefix], path.normalize(rel).replace(/^(\.\.[/\\])+/, ""))
      if (!file || !existsSync(file) || !statSync(file).isFile()) {
        res.writeHead(404).end("not found")
        return
      }
      res.writeHead(200, {
        "content-type": TYPES[path.extname(file)] ?? "application/octet-stream",
        "cross-origin-opener-policy": "same-origin",
        "cross-origin-embedder-policy": "require-corp",
        "cache-control": "no-store",
      })
      createReadStream(file).pipe(res)
    })
    server.listen(port, "127.0.0.1", () => {
      const a = server.address()
      const p = typeof a === "object" && a ? a.port : port
      resolve({ url: `http://127.0.0.1:${p}/`, close: () => new Promise((r) => server.close(() => r())) })
    })
  })

/** The playground's folders: the build, and onnxruntime-web's dist under /ort/. */
export const playgroundFolders = (outdir: string, root = process.cwd()) => ({ "/ort/": path.join(root, "node_modules/onnxruntime-web/dist"), "/": outdir })
