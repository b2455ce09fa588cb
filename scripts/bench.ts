// npm run bench — Tessera's c target against onnxruntime-node on the zoo's networks (batch 1,
// fp32) at 1 and 2 threads, and its wasm target against onnxruntime-web's wasm backend (1 thread)
// on ResNet-18 and MobileNetV2, in one run on one machine: medians after warm-up, each c / ort
// ratio and their geometric mean per thread count, the fraction of this CPU's peak FLOP rate
// (measured here with a small FMA kernel), and per-layer tables of the c and wasm targets on
// ResNet-18. Each thread count runs in its own process (OpenMP reads its thread count once).
// Speed is reported, never asserted.
//
// The networks: every zoo entry but the MLP and the one-layer BERT (bert-base stands for it);
// `--models a,b` (or BENCH_MODELS=a,b) picks some. BENCH_RUNS sets the timed runs (10).
// `--int8`: the int8 benchmark instead (scripts/bench-int8.ts).
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { allocate } from "../src/ast/graph/dtype.js"
import { prng } from "../src/ast/graph/arbitrary.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { paramsOf } from "../src/ast/tir/analysis.js"
import { BACKENDS } from "../src/backend/index.js"
import type { DeviceModule } from "../src/device/device.js"
import { peakGflops } from "../src/device/peak.js"
import { hostCpu } from "../src/device/host.js"
import type { Program } from "../src/lowering/program.js"
import { alternateRuns, loadOrt, median, openOrtSession, runOrt, type OrtResult } from "../src/device/onnxruntime.js"
import { loadOrtWeb, runOrtWeb } from "../src/device/onnxruntime-web.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { nodeFlops } from "../src/rewrite/report.js"
import { bindSync } from "../src/ast/graph/infer.js"
import { isZooName, ZOO_NAMES, zooGraph, zooModel, type ZooName } from "../src/zoo/index.js"
import { benchInt8 } from "./bench-int8.js"

/** The whole zoo but the toys: the MLP, and the one-layer BERT that bert-base contains twelve times. */
const ZOO_BENCH: readonly ZooName[] = ZOO_NAMES.filter((n) => n !== "mlp" && n !== "bert")
/** The wasm target (and onnxruntime-web) runs these alone: ViT-B/16 would take minutes a run there. */
const WASM_MODELS: ReadonlySet<ZooName> = new Set(["resnet18", "mobilenetv2"])
/** The c target's vector width on this CPU (what `tessera compile` uses): AVX-512 16, AVX2 8. */
const C_LANES = Math.max(1, hostCpu().vectorLanes)
const RUNS = Number(process.env.BENCH_RUNS ?? 10)
const args = process.argv.slice(2)
const childThreads = args.includes("--child") ? Number(args[args.indexOf("--child") + 1]) : undefined
const picked = args.includes("--models") ? args[args.indexOf("--models") + 1] : process.env.BENCH_MODELS
const MODELS: readonly ZooName[] = picked
  ? picked.split(",").map((n) => {
      const name = n.trim()
      if (!isZooName(name)) throw new Error(`--models: unknown zoo model '${name}'; known: ${ZOO_NAMES.join(", ")}`)
      return name
    })
  : ZOO_BENCH

const randomInput = (shape: readonly number[]): Tensor => {
  const r = prng(1)
  const n = shape.reduce((a, b) => a * b, 1)
  const d = allocate("float32", n)
  for (let i = 0; i < n; i++) d[i] = r.float(-1, 1)
  return { dtype: "float32", shape, data: d }
}

const time = (f: () => void, runs: number): number => {
  f()
  const ts: number[] = []
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now()
    f()
    ts.push(performance.now() - t0)
  }
  return median(ts)
}

interface Row {
  readonly model: string
  readonly threads: number
  readonly c?: number
  readonly wasm?: number
  /** Threads the wasm kernels ran on (1 where the host has no threads). */
  readonly wasmThreads?: number
  readonly ort?: number
  /** onnxruntime-web, wasm backend, 1 thread (1-thread rows only). */
  readonly ortWeb?: number
  /** Largest |wasm - onnxruntime-web| over the outputs. */
  readonly wasmDiff?: number
  /** Largest |c - onnxruntime-node| over the outputs. */
  readonly cDiff?: number
  /** Why the network did not build or run, when it did not. */
  readonly error?: string
  readonly flops: number
}

/**
 * Each compiled group of a program alone, on buffers of its device module (the c target's 64-byte
 * aligned, as the executor places them; wasm's in the module's memory): name, ops, ms, GFLOP/s
 * (the per-layer table's lines).
 */
const perLayer = (program: Program, mod: DeviceModule): string[] => {
  const byName = new Map(program.graph.nodes.map((n) => [n.name, n]))
  return program.kernels.flatMap((k) => {
    if (k.kind !== "compiled") return []
    const params = paramsOf(k.func)
    const blocks = mod.reserve(params.map((p) => p.elements * allocate(p.dtype, 1).BYTES_PER_ELEMENT))
    const args = params.map((p, j) => mod.view(blocks[j], p.dtype, p.elements))
    const ms = mod.time(k.name, args, { repeats: 3, minMs: 0 }) * 1000
    const grp = program.fused.groups[k.group]
    const fl = grp.nodes.reduce((s, n) => s + nodeFlops(program.graph, byName.get(n)!), 0)
    return [`${k.name}\t${grp.ops.join("+")}\t${ms.toFixed(2)} ms\t${(fl / ms / 1e6).toFixed(1)} GFLOP/s`]
  })
}

const maxAbsDiff = (ours: ReadonlyMap<string, Tensor>, theirs: OrtResult["outputs"]): number => {
  let m = 0
  for (const [name, t] of theirs) {
    const o = ours.get(name)
    if (!o || o.data.length !== t.data.length) return Infinity
    for (let i = 0; i < t.data.length; i++) m = Math.max(m, Math.abs(Number(o.data[i]) - t.data[i]))
  }
  return m
}

interface Measured {
  readonly rows: Row[]
  readonly layers: string[]
  readonly wasmLayers: string[]
  readonly ortWebError?: string
}

const measure = async (threads: number): Promise<Measured> => {
  const ort = await Effect.runPromise(loadOrt())
  const ortWeb = threads === 1 ? await Effect.runPromise(loadOrtWeb()) : undefined
  const rows: Row[] = []
  const layers: string[] = []
  const wasmLayers: string[] = []
  let ortWebError: string | undefined
  for (const name of MODELS) {
    const graph = zooGraph(name, 0)
    const bytes = zooModel(name, 0)
    const input = graph.inputs[0]
    const feeds = new Map([[input.name, randomInput(input.type.shape as number[])]])
    const row: { -readonly [K in keyof Row]: Row[K] } = { model: name, threads, flops: 0 }
    // one network that fails to build or run is reported on its row; the others still run
    try {
      if (BACKENDS.c.unavailable() === undefined) {
        const target = BACKENDS.c.target(hostCpu(), threads)
        const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
        // (the network's own count: a compiled conv whose channels are padded to whole blocks computes more)
        const bound = bindSync(graph)
        row.flops = bound.nodes.reduce((s, n) => s + nodeFlops(bound, n), 0)
        const exec = await Effect.runPromise(loadProgram(program, target, { threads }))
        // c and onnxruntime-node alternate (one open session): this shared machine's slow spells
        // last seconds, and timing one side after the other put them on either side
        const session = typeof ort === "string" ? ort : await Effect.runPromise(openOrtSession(ort, bytes, feeds, threads))
        const first = exec.run(feeds)
        try {
          const timed = await alternateRuns(() => void exec.run(feeds), typeof session === "string" ? undefined : session, RUNS)
          row.c = median(timed.ours)
          if (timed.theirs.length) row.ort = median(timed.theirs)
          // a ratio means something only where both computed the same thing
          if (typeof session !== "string") row.cDiff = maxAbsDiff(first, session.outputs())
        } finally {
          if (typeof session !== "string") await session.release()
        }
        // where the time goes: each compiled group alone
        if (threads === 1 && name === "resnet18") layers.push(...perLayer(program, exec.module))
        exec.module.close()
      }
      if (WASM_MODELS.has(name)) {
        // the schedule does not depend on the thread count: workers run the parallel phases
        const target = BACKENDS.wasm.target(hostCpu(), threads)
        const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
        const exec = await Effect.runPromise(loadProgram(program, target, { threads }))
        row.wasm = time(() => exec.run(feeds), Math.max(3, Math.floor(RUNS / 3)))
        row.wasmThreads = exec.module.threads ?? 1
        if (threads === 1 && name === "resnet18") wasmLayers.push(...perLayer(program, exec.module))
        if (threads === 1 && ortWeb !== undefined && typeof ortWeb !== "string") {
          const r = await Effect.runPromise(runOrtWeb(ortWeb, bytes, feeds, { runs: RUNS }))
          if (typeof r !== "string") {
            row.ortWeb = r.ms
            row.wasmDiff = maxAbsDiff(exec.run(feeds), r.outputs)
          } else ortWebError = r
        } else if (typeof ortWeb === "string") ortWebError = ortWeb
        exec.module.close()
      }
      if (row.ort === undefined && typeof ort !== "string") {
        const r = await Effect.runPromise(runOrt(ort, bytes, feeds, { threads, runs: RUNS }))
        if (typeof r !== "string") row.ort = r.ms
      }
    } catch (e) {
      row.error = (e instanceof Error ? e.message : String(e)).split("\n")[0].slice(0, 300)
    }
    rows.push(row)
  }
  return { rows, layers, wasmLayers, ...(ortWebError ? { ortWebError } : {}) }
}

if (args.includes("--int8")) await benchInt8(args)
else if (childThreads !== undefined) {
  const result = await measure(childThreads)
  console.log(JSON.stringify(result))
} else {
  const peak = peakGflops(C_LANES)
  const all: Row[] = []
  let layers: string[] = []
  let wasmLayers: string[] = []
  let ortWebError: string | undefined
  for (const threads of [1, 2]) {
    const r = spawnSync(process.execPath, [process.argv[1], "--child", String(threads), "--models", MODELS.join(",")], {
      env: { ...process.env, OMP_NUM_THREADS: String(threads) },
      encoding: "utf8",
      maxBuffer: 64 << 20,
    })
    const last = r.stdout.trim().split("\n").pop() ?? ""
    try {
      const parsed = JSON.parse(last) as Measured
      all.push(...parsed.rows)
      if (threads === 1) layers = parsed.layers
      if (threads === 1) {
        wasmLayers = parsed.wasmLayers
        ortWebError = parsed.ortWebError
      }
    } catch {
      console.log(`the ${threads}-thread run failed:\n${r.stderr.slice(-2000)}`)
    }
  }
  const f = (x: number | undefined) => (x === undefined ? "-" : x.toFixed(1))
  console.log(`peak fp32 (one core, measured): ${peak ? `${peak.toFixed(0)} GFLOP/s` : "unknown (no gcc)"}`)
  console.log("| model | threads | tessera c ms | onnxruntime-node ms | c / ort | c max abs diff | tessera wasm ms | c GFLOP/s | % of peak |")
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
  for (const r of all) {
    const gf = r.c ? r.flops / r.c / 1e6 : undefined
    const pct = gf && peak ? (100 * gf) / (peak * r.threads) : undefined
    console.log(`| ${r.model} | ${r.threads} | ${f(r.c)} | ${f(r.ort)} | ${r.c && r.ort ? (r.c / r.ort).toFixed(2) : "-"} | ${r.cDiff === undefined ? "-" : r.cDiff.toExponential(1)} | ${f(r.wasm)} | ${f(gf)} | ${f(pct)} |`)
  }
  for (const r of all) if (r.error) console.log(`${r.model}, ${r.threads} thread${r.threads > 1 ? "s" : ""}: failed: ${r.error}`)
  // the geometric mean of c / ort per thread count, over the models that have both
  for (const threads of [1, 2]) {
    const ratios = all.filter((r) => r.threads === threads && r.c && r.ort).map((r) => r.c! / r.ort!)
    const geo = ratios.length ? Math.exp(ratios.reduce((a, x) => a + Math.log(x), 0) / ratios.length) : undefined
    console.log(`geometric mean c / ort, ${threads} thread${threads > 1 ? "s" : ""}: ${geo === undefined ? "-" : geo.toFixed(2)} over ${ratios.length} of ${MODELS.length} models`)
  }
  if (layers.length) console.log(`\nresnet18, c, 1 thread, per fused group:\n${layers.join("\n")}`)
  console.log("\n| model | threads | tessera wasm ms | onnxruntime-web (wasm, 1 thread) ms | wasm / ort-web | max abs diff |")
  console.log("| --- | ---: | ---: | ---: | ---: | ---: |")
  // onnxruntime-web runs on 1 thread: each row is compared with its 1-thread time
  const ortWeb = new Map(all.filter((r) => r.threads === 1).map((r) => [r.model, r.ortWeb] as const))
  const order = (m: string) => MODELS.indexOf(m as ZooName)
  for (const r of [...all].filter((r) => r.wasm !== undefined).sort((a, b) => order(a.model) - order(b.model) || a.threads - b.threads)) {
    const web = ortWeb.get(r.model)
    console.log(`| ${r.model} | ${r.wasmThreads ?? r.threads} | ${f(r.wasm)} | ${f(web)} | ${r.wasm && web ? (r.wasm / web).toFixed(2) : "-"} | ${r.wasmDiff === undefined ? "-" : r.wasmDiff.toExponential(1)} |`)
  }
  if (ortWebError) console.log(`${ortWebError}: the wasm target is reported without its counterpart.`)
  if (wasmLayers.length) console.log(`\nresnet18, wasm, 1 thread, per fused group:\n${wasmLayers.join("\n")}`)
}
