// npm run int8-check — the standard ONNX integer ops (QLinearConv, QLinearMatMul, ConvInteger,
// MatMulInteger, DynamicQuantizeLinear) on hand-built models with seeded weights, zero points and
// scales: Tessera's js, wasm and c targets against onnxruntime-node on the same bytes, compared
// element by element (the largest difference in output LSBs and how many elements differ).
// With --bench: a quantized 3×3 conv (64 → 64 at 56×56, int8, per-channel) and a QLinearMatMul
// [1, 128, 768] × [768, 768] timed on Tessera c against onnxruntime-node and against Tessera's own
// fp32 Conv / MatMul of the same shapes, runs alternating, medians. Speed is reported, never asserted.
//
//   npm run int8-check -- [--targets c,js,wasm] [--bench] [--threads 1] [--runs 21]
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect } from "effect"
import { attr, type Attrs } from "../src/ast/graph/attrs.js"
import { allocate, type DType } from "../src/ast/graph/dtype.js"
import type { Graph } from "../src/ast/graph/graph.js"
import { fromArray, sizeOf, type Tensor } from "../src/ast/graph/tensor.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { BACKENDS } from "../src/backend/index.js"
import { hostCpu } from "../src/device/host.js"
import { alternateRuns, loadOrt, median, openOrtSession, runOrt } from "../src/device/onnxruntime.js"
import { peakGflops } from "../src/device/peak.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { NetBuilder } from "../src/zoo/builder.js"

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : d
}
const THREADS = Number(arg("threads", "1"))
process.env.OMP_NUM_THREADS = String(THREADS)
const RUNS = Number(arg("runs", "21"))
const TARGETS = arg("targets", "c,js,wasm").split(",") as ("c" | "js" | "wasm")[]
const BENCH = process.argv.includes("--bench")
/** --save DIR: each case's model written there (case name with spaces as dashes), to inspect with the CLI. */
const SAVE = arg("save", "")

/** A seeded stream of integers in [lo, hi] and floats in [lo, hi). */
const stream = (seed: number) => {
  let s = seed >>> 0 || 1
  const next = () => {
    s ^= s << 13
    s >>>= 0
    s ^= s >>> 17
    s ^= s << 5
    s >>>= 0
    return s / 4294967296
  }
  return { int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)), real: (lo: number, hi: number) => Math.fround(lo + next() * (hi - lo)) }
}
const ints = (dtype: DType, shape: readonly number[], r: ReturnType<typeof stream>, lo: number, hi: number): Tensor =>
  fromArray(dtype, shape, Array.from({ length: sizeOf(shape) }, () => r.int(lo, hi)))
const reals = (shape: readonly number[], r: ReturnType<typeof stream>, lo: number, hi: number): Tensor =>
  fromArray("float32", shape, Array.from({ length: sizeOf(shape) }, () => r.real(lo, hi)))
const range = (d: DType): [number, number] => (d === "int8" ? [-128, 127] : [0, 255])

interface QConv {
  readonly x: DType
  readonly w: DType
  readonly y: DType
  readonly c: number
  readonly m: number
  readonly hw: number
  readonly k: number
  readonly stride?: number
  readonly pad?: number
  readonly group?: number
  readonly perChannel: boolean
  readonly bias: boolean
  readonly wzp?: number
}

/** x → QLinearConv → y, weights and parameters seeded (opset 13). */
const qconv = (name: string, s: QConv, seed: number): Graph => {
  const r = stream(seed)
  const b = new NetBuilder(seed, 13)
  const x = b.input("x", { dtype: s.x, shape: [1, s.c, s.hw, s.hw] })
  const [xl, xh] = range(s.x)
  const [wl, wh] = range(s.w)
  const [yl, yh] = range(s.y)
  const g = s.group ?? 1
  const m = s.m
  const k = s.k
  const st = s.stride ?? 1
  const p = s.pad ?? 0
  const out = Math.floor((s.hw + 2 * p - k) / st) + 1
  const scales = s.perChannel ? reals([m], r, 0.002, 0.02) : reals([], r, 0.002, 0.02)
  const wzp = s.perChannel ? fromArray(s.w, [m], new Array(m).fill(s.wzp ?? 0)) : fromArray(s.w, [], [s.wzp ?? 0])
  const inputs = [
    x,
    b.constant("x_scale", reals([], r, 0.01, 0.05)),
    b.constant("x_zp", fromArray(s.x, [], [r.int(xl + 10, xh - 10)])),
    b.constant("w", ints(s.w, [m, s.c / g, k, k], r, wl, wh)),
    b.constant("w_scale", scales),
    b.constant("w_zp", wzp),
    b.constant("y_scale", reals([], r, 0.05, 0.3)),
    b.constant("y_zp", fromArray(s.y, [], [r.int(yl + 20, yh - 20)])),
    ...(s.bias ? [b.constant("bias", ints("int32", [m], r, -2000, 2000))] : []),
  ]
  const attrs: Attrs = { kernel_shape: attr.ints([k, k]), strides: attr.ints([st, st]), pads: attr.ints([p, p, p, p]), group: attr.int(g) }
  const y = b.op("QLinearConv", inputs, "y", attrs)
  return b.build(name, [{ name: y, type: { dtype: s.y, shape: [1, m, out, out] } }])
}

/** a [1, rows, k] → QLinearMatMul with a constant b [k, n] → y (opset 13). */
const qmatmul = (name: string, a: DType, bt: DType, y: DType, rows: number, k: number, n: number, perColumn: boolean, seed: number): Graph => {
  const r = stream(seed)
  const b = new NetBuilder(seed, 13)
  const x = b.input("a", { dtype: a, shape: [1, rows, k] })
  const [al, ah] = range(a)
  const [bl, bh] = range(bt)
  const [yl, yh] = range(y)
  const inputs = [
    x,
    b.constant("a_scale", reals([], r, 0.01, 0.05)),
    b.constant("a_zp", fromArray(a, [], [r.int(al + 10, ah - 10)])),
    b.constant("b", ints(bt, [k, n], r, bl, bh)),
    b.constant("b_scale", perColumn ? reals([n], r, 0.002, 0.02) : reals([], r, 0.002, 0.02)),
    b.constant("b_zp", perColumn ? fromArray(bt, [n], new Array(n).fill(0)) : fromArray(bt, [], [bt === "uint8" ? r.int(100, 150) : 0])),
    b.constant("y_scale", reals([], r, 0.2, 1)),
    b.constant("y_zp", fromArray(y, [], [r.int(yl + 20, yh - 20)])),
  ]
  const out = b.op("QLinearMatMul", inputs, "y")
  return b.build(name, [{ name: out, type: { dtype: y, shape: [1, rows, n] } }])
}

const CASES: { readonly [name: string]: () => Graph } = {
  "qlinearconv u8·s8 per-channel pad": () => qconv("qc1", { x: "uint8", w: "int8", y: "uint8", c: 8, m: 16, hw: 11, k: 3, pad: 1, perChannel: true, bias: true }, 11),
  "qlinearconv s8·s8 per-channel stride 2": () => qconv("qc2", { x: "int8", w: "int8", y: "int8", c: 12, m: 20, hw: 13, k: 3, stride: 2, pad: 1, perChannel: true, bias: true }, 12),
  "qlinearconv u8·u8 per-tensor w_zp": () => qconv("qc3", { x: "uint8", w: "uint8", y: "uint8", c: 6, m: 10, hw: 9, k: 3, perChannel: false, bias: false, wzp: 131 }, 13),
  "qlinearconv s8 depthwise": () => qconv("qc4", { x: "int8", w: "int8", y: "int8", c: 16, m: 16, hw: 10, k: 3, pad: 1, group: 16, perChannel: true, bias: true }, 14),
  // (output rows at most half a vector, whole blocks of 16 channels: the channels-in-lanes form on c with AVX-512)
  "qlinearconv s8 depthwise 7² channels in lanes": () => qconv("qc11", { x: "int8", w: "int8", y: "int8", c: 32, m: 32, hw: 7, k: 3, pad: 1, group: 32, perChannel: true, bias: true }, 24),
  "qlinearconv u8 depthwise 14² / 2 channels in lanes": () => qconv("qc12", { x: "uint8", w: "int8", y: "uint8", c: 16, m: 16, hw: 14, k: 3, stride: 2, pad: 1, group: 16, perChannel: true, bias: true }, 25),
  "qlinearconv u8 depthwise 14² window, grid rounded to whole vectors": () => qconv("qc13", { x: "uint8", w: "int8", y: "uint8", c: 16, m: 16, hw: 14, k: 3, pad: 1, group: 16, perChannel: true, bias: true }, 26),
  "qlinearconv u8·s8 grouped stride 2": () => qconv("qc6", { x: "uint8", w: "int8", y: "uint8", c: 12, m: 8, hw: 11, k: 3, stride: 2, pad: 1, group: 4, perChannel: true, bias: true }, 16),
  // (rows of 16 or more output pixels at stride 1: the pixels-in-lanes grid form on c with VNNI)
  "qlinearconv u8·s8 3×3 grid pad": () => qconv("qc7", { x: "uint8", w: "int8", y: "uint8", c: 12, m: 24, hw: 20, k: 3, pad: 1, perChannel: true, bias: true }, 17),
  "qlinearconv s8·s8 3×3 grid": () => qconv("qc8", { x: "int8", w: "int8", y: "int8", c: 5, m: 16, hw: 18, k: 3, perChannel: true, bias: true }, 18),
  // (strided, rows of 16 or more output pixels: the grid over the stride's phases — a 3×3 / 2 stem over 3 channels, a 7×7 / 2 one)
  "qlinearconv u8·s8 3×3 / 2 grid": () => qconv("qc9", { x: "uint8", w: "int8", y: "uint8", c: 3, m: 20, hw: 35, k: 3, stride: 2, pad: 1, perChannel: true, bias: true }, 19),
  "qlinearconv s8·s8 7×7 / 2 grid": () => qconv("qc10", { x: "int8", w: "int8", y: "int8", c: 5, m: 16, hw: 63, k: 7, stride: 2, pad: 3, perChannel: true, bias: true }, 20),
  "qlinearconv u8·s8 1×1": () => qconv("qc5", { x: "uint8", w: "int8", y: "uint8", c: 32, m: 24, hw: 7, k: 1, perChannel: true, bias: true }, 15),
  "qlinearmatmul u8·s8 per-column": () => qmatmul("qm1", "uint8", "int8", "uint8", 9, 40, 24, true, 21),
  "qlinearmatmul s8·s8": () => qmatmul("qm2", "int8", "int8", "int8", 5, 33, 17, false, 22),
  "qlinearmatmul u8·u8 b_zp": () => qmatmul("qm3", "uint8", "uint8", "uint8", 7, 29, 13, false, 23),
  "convinteger u8·u8 zero points": () => {
    const r = stream(31)
    const b = new NetBuilder(31, 13)
    const x = b.input("x", { dtype: "uint8", shape: [1, 5, 8, 8] })
    const y = b.op("ConvInteger", [x, b.constant("w", ints("uint8", [7, 5, 3, 3], r, 0, 255)), b.constant("x_zp", fromArray("uint8", [], [117])), b.constant("w_zp", fromArray("uint8", [], [140]))], "y", {
      pads: attr.ints([1, 1, 1, 1]),
    })
    return b.build("ci", [{ name: y, type: { dtype: "int32", shape: [1, 7, 8, 8] } }])
  },
  "matmulinteger u8·s8 zero points": () => {
    const r = stream(32)
    const b = new NetBuilder(32, 13)
    const a = b.input("a", { dtype: "uint8", shape: [2, 6, 21] })
    const y = b.op("MatMulInteger", [a, b.constant("b", ints("int8", [21, 11], r, -128, 127)), b.constant("a_zp", fromArray("uint8", [], [99])), b.constant("b_zp", fromArray("int8", [], [-3]))], "y")
    return b.build("mi", [{ name: y, type: { dtype: "int32", shape: [2, 6, 11] } }])
  },
  dynamicquantizelinear: () => {
    const b = new NetBuilder(33, 13)
    const x = b.input("xf", { dtype: "float32", shape: [3, 50] })
    const outs = b.ops("DynamicQuantizeLinear", [x], "dq", 3)
    return b.build("dql", [
      { name: outs[0], type: { dtype: "uint8", shape: [3, 50] } },
      { name: outs[1], type: { dtype: "float32", shape: [] } },
      { name: outs[2], type: { dtype: "uint8", shape: [] } },
    ])
  },
}

/** Seeded inputs over the whole 8-bit range (floats in [−3, 5)). */
const feedsOf = (g: Graph, seed: number): Map<string, Tensor> => {
  const r = stream(seed)
  return new Map(
    g.inputs.map((i) => {
      const shape = i.type.shape as number[]
      const d = i.type.dtype
      return [i.name, d === "float32" ? reals(shape, r, -3, 5) : ints(d, shape, r, ...range(d))] as const
    }),
  )
}

const run = <A, E>(eff: Effect.Effect<A, E>) => Effect.runPromise(eff as Effect.Effect<A, never>)
const cpu = hostCpu()
const ort = await run(loadOrt())
if (typeof ort === "string") throw new Error(ort)

let worst = 0
if (!BENCH) {
  console.log("| case | target | compiled kernels | fallback | elements | differing | max |diff| (LSB) |")
  console.log("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
  for (const [name, make] of Object.entries(CASES)) {
    const graph = make()
    if (SAVE) fs.writeFileSync(path.join(SAVE, `${name.replace(/[^A-Za-z0-9]+/g, "-")}.onnx`), encodeOnnx(graph))
    const feeds = feedsOf(graph, 7)
    const ref = await run(runOrt(ort, encodeOnnx(graph), feeds, { threads: 1, runs: 1 }))
    if (typeof ref === "string") throw new Error(`${name}: onnxruntime: ${ref}`)
    for (const t of TARGETS) {
      const target = BACKENDS[t].target(cpu, 1)
      const program = await run(compileGraph(graph, target, { optLevel: 3 }))
      const exec = await run(loadProgram(program, target, { threads: 1 }))
      const outs = exec.run(feeds)
      let n = 0
      let bad = 0
      let max = 0
      for (const o of graph.outputs) {
        const want = ref.outputs.get(o.name)!.data
        const got = outs.get(o.name)!.data as ArrayLike<number>
        for (let i = 0; i < want.length; i++) {
          const d = Math.abs(got[i] - want[i])
          n++
          if (d !== 0) bad++
          max = Math.max(max, d)
        }
      }
      worst = Math.max(worst, max)
      const compiled = program.kernels.filter((k) => k.kind === "compiled").length
      console.log(`| ${name} | ${t} | ${compiled} | ${program.kernels.length - compiled} | ${n} | ${bad} | ${max} |`)
      exec.module.close?.()
    }
  }
  console.log(worst === 0 ? "every output equals onnxruntime's bit for bit" : `largest difference: ${worst}`)
  if (worst !== 0) process.exitCode = 1
} else {
  const peak = peakGflops(Math.max(1, cpu.vectorLanes))
  console.log(
    `CPU: ${cpu.isa}${cpu.vnni ? " + VNNI" : ""}, ${cpu.vectorLanes} lanes; peak fp32 one core (measured): ${peak ? `${peak.toFixed(0)} GFLOP/s` : "unknown"}; ${THREADS} thread(s), ${RUNS} runs, medians`,
  )
  const fconv = (): Graph => {
    const b = new NetBuilder(5, 13)
    const x = b.input("x", { dtype: "float32", shape: [1, 64, 56, 56] })
    const y = b.op("Conv", [x, b.normal("w", [64, 64, 3, 3], 0.05), b.normal("bias", [64], 0.1)], "y", { pads: attr.ints([1, 1, 1, 1]) })
    return b.build("fconv", [{ name: y, type: { dtype: "float32", shape: [1, 64, 56, 56] } }])
  }
  const fmatmul = (): Graph => {
    const b = new NetBuilder(6, 13)
    const x = b.input("a", { dtype: "float32", shape: [1, 128, 768] })
    const y = b.op("MatMul", [x, b.normal("b", [768, 768], 0.03)], "y")
    return b.build("fmm", [{ name: y, type: { dtype: "float32", shape: [1, 128, 768] } }])
  }
  const BENCHES: readonly (readonly [string, () => Graph, number])[] = [
    ["qlinearconv 64→64 3×3 56×56 u8·s8 per-channel", () => qconv("bq", { x: "uint8", w: "int8", y: "uint8", c: 64, m: 64, hw: 56, k: 3, pad: 1, perChannel: true, bias: true }, 41), 2 * 64 * 64 * 9 * 56 * 56],
    ["conv fp32 same shape", fconv, 2 * 64 * 64 * 9 * 56 * 56],
    ["qlinearmatmul [1,128,768]×[768,768] u8·s8", () => qmatmul("bm", "uint8", "int8", "uint8", 128, 768, 768, false, 42), 2 * 128 * 768 * 768],
    ["matmul fp32 same shape", fmatmul, 2 * 128 * 768 * 768],
  ]
  console.log("| case | tessera c ms | onnxruntime-node ms | c / ort | c GOP/s |")
  console.log("| --- | ---: | ---: | ---: | ---: |")
  const target = BACKENDS.c.target(cpu, THREADS)
  for (const [name, make, ops] of BENCHES) {
    const graph = make()
    if (SAVE) fs.writeFileSync(path.join(SAVE, `bench-${name.replace(/[^A-Za-z0-9]+/g, "-")}.onnx`), encodeOnnx(graph))
    const feeds = feedsOf(graph, 9)
    const program = await run(compileGraph(graph, target, { optLevel: 3 }))
    const exec = await run(loadProgram(program, target, { threads: THREADS }))
    const session = await run(openOrtSession(ort, encodeOnnx(graph), feeds, THREADS))
    if (typeof session === "string") throw new Error(session)
    const into = new Map(program.graph.outputs.map((o) => [o.name, allocate(o.type.dtype, sizeOf(o.type.shape as number[]))] as const))
    exec.run(feeds, into)
    const timed = await alternateRuns(() => void exec.run(feeds, into), session, RUNS)
    await session.release()
    exec.module.close?.()
    const [ours, theirs] = [median(timed.ours), median(timed.theirs)]
    console.log(`| ${name} | ${ours.toFixed(3)} | ${theirs.toFixed(3)} | ${(ours / theirs).toFixed(2)} | ${(ops / ours / 1e6).toFixed(1)} |`)
  }
}
