// The wasm emitter's widened reads (src/emit/wasm/widen.ts): in a vectorized loop an 8- or 16-bit
// integer read cast to int32 is one widening load of 4 lanes (v128.load16x4_s / _u, or
// v128.load32_splat and two extends for 8 bits), through either vector plan — vector.ts's (an
// int32 store, a reduction's update reading its own sum) and vector-wide.ts's (a float32 or a
// narrow store). Law: random computes over int16 / uint16 / int8 / uint8 inputs holding their
// dtypes' extremes and random values — products with a per-row int8 weight plus a second widened
// read, optionally clamped, stored as int32, int16, int8 or float32, or summed over a reduction
// whose loop runs outside the vector loop — lowered with the inner axis vectorized, emitted for
// wasm and run, equal the TIR evaluator on the lowered function bit for bit; and the widening
// loads are emitted (the law sees the rule at work).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { allocate, type DType } from "../../../src/ast/graph/dtype.js"
import type { Tensor } from "../../../src/ast/graph/tensor.js"
import * as S from "../../../src/ast/schedule/schedule.js"
import { add, c, cast, f32, max, min, mul, type Expr } from "../../../src/ast/te/expr.js"
import { at, compute, placeholder, reduceAxis, sum } from "../../../src/ast/te/tensor.js"
import { evaluatePrimFunc } from "../../../src/ast/tir/evaluate.js"
import { loadWasmModuleSync } from "../../../src/device/wasm/load.js"
import { emitWasmModule } from "../../../src/emit/wasm/emit.js"
import { baseSchedule } from "../../../src/lowering/lower-group.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { cpuTirPipeline } from "../../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"

const NARROW = ["int16", "uint16", "int8", "uint8"] as const
const RANGE: Record<(typeof NARROW)[number], [number, number]> = { int16: [-32768, 32767], uint16: [0, 65535], int8: [-128, 127], uint8: [0, 255] }
const WIDENING = new Set(["v128.load16x4_s", "v128.load16x4_u", "i32x4.extend_low_i16x8_s", "i32x4.extend_low_i16x8_u"])

/** `n` values of `dt`: its extremes, 0, ±1 and random values in its range. */
const fill = (dt: (typeof NARROW)[number], n: number, picks: readonly number[]): ReturnType<typeof allocate> => {
  const [lo, hi] = RANGE[dt]
  const specials = [lo, hi, 0, 1, lo < 0 ? -1 : 2, lo + 1, hi - 1]
  const a = allocate(dt, n)
  for (let i = 0; i < n; i++) {
    const p = picks[i % picks.length]
    ;(a as Int16Array)[i] = p % 3 === 0 ? specials[(p >>> 2) % specials.length] : lo + (p % (hi - lo + 1))
  }
  return a
}

describe("wasm: 8- and 16-bit reads widened to int32 in vectorized loops", () => {
  it("random widened-read computes (int32 / int16 / int8 / float32 stores, reductions), vectorized and emitted for wasm, equal the TIR evaluator bit for bit; the widening loads are emitted", () => {
    let widened = 0
    fc.assert(
      fc.property(
        fc.record({
          n: fc.integer({ min: 1, max: 40 }),
          k: fc.integer({ min: 1, max: 4 }),
          xd: fc.constantFrom(...NARROW),
          zd: fc.constantFrom(...NARROW),
          form: fc.constantFrom("int32" as const, "int16" as const, "int8" as const, "float32" as const, "reduce" as const),
          clamp: fc.boolean(),
          withZ: fc.boolean(),
          picks: fc.array(fc.nat(), { minLength: 64, maxLength: 64 }),
        }),
        (o) => {
          // rows of n: each row's n vectorized (4 lanes a step, the rest scalar)
          const reduce = o.form === "reduce"
          const X = placeholder("X", reduce ? [2, o.k, o.n] : [2, o.n], o.xd)
          const Z = placeholder("Z", [2, o.n], o.zd)
          const W = placeholder("W", [2, o.k], "int8")
          const i32 = (e: Expr) => cast("int32", e)
          const term = (i: Expr, r: Expr, j: Expr): Expr => mul(i32(reduce ? at(X, i, r, j) : at(X, i, j)), i32(at(W, i, r)))
          let y
          if (reduce) {
            const rk = reduceAxis(o.k, "rk")
            y = compute("y", [2, o.n], (i, j) => sum(term(i, rk.var, j), [rk]), "int32")
          } else {
            y = compute(
              "y",
              [2, o.n],
              (i, j) => {
                let e = term(i, c(0), j)
                if (o.withZ) e = add(e, i32(at(Z, i, j)))
                if (o.clamp) e = min(max(e, c(-100000)), c(100000))
                return o.form === "float32" ? mul(cast("float32", e), f32(0.375)) : cast(o.form as DType, e)
              },
              o.form === "float32" ? "float32" : (o.form as DType),
            )
          }
          let s = baseSchedule([y])
          const st = s.stages.get("y")!
          const data = st.leaf.filter((a) => st.axes.get(a)!.type !== "reduce")
          const red = st.leaf.filter((a) => st.axes.get(a)!.type === "reduce")
          // a reduction's loop outside the vector loop (its update reads the sum it stores)
          if (red.length) s = S.reorder(s, "y", [data[0], ...red, data[1]])
          s = S.vectorize(s, "y", data[1])
          const f = runTirSync(cpuTirPipeline(), lowerSync(s))
          const inputs = new Map<string, Tensor>([
            ["X", { dtype: o.xd, shape: X.shape, data: fill(o.xd, X.shape.reduce((a, b) => a * b, 1), o.picks) }],
            ["Z", { dtype: o.zd, shape: Z.shape, data: fill(o.zd, 2 * o.n, o.picks.slice(7)) }],
            ["W", { dtype: "int8", shape: W.shape, data: fill("int8", 2 * o.k, o.picks.slice(3)) }],
          ])
          const em = emitWasmModule([{ name: "k", func: f }])
          widened += em.module.funcs[0].code.filter((x) => WIDENING.has(x.op)).length
          const fn = loadWasmModuleSync(em.bytes, em.kernels).get("k")!
          const arrays = f.params.map((p) => inputs.get(p.name)?.data.slice() ?? allocate(p.dtype, 2 * o.n))
          fn(...(arrays as Parameters<typeof fn>))
          const got = arrays[f.params.findIndex((p) => p.name === "y")] as ArrayLike<number>
          const want = evaluatePrimFunc(f, inputs).get("y")!.data as ArrayLike<number>
          // (=== : the evaluator's int32 product of 0 and a negative is JS's −0 — applyBin multiplies
          // without wrapping — which float32() keeps; an integer has one zero, wasm's +0)
          for (let i = 0; i < 2 * o.n; i++)
            if (got[i] !== want[i]) expect.fail(`element ${i}: wasm ${got[i]}, TIR ${want[i]} (${JSON.stringify({ ...o, picks: undefined })})`)
        },
      ),
      lawParams(120),
    )
    expect(widened).toBeGreaterThan(0)
  })
})
