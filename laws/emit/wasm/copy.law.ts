// The wasm emitter's vectorized copies (src/emit/wasm/vector-copy.ts): a vectorized loop storing a
// read of another buffer of its dtype moves 16 bytes a step. Law: copies of random 8-, 16- and
// 64-bit dtypes, rows of random length read at a random column offset (so the steps' addresses
// take every alignment), with the inner axis vectorized, emitted for wasm and run, equal the TIR
// evaluator on the lowered function bit for bit (−0 and the extremes kept); and the 16-byte
// copies are emitted (the law sees the rule at work).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { allocate } from "../../../src/ast/graph/dtype.js"
import type { Tensor } from "../../../src/ast/graph/tensor.js"
import * as S from "../../../src/ast/schedule/schedule.js"
import { add, c } from "../../../src/ast/te/expr.js"
import { at, compute, placeholder } from "../../../src/ast/te/tensor.js"
import { evaluatePrimFunc } from "../../../src/ast/tir/evaluate.js"
import { loadWasmModuleSync } from "../../../src/device/wasm/load.js"
import { emitWasmModule } from "../../../src/emit/wasm/emit.js"
import { baseSchedule } from "../../../src/lowering/lower-group.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { cpuTirPipeline } from "../../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"

const DTYPES = ["int8", "uint8", "int16", "uint16", "float64"] as const
const SPECIALS: Record<(typeof DTYPES)[number], number[]> = {
  int8: [-128, 127, 0, -1],
  uint8: [0, 255, 1],
  int16: [-32768, 32767, 0, -1],
  uint16: [0, 65535, 1],
  float64: [-0, 0, Infinity, -Infinity, 1e-310, -1.5],
}

describe("wasm: vectorized copies of other dtypes", () => {
  it("copies of 8-, 16- and 64-bit elements at every alignment, vectorized and emitted for wasm, equal the TIR evaluator bit for bit; the 16-byte copies are emitted", () => {
    let copies = 0
    fc.assert(
      fc.property(
        fc.record({
          n: fc.integer({ min: 1, max: 40 }),
          off: fc.integer({ min: 0, max: 7 }),
          dt: fc.constantFrom(...DTYPES),
          picks: fc.array(fc.nat(), { minLength: 96, maxLength: 96 }),
        }),
        (o) => {
          const X = placeholder("X", [2, o.n + o.off], o.dt)
          const y = compute("y", [2, o.n], (i, j) => at(X, i, add(j, c(o.off))), o.dt)
          let s = baseSchedule([y])
          const st = s.stages.get("y")!
          s = S.vectorize(s, "y", st.leaf[st.leaf.length - 1])
          const f = runTirSync(cpuTirPipeline(), lowerSync(s))
          const len = 2 * (o.n + o.off)
          const data = allocate(o.dt, len) as unknown as number[]
          const sp = SPECIALS[o.dt]
          for (let i = 0; i < len; i++) {
            const p = o.picks[i % 96]
            data[i] = p % 3 === 0 ? sp[(p >>> 2) % sp.length] : o.dt === "float64" ? (p % 2000) / 7 - 140 : p % 65536
          }
          const inputs = new Map<string, Tensor>([["X", { dtype: o.dt, shape: X.shape, data: data as unknown as Tensor["data"] }]])
          const em = emitWasmModule([{ name: "k", func: f }])
          copies += em.module.funcs[0].code.filter((x) => x.op === "v128.store").length
          const fn = loadWasmModuleSync(em.bytes, em.kernels).get("k")!
          const arrays = f.params.map((p) => inputs.get(p.name)?.data.slice() ?? allocate(p.dtype, 2 * o.n))
          fn(...arrays)
          const got = arrays[f.params.findIndex((p) => p.name === "y")] as ArrayLike<number>
          const want = evaluatePrimFunc(f, inputs).get("y")!.data as ArrayLike<number>
          for (let i = 0; i < 2 * o.n; i++) if (!Object.is(got[i], want[i])) expect.fail(`element ${i}: wasm ${got[i]}, TIR ${want[i]} (${JSON.stringify({ ...o, picks: undefined })})`)
        },
      ),
      lawParams(100),
    )
    expect(copies).toBeGreaterThan(0)
  })
})
