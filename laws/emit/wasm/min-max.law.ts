// The wasm emitter's float min / max against a constant (src/emit/wasm/min-max.ts): emitted as
// f32x4.pmin / f32x4.pmax (and + (+0) after max(x, +0)) where that is exact, the IEEE op elsewhere.
// Law: element-wise computes of random min / max / clip chains against constants drawn from the
// cases that matter (±0, ±∞, NaN, ordinary values), either operand order, over inputs holding
// ±0, ±∞, NaN, the constants themselves and random values, lowered at the injective rule's defaults
// (vectorized), emitted for wasm and run, equal the TIR evaluator on the lowered function bit for
// bit (a NaN where it has a NaN, the sign of every zero); and the pseudo-ops are emitted (the law
// sees the rule at work). (Against the TIR evaluator: this law found TE simplify folding
// max(x, +∞) to +∞ with x NaN, and exprKey giving NaN and +∞ one key; both fixed.)
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { allocate } from "../../../src/ast/graph/dtype.js"
import type { Tensor } from "../../../src/ast/graph/tensor.js"
import { add, f32, max, min, type Expr } from "../../../src/ast/te/expr.js"
import { at, compute, placeholder } from "../../../src/ast/te/tensor.js"
import { evaluatePrimFunc } from "../../../src/ast/tir/evaluate.js"
import { loadWasmModuleSync } from "../../../src/device/wasm/load.js"
import { emitWasmModule } from "../../../src/emit/wasm/emit.js"
import { baseSchedule } from "../../../src/lowering/lower-group.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { templateFor } from "../../../src/lowering/templates/template-for.js"
import { cpuTirPipeline } from "../../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"

const CONSTANTS = [0, -0, 6, -1.5, 0.25, Infinity, -Infinity, NaN]
const arbConstant = fc.oneof(fc.constantFrom(...CONSTANTS), fc.float({ noNaN: true, min: -8, max: 8 }).map(Math.fround))

/** One step of a chain: min or max against a constant, the constant on either side. */
const arbStep = fc.record({ op: fc.constantFrom("min" as const, "max" as const), c: arbConstant, constantFirst: fc.boolean() })

/** The same float32 bits, NaN for NaN (any payload). */
const sameFloat = (a: number, b: number) => (Number.isNaN(a) ? Number.isNaN(b) : Object.is(a, b))

describe("wasm: float min / max against a constant", () => {
  it("min / max / clip chains against ±0, ±∞, NaN and ordinary constants, vectorized and emitted for wasm, equal the TIR evaluator bit for bit; the pseudo-ops are emitted", () => {
    let pseudo = 0
    fc.assert(
      fc.property(
        fc.record({
          n: fc.integer({ min: 1, max: 40 }),
          steps: fc.array(arbStep, { minLength: 1, maxLength: 3 }),
          bias: fc.oneof(fc.constant(undefined), arbConstant),
          picks: fc.array(fc.integer({ min: 0, max: 11 }), { minLength: 40, maxLength: 40 }),
          values: fc.array(fc.float({ noNaN: true, min: -10, max: 10 }), { minLength: 40, maxLength: 40 }),
        }),
        (o) => {
          // two rows of n: the rows parallel, each row's n vectorized (4 lanes a step, the rest scalar)
          const X = placeholder("X", [2, o.n])
          const y = compute("y", [2, o.n], (i, j) => {
            let e: Expr = o.bias === undefined ? at(X, i, j) : add(at(X, i, j), f32(o.bias))
            for (const s of o.steps) {
              const [a, b] = s.constantFirst ? [f32(s.c), e] : [e, f32(s.c)]
              e = s.op === "min" ? min(a, b) : max(a, b)
            }
            return e
          })
          // inputs: the specials, the constants themselves, random values
          const specials = [0, -0, Infinity, -Infinity, NaN, ...o.steps.map((s) => s.c), 6, -1.5]
          const data = allocate("float32", 2 * o.n) as Float32Array
          for (let i = 0; i < 2 * o.n; i++) data[i] = o.picks[i % 40] < specials.length ? specials[(o.picks[i % 40] + (i < o.n ? 0 : 3)) % specials.length] : o.values[i % 40]
          const inputs = new Map<string, Tensor>([["X", { dtype: "float32", shape: [2, o.n], data }]])
          const base = baseSchedule([y])
          const t = templateFor(base)
          const target = { vectorLanes: 4, cores: 1, vectorRegisters: 16, fmaUnits: 1, fmaLatency: 4, fusedMultiplyAdd: false }
          const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply([y], base, t.defaults(t.space([y], base), target))))
          const em = emitWasmModule([{ name: "k", func: f }])
          pseudo += em.module.funcs[0].code.filter((x) => x.op === "f32x4.pmin" || x.op === "f32x4.pmax").length
          const fn = loadWasmModuleSync(em.bytes, em.kernels).get("k")!
          const arrays = f.params.map((p) => (p.name === "X" ? data.slice() : allocate(p.dtype, 2 * o.n)))
          fn(...arrays)
          const got = arrays[f.params.findIndex((p) => p.name === "y")]
          const want = evaluatePrimFunc(f, inputs).get("y")!.data
          for (let i = 0; i < 2 * o.n; i++)
            if (!sameFloat(got[i] as number, want[i] as number)) expect.fail(`element ${i} (x = ${Object.is(data[i], -0) ? "-0" : data[i]}): wasm ${Object.is(got[i], -0) ? "-0" : got[i]}, TIR ${Object.is(want[i], -0) ? "-0" : want[i]}; steps ${JSON.stringify(o.steps.map((s) => ({ ...s, c: Object.is(s.c, -0) ? "-0" : String(s.c) })))}, bias ${o.bias}`)
        },
      ),
      lawParams(100),
    )
    expect(pseudo).toBeGreaterThan(0)
  })
})
