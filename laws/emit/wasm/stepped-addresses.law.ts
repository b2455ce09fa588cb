// The wasm emitter's stepped addresses (src/emit/wasm/hoist.ts: stepBases): an innermost loop's
// addresses that are a loop-invariant part plus the loop variable times a positive stride live in
// locals advanced by the stride at each iteration's end, instead of being recomputed (a shift or a
// multiply and an add an access). Law: random lowered schedules of the TE families (and the same
// with loops of non-constant bounds), through the CPU TIR pipeline, emitted for wasm with and
// without stepping, run, equal the TE evaluator; and stepping changes the code of some of them.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { allocate } from "../../../src/ast/graph/dtype.js"
import { sizeOf, type Tensor } from "../../../src/ast/graph/tensor.js"
import { evaluateTE } from "../../../src/ast/te/evaluate.js"
import type { PrimFunc } from "../../../src/ast/tir/tir.js"
import { loadWasmModuleSync } from "../../../src/device/wasm/load.js"
import { emitWasmModule } from "../../../src/emit/wasm/emit.js"
import { cpuTirPipeline } from "../../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { assertAllClose, lawParams } from "../../support.js"
import { arbLoweredCase, arbVariedLoops } from "../../lowering/tir/support.js"

/** Runs the kernel of a module on named tensors: params in order, outputs allocated. */
const run = (em: ReturnType<typeof emitWasmModule>, f: PrimFunc, inputs: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
  const fn = loadWasmModuleSync(em.bytes, em.kernels).get("k")!
  const arrays = f.params.map((p) => inputs.get(p.name)?.data.slice() ?? allocate(p.dtype, sizeOf(p.view?.shape ?? p.shape)))
  fn(...arrays)
  return new Map(f.params.map((p, k) => [p.name, { dtype: p.dtype, shape: p.view?.shape ?? p.shape, data: arrays[k] }] as const))
}

const cases = fc.oneof(arbLoweredCase(), arbVariedLoops({ relax: "plain" }))

describe("wasm: an innermost loop's addresses stepped by their strides", () => {
  it("random lowered schedules emitted for wasm with and without stepped addresses equal the TE evaluator; stepping changes the code of some", () => {
    let changed = 0
    fc.assert(
      fc.property(cases, (c) => {
        const f = runTirSync(cpuTirPipeline(), c.func)
        const want = evaluateTE(c.outputs, c.inputs)
        const sizes = [true, false].map((step) => {
          const em = emitWasmModule([{ name: "k", func: f }], { stepAddresses: step })
          const outs = run(em, f, c.inputs)
          assertAllClose(c.outputs.map((o) => outs.get(o.name)!), want, 1e-4, 1e-5)
          return em.bytes.length
        })
        if (sizes[0] !== sizes[1]) changed++
      }),
      lawParams(40),
    )
    expect(changed).toBeGreaterThan(0)
  })
})
