// The playground's compiler: runs in a Web Worker, so the page never freezes. Compiles a zoo model
// or a dropped .onnx for the wasm target with Tessera's browser entry, reporting each stage as it
// starts (decode, graph passes, fusion, lowering of each group, emission) with the time since the
// compile began; renders the fused graph (the same SVG as `tessera inspect --fused --format svg`);
// times each kernel on its own; then runs the model beside onnxruntime-web (its wasm backend, in this
// same worker) on the same seeded input. With threads > 1 (the page cross-origin isolated: the
// server's COOP / COEP headers) the module is emitted with a shared memory and its parallel phases
// run on this worker and threads − 1 Web Workers, and onnxruntime-web on as many threads; elsewhere
// both run on one. A failure is the CLI's one-line message.
import { Effect } from "effect"
import { BACKENDS, compileModel, fusionSvg, loadArtifact, pipelineOf, rewrite, zooModel, type CompileStage } from "../src/browser.js"
import { storageBytes } from "../src/ast/graph/dtype.js"
import { showType } from "../src/ast/graph/graph.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { errorLine } from "../src/cli/errors.js"
import { randomTensor } from "../src/cli/inputs.js"
import { timeRuns } from "../src/device/device.js"
import type { Executor } from "../src/device/executor.js"
import { frameLayouts } from "../src/device/wasm/device.js"
import { loadWasmModuleSync } from "../src/device/wasm/load.js"
import type { Artifact } from "../src/lowering/program.js"
import type { CompiledModel } from "../src/web/compile-model.js"
import { median } from "../src/device/onnxruntime.js"
import { runOrtWeb } from "../src/device/onnxruntime-web.js"
import type { KernelRow, Reply, Request } from "./protocol.js"

interface WorkerScope {
  onmessage: ((e: { data: Request }) => void) | null
  postMessage(m: Reply): void
}
const scope = globalThis as unknown as WorkerScope
const post = (m: Reply) => scope.postMessage(m)

/** An Effect's value, or its typed error as the rejection (what errorLine reads). */
const settle = <A, E>(eff: Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromise(Effect.result(eff)).then((r) => (r._tag === "Failure" ? Promise.reject(r.failure) : r.success))

const pipeline = pipelineOf(BACKENDS)
const target = BACKENDS.wasm.target(undefined as never, 1)

let current: { name: string; bytes: Uint8Array; compiled: CompiledModel; executor: Executor; threads: number } | undefined

/** Whether this worker may share memory with workers of its own (its page is cross-origin isolated). */
const isolated = () => (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated === true

/** fnv1a of a typed array's bytes (a digest of an output, to compare runs bit for bit). */
const digestOf = (a: ArrayBufferView): string => {
  const b = new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
  let h = 2166136261
  for (let i = 0; i < b.length; i++) h = Math.imul(h ^ b[i], 16777619) >>> 0
  return h.toString(16).padStart(8, "0")
}

const stageText = (s: CompileStage): string =>
  s.stage === "decode" ? `decode (${(s.bytes / 1e6).toFixed(2)} MB)`
  : s.stage === "pass" ? `pass ${s.pass}`
  : s.stage === "fusion" ? `fusion: ${s.groups} groups`
  : s.stage === "lowering" ? `lowering group ${s.group} of ${s.of}`
  : s.stage === "emission" ? `emission: ${s.kernels} kernels`
  : "done"

/** Each kernel on its own, on zeroed buffers resident in a module's memory (no copies timed). */
const kernelTimes = (artifact: Artifact): Map<string, number> => {
  const bytes = artifact.files.get("model.wasm")!
  const layouts = frameLayouts(artifact.kernels)
  // (one thread: each kernel's own time; a module emitted for threads imports a shared memory)
  const mod = loadWasmModuleSync(bytes, layouts, { shared: artifact.manifest.sharedMemory === true })
  const sizes = artifact.kernels.map((k) => k.params.map((p) => Math.ceil((p.elements * storageBytes(p.dtype)) / 16) * 16 + 16))
  const [base] = mod.memory.reserve([Math.max(16, ...sizes.map((s) => s.reduce((a, b) => a + b, 0)))])
  const out = new Map<string, number>()
  artifact.kernels.forEach((k, i) => {
    let at = base
    const addresses = sizes[i].map((n) => ((at += n), at - n))
    out.set(k.name, timeRuns(() => mod.callAt(k.name, addresses), { repeats: 3, minMs: 5 }) * 1000)
  })
  return out
}

const compile = async (r: Extract<Request, { type: "compile" }>) => {
  // (a zoo model is built here first: its seeded weights, encoded as ONNX; the compile's clock starts after)
  const bytes = r.zoo ? zooModel(r.zoo) : new Uint8Array(r.bytes!)
  const t0 = performance.now()
  const stages: { stage: string; ms: number }[] = []
  const onStage = (s: CompileStage) => {
    const ms = performance.now() - t0
    if (s.stage !== "pass" && s.stage !== "lowering") stages.push({ stage: s.stage, ms })
    post({ type: "stage", text: stageText(s), ms })
  }
  // (threads only where this worker may share its memory: else the module is emitted for one)
  const threads = isolated() ? Math.max(1, Math.floor(r.threads ?? 1)) : 1
  const compiled = await settle(compileModel(pipeline, bytes, target, { onStage, threads }))
  const compileMs = performance.now() - t0
  const { program, artifact } = compiled
  const executor = await settle(loadArtifact(program, artifact).pipe(Effect.provide(BACKENDS.wasm.codegen!.device(target, { threads }))))
  current?.executor.module.close()
  current = { name: r.name, bytes, compiled, executor, threads: executor.module.threads ?? 1 }
  const svg = await Effect.runPromise(fusionSvg(program.fused))
  const times = kernelTimes(artifact)
  const g = program.graph
  const nodes = new Map(g.nodes.map((n) => [n.name, n] as const))
  const kernels: KernelRow[] = program.kernels.map((k) => {
    const group = program.fused.groups.find((x) => x.id === k.group)
    const outs = k.kind === "compiled" ? k.outputs : k.nodes.flatMap((n) => n.outputs)
    return {
      name: k.name,
      kind: k.kind,
      ops: (k.kind === "compiled" ? group?.ops ?? [] : k.nodes.map((n) => n.op)).join("+"),
      shape: outs.map((o) => { const t = g.valueTypes.get(o); return t ? showType(t) : "?" }).join(", "),
      flops: (group?.nodes ?? []).reduce((s, n) => s + (nodes.has(n) ? rewrite.nodeFlops(g, nodes.get(n)!) : 0), 0),
      ms: times.get(k.name) ?? null,
    }
  })
  const io = (vs: readonly { name: string; type: Parameters<typeof showType>[0] }[]) => vs.map((v) => `${v.name}: ${showType(v.type)}`).join(", ")
  post({ type: "compiled", name: r.name, compileMs, stages, svg, kernels, inputs: io(g.inputs), outputs: io(g.outputs), threads: current.threads, isolated: isolated() })
}

const topK = (xs: ArrayLike<number>, k: number): number[] =>
  Array.from(xs, (v, i) => [v, i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]).slice(0, k).map(([, i]) => i)

type OrtWeb = Parameters<typeof runOrtWeb>[0]
let ortModule: Promise<OrtWeb> | undefined
let ortThreads = 1
/**
 * onnxruntime-web from the server's copy of its dist (/ort/), set as loadOrtWeb sets it: wasm, no
 * proxy, on `threads` (its threaded build, ort-wasm-simd-threaded.wasm, starts its own workers where
 * the page is cross-origin isolated). Its runtime reads the threads once, at its first session: a
 * worker keeps the count of its first run (the page starts a fresh worker for another).
 */
const loadOrt = (threads: number) =>
  (ortModule ??= import(/* served by scripts/playground.ts */ "/ort/ort.wasm.min.mjs" as string).then((m: OrtWeb) => {
    ortThreads = threads
    m.env.wasm.numThreads = threads
    m.env.wasm.proxy = false
    m.env.wasm.wasmPaths = "/ort/"
    m.env.logLevel = "error"
    return m
  }))

const run = async (r: Extract<Request, { type: "run" }>) => {
  if (!current) throw new Error("compile a model first")
  const { compiled, executor, bytes, threads } = current
  const g = compiled.program.graph
  const feeds = new Map<string, Tensor>(g.inputs.map((i, k) => [i.name, randomTensor(i.type.dtype, i.type.shape as number[], r.seed, k)] as const))
  const outName = g.outputs[0].name
  let ours = executor.run(feeds)
  const ranges0 = executor.module.workerRanges?.() ?? 0
  const oursTimes: number[] = []
  for (let i = 0; i < r.runs; i++) {
    const t = performance.now()
    ours = executor.run(feeds)
    oursTimes.push(performance.now() - t)
  }
  const workerRanges = (executor.module.workerRanges?.() ?? 0) - ranges0
  const mine = ours.get(outName)!.data as ArrayLike<number>
  const digest = digestOf(ours.get(outName)!.data as ArrayBufferView)
  const ort = await loadOrt(threads).catch((e: unknown) => `onnxruntime-web did not load: ${e instanceof Error ? e.message : String(e)}`)
  const result = typeof ort === "string" ? ort : await Effect.runPromise(runOrtWeb(ort, bytes, feeds, { runs: r.runs }))
  const theirs = typeof result === "string" ? result : { ms: result.ms, data: result.outputs.get(outName)!.data }
  const oursMs = median(oursTimes)
  const top1 = topK(mine, 1)[0]
  if (typeof theirs === "string") return post({ type: "ran", oursMs, ortMs: null, ortError: theirs, ratio: null, maxDiff: null, top5: null, top1, ortTop1: null, threads, workerRanges, ortThreads, digest })
  let maxDiff = 0
  for (let i = 0; i < mine.length; i++) maxDiff = Math.max(maxDiff, Math.abs(Number(mine[i]) - Number(theirs.data[i])))
  const a = topK(mine, 5)
  const b = new Set(topK(theirs.data, 5))
  post({ type: "ran", oursMs, ortMs: theirs.ms, ratio: oursMs / theirs.ms, maxDiff, top5: a.filter((i) => b.has(i)).length, top1, ortTop1: topK(theirs.data, 1)[0], threads, workerRanges, ortThreads, digest })
}

scope.onmessage = (e) => {
  const r = e.data
  const work = r.type === "compile" ? compile(r) : run(r)
  work.catch((err: unknown) => post({ type: "error", message: errorLine(r.type === "compile" ? "compile" : "run", err, r.type === "compile" ? { model: r.name } : {}) }))
}
