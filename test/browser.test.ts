// Tessera as a person uses it in a browser, driven through Debian's Chromium with playwright-core
// (never a browser download; .ci/run installs chromium with apt when absent): the playground
// compiles the zoo's MLP in its worker, runs it beside onnxruntime-web and shows numbers that
// agree; a corrupt file dropped on it shows the CLI's message and leaves the page working; a model
// with an op Tessera lacks shows the CLI's exact line; the example app built with the esbuild
// plugin shows the interpreter's top-1; served cross-origin isolated, MobileNetV2 runs on 2 threads
// (ours and onnxruntime-web's) with outputs bit for bit the 1-thread run's. Screenshots go to test-artifacts/ (git-ignored).
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { Browser, Page } from "playwright-core"
import { evaluate } from "../src/ast/graph/evaluate.js"
import { makeGraph } from "../src/ast/graph/graph.js"
import { decodeModelSync, decodeOnnx } from "../src/ast/onnx/decode.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { errorLine } from "../src/cli/errors.js"
import { tessera } from "../src/esbuild/plugin.js"
import { zooModel } from "../src/zoo/index.js"
import { buildExample, EXAMPLE_DIR, writeExampleModel } from "../examples/classify/build.js"
import { seededInput } from "../examples/classify/input.js"
import { buildPlayground, playgroundFolders, serveFolders } from "../scripts/playground-server.js"

const CHROMIUM = "/usr/bin/chromium"
const hasChromium = existsSync(CHROMIUM)
if (!hasChromium) console.warn(`test/browser.test.ts: skipped: ${CHROMIUM} is not installed (apt-get install -y chromium; .ci/run does it)`)
const ARTIFACTS = path.resolve("test-artifacts")

describe.skipIf(!hasChromium)(`in Chromium${hasChromium ? "" : ` (skipped: ${CHROMIUM} is not installed)`}`, () => {
  let browser: Browser
  let page: Page
  let playgroundUrl = ""
  const closers: (() => Promise<void>)[] = []
  const dirs: string[] = []
  const tmp = () => {
    const d = mkdtempSync(path.join(tmpdir(), "tessera-browser-"))
    dirs.push(d)
    return d
  }

  beforeAll(async () => {
    const { chromium } = await import("playwright-core")
    mkdirSync(ARTIFACTS, { recursive: true })
    const out = tmp()
    const [b] = await Promise.all([
      chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"] }),
      buildPlayground(out),
    ])
    browser = b
    const server = await serveFolders(playgroundFolders(out))
    closers.push(server.close)
    playgroundUrl = server.url
    page = await browser.newPage()
    await page.goto(server.url)
  }, 90_000)

  afterAll(async () => {
    await browser?.close()
    for (const c of closers) await c()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })

  const settled = (states: string[]) =>
    page.waitForFunction((s) => s.includes((globalThis as unknown as { document: { getElementById(id: string): { dataset: { state?: string } } } }).document.getElementById("status").dataset.state ?? ""), states, { timeout: 60_000 })
  const state = () => page.getAttribute("#status", "data-state")

  it("compiles the zoo's MLP in its worker and runs it as onnxruntime-web does", async () => {
    await page.selectOption("#zoo", "mlp")
    await page.click("#compile")
    await settled(["compiled", "error"])
    expect(await page.textContent("#error")).toBe("")
    expect(await state()).toBe("compiled")
    // each stage was reported, the fused graph drawn, every kernel in the table
    const stages = (await page.textContent("#stages")) ?? ""
    for (const s of ["decode", "pass rewrite.FoldConstants", "fusion: 4 groups", "lowering group 4 of 4", "emission: 4 kernels", "done"]) expect(stages).toContain(s)
    expect(await page.locator("#graph svg").count()).toBe(1)
    expect(await page.locator("#kernels tbody tr").count()).toBe(4)
    await page.click("#run")
    await settled(["ran", "error"])
    expect(await page.textContent("#error")).toBe("")
    const cell = async (id: string) => (await page.textContent(`#cmp-${id}`)) ?? ""
    expect(Number(await cell("ort"))).toBeGreaterThan(0)
    expect(Number(await cell("maxdiff"))).toBeLessThan(1e-4)
    expect(await cell("top5")).toBe("5/5")
    const [ours, theirs] = (await cell("top1")).split(", ")
    expect(ours).toBe(theirs)
    await page.screenshot({ path: path.join(ARTIFACTS, "playground-mlp.png"), fullPage: true })
  }, 60_000)

  it("served cross-origin isolated, runs MobileNetV2's wasm module on 2 threads: outputs bit for bit the 1-thread run's", async () => {
    type Doc = { document: { getElementById(id: string): { dataset: { state?: string } } } }
    /** A fresh page (a fresh worker: onnxruntime-web's threads are fixed at its first session) compiling and running on `threads`. */
    const runOn = async (threads: number) => {
      const p = await browser.newPage()
      try {
        await p.goto(`${playgroundUrl}?threads=${threads}`)
        expect(await p.evaluate(() => (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated)).toBe(true)
        const settle = (states: string[]) => p.waitForFunction((s) => s.includes((globalThis as unknown as Doc).document.getElementById("status").dataset.state ?? ""), states, { timeout: 120_000 })
        expect(await p.inputValue("#threads")).toBe(String(threads))
        await p.selectOption("#zoo", "mobilenetv2")
        await p.click("#compile")
        await settle(["compiled", "error"])
        expect(await p.textContent("#error")).toBe("")
        await p.click("#run")
        await settle(["ran", "error"])
        expect(await p.textContent("#error")).toBe("")
        const cell = async (id: string) => (await p.textContent(`#cmp-${id}`)) ?? ""
        const row = { threads: await cell("threads"), ranges: Number(await cell("ranges")), digest: await cell("digest"), maxDiff: Number(await cell("maxdiff")), top5: await cell("top5"), ours: Number(await cell("ours")), ort: Number(await cell("ort")) }
        if (threads > 1) await p.screenshot({ path: path.join(ARTIFACTS, `playground-mobilenetv2-${threads}-threads.png`), fullPage: true })
        return row
      } finally {
        await p.close()
      }
    }
    const one = await runOn(1)
    const two = await runOn(2)
    // both sides on the threads asked for; our workers ran parallel ranges (none on one thread)
    expect(one.threads).toBe("1, 1")
    expect(two.threads).toBe("2, 2")
    expect(one.ranges).toBe(0)
    expect(two.ranges).toBeGreaterThan(0)
    // the same outputs, bit for bit (a range computes what it computes on any thread), and onnxruntime-web's within tolerance
    expect(two.digest).toMatch(/^[0-9a-f]{8}$/)
    expect(two.digest).toBe(one.digest)
    for (const r of [one, two]) {
      expect(r.maxDiff).toBeLessThan(1e-3)
      expect(r.top5).toBe("5/5")
    }
    console.log(`MobileNetV2 in Chromium, the machine shared: 1 thread ${one.ours} ms (onnxruntime-web ${one.ort}); 2 threads ${two.ours} ms (onnxruntime-web ${two.ort})`)
  }, 300_000)

  /** Drops bytes on the drop zone as a file (a DataTransfer, as a person's drag does). */
  const drop = (name: string, bytes: Uint8Array) =>
    page.evaluate(
      ([n, b64]) => {
        const g = globalThis as unknown as { DataTransfer: new () => { items: { add(f: unknown): void } }; File: new (p: unknown[], n: string) => unknown; DragEvent: new (t: string, o: object) => unknown; document: { getElementById(id: string): { dispatchEvent(e: unknown): void } } }
        const dt = new g.DataTransfer()
        const b = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))
        dt.items.add(new g.File([b], n))
        g.document.getElementById("drop").dispatchEvent(new g.DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }))
      },
      [name, Buffer.from(bytes).toString("base64")] as const,
    )

  it("shows the CLI's message for a corrupt file, and the page keeps working", async () => {
    const corrupt = Uint8Array.from({ length: 300 }, (_, i) => (i * 37 + 11) & 0xff)
    await drop("corrupt.onnx", corrupt)
    await settled(["error"])
    const message = (await page.textContent("#error")) ?? ""
    const expected = await Effect.runPromise(Effect.flip(decodeOnnx(corrupt)))
    expect(message).toBe(errorLine("compile", expected, { model: "corrupt.onnx" }))
    expect(message).toMatch(/^tessera compile: corrupt\.onnx: /)
    await page.screenshot({ path: path.join(ARTIFACTS, "playground-corrupt.png") })
    await page.click("#compile")
    await settled(["compiled", "error"])
    expect(await state()).toBe("compiled")
  }, 60_000)

  it("shows the CLI's line for a model with an op Tessera lacks, naming the node and the op", async () => {
    const type = { dtype: "float32", shape: [1, 4] } as const
    const bytes = encodeOnnx(makeGraph({ opset: 13, inputs: [{ name: "x", type }], outputs: [{ name: "y", type }], nodes: [{ name: "the_bad_node", op: "NoSuchOp", domain: "", inputs: ["x"], outputs: ["y"], attrs: {} }] }))
    await drop("bad.onnx", bytes)
    await settled(["error"])
    const message = (await page.textContent("#error")) ?? ""
    expect(message).toBe(errorLine("compile", await Effect.runPromise(Effect.flip(decodeOnnx(bytes))), { model: "bad.onnx" }))
    expect(message).toContain("the_bad_node")
    expect(message).toContain("NoSuchOp")
  }, 60_000)

  it("runs the example app built with the esbuild plugin: its page shows the interpreter's top-1", async () => {
    const model = writeExampleModel(zooModel("mlp"))
    const out = tmp()
    const r = await buildExample(tessera({ target: "wasm" }), "browser", out)
    expect(r.errors).toEqual([])
    copyFileSync(path.join(EXAMPLE_DIR, "index.html"), path.join(out, "index.html"))
    const server = await serveFolders({ "/": out })
    closers.push(server.close)
    const p = await browser.newPage()
    await p.goto(server.url)
    await p.waitForFunction(() => /^\d+$/.test((globalThis as unknown as { document: { getElementById(id: string): { textContent: string } } }).document.getElementById("top1").textContent) || (globalThis as unknown as { document: { getElementById(id: string): { textContent: string } } }).document.getElementById("error").textContent !== "", null, { timeout: 30_000 })
    expect(await p.textContent("#error")).toBe("")
    const g = decodeModelSync(readFileSync(model))
    const shape = g.inputs[0].type.shape as number[]
    const ref = await Effect.runPromise(evaluate(g, new Map([[g.inputs[0].name, { dtype: "float32", shape, data: seededInput(shape.reduce((a, b) => a * b, 1)) }]])))
    const scores = Array.from(ref.get(g.outputs[0].name)!.data as Float32Array)
    expect(await p.textContent("#top1")).toBe(String(scores.indexOf(Math.max(...scores))))
    await p.screenshot({ path: path.join(ARTIFACTS, "example-classify.png") })
    await p.close()
  }, 60_000)
})
