// lowering.CpuPipeline at every opt level: same meaning; its output verifies against what the c,
// js and wasm emitters assume; and those emitters take it without throwing — a pass below the opt
// level is an optimisation the emitters never needed.
import * as fc from "fast-check"
import { describe, it } from "vitest"
import { emitC } from "../../../src/emit/c/emit.js"
import { emitJsModule } from "../../../src/emit/js/emit.js"
import { emitWasmModule } from "../../../src/emit/wasm/emit.js"
import { cpuEmitterAssumes, cpuTirPipeline } from "../../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { arbLoweredCase, arbTensorizedCase, assertMeaning, assertVerifies } from "./support.js"

const cases = fc.oneof({ arbitrary: arbLoweredCase(), weight: 4 }, { arbitrary: arbTensorizedCase(), weight: 1 })

describe("lowering.CpuPipeline", () => {
  for (const optLevel of [0, 1, 2, 3])
    it(`at opt level ${optLevel}: same meaning, verified against the CPU emitters' assumptions, and emitted by c, js and wasm`, () => {
      fc.assert(
        fc.property(cases, (c) => {
          const f = runTirSync(cpuTirPipeline(), c.func, { optLevel })
          assertMeaning(f, c)
          assertVerifies(f, cpuEmitterAssumes())
          const named = { ...f, name: "k0" }
          emitC([named])
          emitJsModule([{ name: "k0", func: named }])
          emitWasmModule([{ name: "k0", func: named }])
        }),
        lawParams(25),
      )
    })
})
