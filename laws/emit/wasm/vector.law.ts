// The wasm emitter's vector loops (src/emit/wasm/vector.ts): a bounds-guarded read (a select whose
// arm loads) that recurs in a straight-line region — the unrolled taps of a padded conv, where
// column c's tap k reads what column c + 1's tap k − 1 reads — is computed once and its local
// reused, as an unguarded load is. Law: depthwise blocked convolutions of random shapes, strides and padding
// at the conv rule's defaults with the padding read through guards (pad_root off, the taps
// unrolled), emitted for wasm with and without the reuse, run, equal the TE evaluator; and the reuse
// happens (fewer guarded reads emitted, never more).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { allocate } from "../../../src/ast/graph/dtype.js"
import { sizeOf, type Tensor } from "../../../src/ast/graph/tensor.js"
import { prng } from "../../../src/ast/graph/arbitrary.js"
import { fromArray } from "../../../src/ast/graph/tensor.js"
import { add, and, c, f32, ge, lt, max, min, mul, select, sub } from "../../../src/ast/te/expr.js"
import { at, compute, placeholder, reduceAxis, sum, type ComputeTensor } from "../../../src/ast/te/tensor.js"
import { evaluateTE } from "../../../src/ast/te/evaluate.js"
import type { PrimFunc } from "../../../src/ast/tir/tir.js"
import { loadWasmModuleSync } from "../../../src/device/wasm/load.js"
import { emitWasmModule } from "../../../src/emit/wasm/emit.js"
import { baseSchedule } from "../../../src/lowering/lower-group.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { templateFor } from "../../../src/lowering/templates/template-for.js"
import { cpuTirPipeline } from "../../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { assertAllClose, lawParams } from "../../support.js"

/** Runs kernel `k` of a module on named tensors: params in order, outputs allocated. */
const run = (bytes: ReturnType<typeof emitWasmModule>, f: PrimFunc, inputs: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
  const fn = loadWasmModuleSync(bytes.bytes, bytes.kernels).get("k")!
  const arrays = f.params.map((p) => inputs.get(p.name)?.data.slice() ?? allocate(p.dtype, sizeOf(p.view?.shape ?? p.shape)))
  fn(...arrays)
  return new Map(f.params.map((p, k) => [p.name, { dtype: p.dtype, shape: p.view?.shape ?? p.shape, data: arrays[k] }] as const))
}

/**
 * A depthwise conv in NCHW4c as the op library writes it (one input channel a group: its reduction
 * over a channel axis of 1 and the taps; input block and lane those of the output), zero padding
 * read through a select, and optionally ReLU6 after it (MobileNetV2's).
 */
const depthwiseCase = (seed: number, o: { CB: number; H: number; W: number; K: number; stride: number; pad: number; clip: boolean }) => {
  const rng = prng(seed)
  const X = placeholder("X", [1, o.CB, o.H, o.W, 4])
  const Wt = placeholder("W", [o.CB, 1, o.K, o.K, 1, 4])
  const inputs = new Map<string, Tensor>([X, Wt].map((p) => [p.name, fromArray("float32", p.shape, Array.from({ length: sizeOf(p.shape) }, () => rng.float(-1, 1)))] as const))
  const [OH, OW] = [Math.floor((o.H + 2 * o.pad - o.K) / o.stride) + 1, Math.floor((o.W + 2 * o.pad - o.K) / o.stride) + 1]
  const padded = compute("pad", [1, o.CB, o.H + 2 * o.pad, o.W + 2 * o.pad, 4], (n, cb, y, x, l) => {
    const [iy, ix] = [sub(y, c(o.pad)), sub(x, c(o.pad))]
    return select(and(and(ge(iy, c(0)), lt(iy, c(o.H))), and(ge(ix, c(0)), lt(ix, c(o.W)))), at(X, n, cb, iy, ix, l), f32(0))
  })
  const ic = reduceAxis(1, "ic")
  const ry = reduceAxis(o.K, "ry")
  const rx = reduceAxis(o.K, "rx")
  const conv = compute("conv", [1, o.CB, OH, OW, 4], (n, cb, y, x, l) =>
    sum(mul(at(padded, n, add(cb, ic.var), add(mul(y, c(o.stride)), ry.var), add(mul(x, c(o.stride)), rx.var), l), at(Wt, cb, ic.var, ry.var, rx.var, c(0), l)), [ic, ry, rx]), "float32", "conv2d_nchwc")
  const outputs: ComputeTensor[] = [o.clip ? compute("relu6", conv.shape, (...i) => min(max(at(conv, ...i), f32(0)), f32(6))) : conv]
  return { outputs, inputs }
}

describe("wasm vector loops: a recurring guarded read computed once", () => {
  it("padded depthwise blocked convs read through guards, their taps unrolled, emitted for wasm with and without the reuse equal the TE evaluator; the reuse emits fewer guarded reads, never more", () => {
    let reused = 0
    fc.assert(
      fc.property(
        fc.record({
          CB: fc.integer({ min: 1, max: 3 }),
          H: fc.integer({ min: 2, max: 10 }),
          W: fc.integer({ min: 2, max: 10 }),
          K: fc.constantFrom(2, 3),
          stride: fc.integer({ min: 1, max: 2 }),
          pad: fc.integer({ min: 1, max: 2 }),
          clip: fc.boolean(),
          wasm: fc.boolean(),
          seed: fc.nat(),
        }),
        (o) => {
          fc.pre(o.W + 2 * o.pad >= o.K && o.H + 2 * o.pad >= o.K)
          const cc = depthwiseCase(o.seed, o)
          const base = baseSchedule(cc.outputs)
          const t = templateFor(base)
          const knobs = t.space(cc.outputs, base)
          const target = o.wasm ? { vectorLanes: 4, cores: 1, vectorRegisters: 16, fmaUnits: 1, fmaLatency: 4, fusedMultiplyAdd: false } : { vectorLanes: 4, cores: 1, vectorRegisters: 16, fmaUnits: 2, fmaLatency: 4 }
          const d = { ...t.defaults(knobs, target) }
          // the padding read through guards, the taps unrolled (where the space has those knobs)
          if (knobs.some((k) => k.name === "pad_root")) d.pad_root = false
          for (const k of ["unroll_kh", "unroll_kw"]) if (knobs.some((x) => x.name === k)) d[k] = true
          const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(cc.outputs, base, d)))
          const want = evaluateTE(cc.outputs, cc.inputs)
          const guards = (em: ReturnType<typeof emitWasmModule>) => em.module.funcs[0].code.filter((x) => x.op === "if" && x.t === "v128").length
          const each = [true, false].map((reuse) => {
            const em = emitWasmModule([{ name: "k", func: f }], { reuseGuardedReads: reuse })
            const outs = run(em, f, cc.inputs)
            assertAllClose(cc.outputs.map((x) => outs.get(x.name)!), want, 1e-4, 1e-5)
            return guards(em)
          })
          // guarded vector reads emitted (if … (result v128)): never more with the reuse than without
          expect(each[0]).toBeLessThanOrEqual(each[1])
          if (each[0] < each[1]) reused++
        },
      ),
      lawParams(60),
    )
    // (the cases share guarded reads between unrolled taps: the law sees the cache at work)
    expect(reused).toBeGreaterThan(0)
  })
})
