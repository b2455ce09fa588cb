// `npm run browser-bench -- --models resnet18,mobilenetv2 --repeats 3 [--threads 2]`: the playground
// in Debian's Chromium (headless, through playwright-core): each zoo model compiled in its worker (one
// worker) and run on `--threads` (default 1; more run on Web Workers over a shared memory, the page
// being cross-origin isolated) beside onnxruntime-web (wasm, as many threads) in the same page on the same seeded
// input (10 timed runs each after a warm-up); per model the median compile time and the median of each run's latencies and ratio
// (ours / onnxruntime-web; < 1 means faster) over the repeats. Name the CPU with the figures.
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { chromium } from "playwright-core"
import { median } from "../src/device/onnxruntime.js"
import { buildPlayground, playgroundFolders, serveFolders } from "./playground-server.js"

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : fallback
}
const models = arg("models", "resnet18,mobilenetv2").split(",")
const repeats = Number(arg("repeats", "3"))
const threads = Number(arg("threads", "1"))

const out = mkdtempSync(path.join(tmpdir(), "tessera-browser-bench-"))
await buildPlayground(out)
const server = await serveFolders(playgroundFolders(out))
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"] })
type Doc = { document: { getElementById(id: string): { dataset: Record<string, string>; textContent: string } } }
try {
  for (const model of models) {
    const rows: { compile: number; ours: number; ort: number; ratio: number; maxDiff: number; top5: string; threads: string }[] = []
    for (let r = 0; r < repeats; r++) {
      // a fresh page each time: a fresh worker, nothing cached
      const page = await browser.newPage()
      await page.goto(`${server.url}?threads=${threads}`)
      await page.selectOption("#zoo", model)
      await page.click("#compile")
      await page.waitForFunction(() => ["compiled", "error"].includes((globalThis as unknown as Doc).document.getElementById("status").dataset.state ?? ""), null, { timeout: 300_000 })
      const error = await page.textContent("#error")
      if (error) throw new Error(`${model}: ${error}`)
      const compile = Number(await page.getAttribute("#status", "data-compile-ms"))
      await page.click("#run")
      await page.waitForFunction(() => ["ran", "error"].includes((globalThis as unknown as Doc).document.getElementById("status").dataset.state ?? ""), null, { timeout: 300_000 })
      const cell = async (id: string) => (await page.textContent(`#cmp-${id}`)) ?? ""
      rows.push({ compile, ours: Number(await cell("ours")), ort: Number(await cell("ort")), ratio: Number(await cell("ratio")), maxDiff: Number(await cell("maxdiff")), top5: await cell("top5"), threads: await cell("threads") })
      await page.close()
    }
    const m = (k: "compile" | "ours" | "ort" | "ratio") => median(rows.map((x) => x[k]))
    console.log(JSON.stringify({ model, repeats, threads, compileMs: m("compile"), oursMs: m("ours"), ortWebMs: m("ort"), ratio: m("ratio"), maxDiff: Math.max(...rows.map((x) => x.maxDiff)), top5: rows.map((x) => x.top5), each: rows }))
  }
} finally {
  await browser.close()
  await server.close()
  rmSync(out, { recursive: true, force: true })
}
