// The js target: every compute family under random schedules, lowered, emitted as an ES module,
// loaded and run, equals the TE evaluator; emission is deterministic; names never leak.
import * as fc from "fast-check"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { arbScheduledCase, COMPUTE_FAMILIES } from "../src/ast/te/arbitrary.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { allocate } from "../src/ast/graph/dtype.js"
import { sizeOf, type Tensor } from "../src/ast/graph/tensor.js"
import type { PrimFunc } from "../src/ast/tir/tir.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { emitJsModule } from "../src/emit/js/emit.js"
import { loadJsModule } from "../src/device/js/device.js"
import { assertAllClose, lawParams } from "../laws/support.js"

/** The emit layer's typed error from the js target, its reason matching `reason` (and its kernel, when given). */
const emitError = (reason: RegExp, kernel?: string) => expect.objectContaining({ _tag: "EmitError", target: "js", reason: expect.stringMatching(reason), ...(kernel === undefined ? {} : { kernel }) })

/** Runs a loaded kernel on named tensors: params in order, outputs allocated. */
const call = (fn: (...a: unknown[]) => void, f: PrimFunc, inputs: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
  const arrays = f.params.map((p) => {
    const shape = p.view?.shape ?? p.shape
    return inputs.get(p.name)?.data.slice() ?? allocate(p.dtype, sizeOf(shape))
  })
  fn(...arrays)
  return new Map(f.params.map((p, k) => [p.name, { dtype: p.dtype, shape: p.view?.shape ?? p.shape, data: arrays[k] }] as const))
}

describe("js target", () => {
  for (const family of COMPUTE_FAMILIES)
    it(`emitted js equals the TE evaluator for ${family} under random schedules`, async () => {
      const cases = fc.sample(arbScheduledCase([family]), lawParams(25))
      const funcs = cases.map((cc, k) => ({ name: `k${k}`, func: runTirSync(cpuTirPipeline(), lowerSync(cc.schedule)) }))
      const source = emitJsModule(funcs)
      expect(emitJsModule(funcs)).toBe(source) // deterministic
      const fns = await Effect.runPromise(loadJsModule(source))
      cases.forEach((cc, k) => {
        const outs = call(fns.get(`k${k}`)! as never, funcs[k].func, cc.inputs)
        const want = evaluateTE(cc.outputs, cc.inputs)
        assertAllClose(cc.outputs.map((o) => outs.get(o.name)!), want, 1e-4, 1e-5)
      })
    })

  it("names from programs never reach the emitted text unescaped", async () => {
    const cc = fc.sample(arbScheduledCase(["elementwise"]), lawParams(1))[0]
    const f = runTirSync(cpuTirPipeline(), lowerSync(cc.schedule))
    const hostile = "x*/ ; process.exit(1); /*\n#include <evil>$(rm -rf /)"
    const renamed: PrimFunc = { ...f, name: hostile, params: f.params.map((p) => ({ ...p, name: p.name })) }
    const src = emitJsModule([{ name: "k0", func: renamed }])
    expect(src).not.toContain("process.exit(1); /*\n")
    await Effect.runPromise(loadJsModule(src))
    expect(() => emitJsModule([{ name: "a b", func: f }])).toThrow(emitError(/safe identifier/))
  })
})
