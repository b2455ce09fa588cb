// The playground's page: picks a zoo model or takes a dropped .onnx, hands it to the compiler
// worker (./worker.ts) and shows what comes back — each stage as it starts, the fused graph, the
// kernel table, the comparison with onnxruntime-web — or the CLI's message for a model it cannot
// take. Nothing a file holds can break the page: every failure arrives as a message.
import { ZOO_NAMES } from "../src/zoo/index.js"
import type { Reply, Request } from "./protocol.js"

interface El {
  textContent: string | null
  innerHTML: string
  value: string
  disabled: boolean
  files?: ArrayLike<{ name: string; arrayBuffer(): Promise<ArrayBuffer> }>
  classList: { add(c: string): void; remove(c: string): void }
  appendChild(c: unknown): void
  addEventListener(t: string, f: (e: DragEvent) => void): void
  dataset: Record<string, string>
}
interface DragEvent {
  preventDefault(): void
  dataTransfer?: { files: ArrayLike<{ name: string; arrayBuffer(): Promise<ArrayBuffer> }> }
}
const doc = (globalThis as unknown as { document: { getElementById(id: string): El; createElement(t: string): El } }).document
const $ = (id: string) => doc.getElementById(id)
const WorkerCtor = (globalThis as unknown as { Worker: new (url: string, o: object) => { postMessage(m: Request, t?: unknown[]): void; onmessage: ((e: { data: Reply }) => void) | null; onerror: ((e: { message: string }) => void) | null } }).Worker

const escape = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`)
const fmt = (x: number | null, digits = 3) => (x === null ? "—" : x.toPrecision(digits))

const worker = new WorkerCtor("./worker.js", { type: "module" })
const status = (text: string, state: string) => {
  $("status").textContent = text
  $("status").dataset.state = state
}

for (const name of ZOO_NAMES) {
  const o = doc.createElement("option")
  o.value = name
  o.textContent = name
  $("zoo").appendChild(o)
}
$("zoo").value = "mlp"

const send = (m: Request, transfer: unknown[] = []) => {
  $("error").textContent = ""
  worker.postMessage(m, transfer)
}
const compile = (m: Extract<Request, { type: "compile" }>, transfer: unknown[] = []) => {
  $("stages").innerHTML = ""
  $("run").disabled = true
  status(`compiling ${m.name}…`, "compiling")
  send(m, transfer)
}

// threads: the page's choice (1 unless the page is cross-origin isolated; ?threads=N picks it)
const isolated = (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated === true
const cores = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency ?? 1
for (const n of isolated ? [...new Set([1, 2, 4, cores])].sort((a, b) => a - b) : [1]) {
  const o = doc.createElement("option")
  o.value = String(n)
  o.textContent = String(n)
  $("threads").appendChild(o)
}
const asked = new URL((globalThis as unknown as { location: { href: string } }).location.href).searchParams.get("threads")
$("threads").value = isolated && asked !== null ? asked : "1"
$("isolated").textContent = isolated ? "cross-origin isolated: threads over SharedArrayBuffer" : "not cross-origin isolated: one thread"
const threads = () => Number($("threads").value) || 1

$("compile").addEventListener("click", () => compile({ type: "compile", name: $("zoo").value, zoo: $("zoo").value, threads: threads() }))
$("run").addEventListener("click", () => {
  status("running…", "running")
  send({ type: "run", runs: 10, seed: 0 })
})
const takeFile = async (f: { name: string; arrayBuffer(): Promise<ArrayBuffer> }) => {
  const bytes = await f.arrayBuffer()
  compile({ type: "compile", name: f.name, bytes, threads: threads() }, [bytes])
}
$("file").addEventListener("change", () => {
  const f = $("file").files?.[0]
  if (f) void takeFile(f)
})
$("drop").addEventListener("dragover", (e) => {
  e.preventDefault()
  $("drop").classList.add("over")
})
$("drop").addEventListener("dragleave", () => $("drop").classList.remove("over"))
$("drop").addEventListener("drop", (e) => {
  e.preventDefault()
  $("drop").classList.remove("over")
  const f = e.dataTransfer?.files[0]
  if (f) void takeFile(f)
})

worker.onerror = (e) => {
  $("error").textContent = `the compiler worker failed: ${e.message}`
  status("failed", "error")
}
worker.onmessage = ({ data: m }) => {
  switch (m.type) {
    case "stage": {
      const line = doc.createElement("div")
      line.textContent = `${m.ms.toFixed(0).padStart(6)} ms  ${m.text}`
      $("stages").appendChild(line)
      status(m.text, "compiling")
      return
    }
    case "compiled":
      status(`compiled ${m.name} in ${m.compileMs.toFixed(0)} ms (${m.kernels.length} kernels, ${m.threads} thread${m.threads === 1 ? "" : "s"}); inputs ${m.inputs}; outputs ${m.outputs}`, "compiled")
      $("status").dataset.compileMs = String(m.compileMs)
      $("graph").innerHTML = m.svg
      $("kernels").innerHTML =
        "<thead><tr><th>kernel</th><th>ops</th><th>shape</th><th>MFLOP</th><th>ms</th></tr></thead><tbody>" +
        m.kernels.map((k) => `<tr><td>${escape(k.name)}${k.kind === "fallback" ? " (fallback)" : ""}</td><td>${escape(k.ops)}</td><td>${escape(k.shape)}</td><td>${(k.flops / 1e6).toFixed(2)}</td><td>${fmt(k.ms)}</td></tr>`).join("") +
        "</tbody>"
      $("run").disabled = false
      return
    case "ran": {
      const rows: [string, string, string][] = [
        ["tessera wasm (ms)", fmt(m.oursMs), "ours"],
        ["onnxruntime-web wasm (ms)", m.ortMs === null ? escape(m.ortError ?? "—") : fmt(m.ortMs), "ort"],
        ["ratio (ours / onnxruntime-web)", fmt(m.ratio), "ratio"],
        ["largest difference", m.maxDiff === null ? "—" : m.maxDiff.toExponential(2), "maxdiff"],
        ["top-5 agreement", m.top5 === null ? "—" : `${m.top5}/5`, "top5"],
        ["top-1 (ours, onnxruntime-web)", `${m.top1}, ${m.ortTop1 ?? "—"}`, "top1"],
        ["threads (ours, onnxruntime-web)", `${m.threads}, ${m.ortThreads}`, "threads"],
        ["parallel ranges our workers ran", String(m.workerRanges), "ranges"],
        ["output digest (fnv1a of the bytes)", m.digest, "digest"],
      ]
      $("compare").innerHTML = `<tbody>${rows.map(([k, v, id]) => `<tr><th>${k}</th><td id="cmp-${id}">${v}</td></tr>`).join("")}</tbody>`
      status("ran", "ran")
      return
    }
    case "error":
      $("error").textContent = m.message
      status("failed", "error")
      return
  }
}
