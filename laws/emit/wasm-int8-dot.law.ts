// The wasm target's 8-bit dot (simd128Dot4x4, rendered by src/emit/wasm/dot.ts as SIMD128's
// i32x4.dot_i16x8_s): its emitted instructions, run by the engine, equal its TE declaration (the
// TIR evaluator's meaning) bit for bit on random bytes — the extremes 0 / 255 and −128 / 127 often —
// and random int32 sums, over registers or memory, at loop-dependent addresses, with and without
// bounds checks; and the int8 ops (QLinearConv / QLinearConvPacked / ConvInteger / QLinearMatMul /
// MatMulInteger) on random shapes, zero points and signedness, under every configuration of the int8
// template and the wasm backend's TIR pipeline, emitted and run, equal the TE reference exactly.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { allocate, type DType } from "../../src/ast/graph/dtype.js"
import { fromArray, sizeOf, type Tensor } from "../../src/ast/graph/tensor.js"
import { cpuAttrs } from "../../src/ast/target.js"
import { add, c, mul, v, type Expr } from "../../src/ast/te/expr.js"
import { simd128Dot4x4 } from "../../src/ast/te/intrinsic.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { printPrimFunc, type Buffer, type PrimFunc, type Stmt } from "../../src/ast/tir/tir.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { cpuTir } from "../../src/backend/cpu.js"
import { loadWasmModuleSync } from "../../src/device/wasm/load.js"
import { emitWasmModule } from "../../src/emit/wasm/emit.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { templateFor } from "../../src/lowering/templates/template-for.js"
import type { Config } from "../../src/lowering/templates/template.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../support.js"
import { arbSpec, build } from "../lowering/int8-cases.js"

/** Runs `f` emitted for wasm on `inputs` (params in order; the others zeroed); every param's values after the call. */
const runWasm = (f: PrimFunc, inputs: ReadonlyMap<string, Tensor>, boundsCheck = false): Map<string, Tensor> => {
  const em = emitWasmModule([{ name: "k", func: f }], { boundsCheck })
  const fn = loadWasmModuleSync(em.bytes, em.kernels).get("k")!
  const arrays = f.params.map((p) => inputs.get(p.name)?.data.slice() ?? allocate(p.dtype, sizeOf(p.view?.shape ?? p.shape)))
  fn(...arrays)
  return new Map(f.params.map((p, k) => [p.name, { dtype: p.dtype, shape: p.view?.shape ?? p.shape, data: arrays[k] }] as const))
}

const values = (t: Tensor): number[] => Array.from(t.data as ArrayLike<number>)

const buf = (name: string, dtype: DType, n: number, scope: Buffer["scope"] = "global"): Buffer => ({ name, dtype, shape: [n], scope })
const loop = (name: string, extent: number, body: Stmt): Stmt => ({ kind: "for", var: v(name), min: c(0), extent: c(extent), forKind: "serial", body })

/** A byte of `dtype`, the range's ends one time in four. */
const arbByte = (d: "uint8" | "int8"): fc.Arbitrary<number> => {
  const [lo, hi] = d === "uint8" ? [0, 255] : [-128, 127]
  return fc.oneof({ weight: 1, arbitrary: fc.constantFrom(lo, hi) }, { weight: 3, arbitrary: fc.integer({ min: lo, max: hi }) })
}

interface DotCase {
  readonly pixels: number
  readonly groups: number
  readonly steps: number
  /** Elements before the first activation / weight (unaligned addresses). */
  readonly aPad: number
  readonly bPad: number
  /** The sums in a local tile (the emitter's registers) or in the param itself (memory). */
  readonly registers: boolean
  readonly seed: number
}

/**
 * `steps` rounds of a tile of dots: c[p, g] (4 sums) += a[k, p] (4 bytes) · b[k, g] (4 × 4 bytes),
 * the tile's dots unrolled (constant sums), the rounds a loop (addresses moving with k).
 */
const dotFunc = (dc: DotCase): { f: PrimFunc; inputs: Map<string, Tensor> } => {
  const { pixels: P, groups: G, steps: K } = dc
  const nA = dc.aPad + K * P * 4
  const nB = dc.bPad + K * G * 16
  const nC = P * G * 4
  const k = v("k")
  const acc = dc.registers ? "acc" : "c"
  const dots: Stmt[] = []
  for (let g = 0; g < G; g++)
    for (let p = 0; p < P; p++)
      dots.push({
        kind: "intrinsic",
        intrin: simd128Dot4x4,
        output: { buffer: acc, base: [c((p * G + g) * 4)], strides: [1] },
        inputs: [
          { buffer: "a", base: [add(c(dc.aPad + p * 4), mul(k, c(P * 4)))], strides: [1] },
          { buffer: "b", base: [add(c(dc.bPad + g * 16), mul(k, c(G * 16)))], strides: [16, 4, 1] },
        ],
      })
  const rounds = loop("k", K, { kind: "seq", body: dots })
  const j = v("j")
  const body: Stmt = dc.registers
    ? {
        kind: "allocate",
        buffer: buf("acc", "int32", nC, "local"),
        body: {
          kind: "seq",
          body: [
            loop("j", nC, { kind: "store", buffer: "acc", indices: [j], value: { kind: "read", source: "c", indices: [j], dtype: "int32" } }),
            rounds,
            loop("j", nC, { kind: "store", buffer: "c", indices: [j], value: { kind: "read", source: "acc", indices: [j], dtype: "int32" } }),
          ],
        },
      }
    : rounds
  const f: PrimFunc = { name: "dot", params: [buf("a", "uint8", nA), buf("b", "int8", nB), buf("c", "int32", nC)], body }
  const rng = fc.sample(fc.tuple(fc.array(arbByte("uint8"), { minLength: nA, maxLength: nA }), fc.array(arbByte("int8"), { minLength: nB, maxLength: nB }), fc.array(fc.integer(), { minLength: nC, maxLength: nC })), { seed: dc.seed, numRuns: 1 })[0]
  const inputs = new Map<string, Tensor>([
    ["a", fromArray("uint8", [nA], rng[0])],
    ["b", fromArray("int8", [nB], rng[1])],
    ["c", fromArray("int32", [nC], rng[2])],
  ])
  return { f, inputs }
}

const arbDot: fc.Arbitrary<DotCase> = fc.record({
  pixels: fc.integer({ min: 1, max: 3 }),
  groups: fc.integer({ min: 1, max: 4 }),
  steps: fc.integer({ min: 1, max: 3 }),
  aPad: fc.integer({ min: 0, max: 5 }),
  bPad: fc.integer({ min: 0, max: 17 }),
  registers: fc.boolean(),
  seed: fc.nat(),
})

const WASM = { kind: "wasm" as const, attrs: cpuAttrs({ isa: "simd128" }) }

describe("wasm target: the SIMD128 8-bit dot", () => {
  it("simd128_dot_4x4 as emitted (i32x4.dot_i16x8_s) equals its TE declaration, exactly", () => {
    fc.assert(
      fc.property(arbDot, fc.boolean(), (dc, boundsCheck) => {
        const { f, inputs } = dotFunc(dc)
        const want = evaluatePrimFunc(f, inputs).get("c")!
        expect(values(runWasm(f, inputs, boundsCheck).get("c")!)).toEqual(values(want))
      }),
      lawParams(60),
    )
  })

  it("the int8 ops under every configuration of the int8 template, emitted for wasm, equal the TE (exactly)", () => {
    let dots = 0
    fc.assert(
      fc.property(arbSpec, fc.array(fc.nat(), { minLength: 4, maxLength: 4 }), fc.boolean(), (sp, picks, simd) => {
        const { outputs, feeds } = build(sp)
        const base = baseSchedule(outputs)
        const t = templateFor(base)
        const knobs = t.space(outputs, base)
        // (the SIMD128 dot in most cases: it is the wasm target's default)
        const config: Config = { ...Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i] % k.candidates.length]])), ...(simd ? { dot: "simd128" } : {}) }
        const f = runTirSync(cpuTir(WASM), lowerSync(t.apply(outputs, base, config)))
        if (printPrimFunc(f).includes(simd128Dot4x4.name)) dots++
        const got = runWasm(f, feeds).get(outputs[0].name)!
        expect(values(got)).toEqual(values(evaluateTE(outputs, feeds)[0]))
      }),
      lawParams(40),
    )
    // (the cases reach the dot)
    expect(dots).toBeGreaterThan(15)
  })
})
