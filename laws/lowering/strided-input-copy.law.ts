// The strided 1×1 conv's input copy (the op library's ConvNCHWc, the conv rule's pad_root): along a
// kernel of one tap at a stride > 1 the conv's input stage holds only the pixels the conv reads —
// OH × OW, not the (OH − 1)·stride + 1 rows and columns it spans — and the conv reads that copy at
// stride 1; the rule's defaults compute it at root (a dense copy every channel tile reads again),
// and every configuration of the template evaluates equal to the TE, the compiled network equal
// to the graph's reference.
import * as fc from "fast-check"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import { prng } from "../../src/ast/graph/arbitrary.js"
import { runGraph } from "../../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../../src/ast/graph/tensor.js"
import * as S from "../../src/ast/schedule/schedule.js"
import { makeTarget } from "../../src/ast/target.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import type { ComputeTensor, TeTensor } from "../../src/ast/te/tensor.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { baseSchedule, buildGroupTE } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { templateFor } from "../../src/lowering/templates/template-for.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { compileGraph, loadProgram } from "../../src/pipeline.js"
import { assertAllClose, lawParams } from "../support.js"

const LANES = 4
const target = makeTarget("js", { vectorLanes: LANES })

const arbConv = fc.record({
  C: fc.constantFrom(4, 8),
  M: fc.constantFrom(4, 8, 12),
  H: fc.integer({ min: 1, max: 9 }),
  W: fc.integer({ min: 1, max: 9 }),
  sh: fc.integer({ min: 1, max: 3 }),
  sw: fc.integer({ min: 1, max: 3 }),
  // padding at the end only (a 1×1 conv's usual is none): the copy's reads past the input are zeros
  pb: fc.constantFrom(0, 0, 1),
  bias: fc.boolean(),
  seed: fc.nat(),
})
type Conv = typeof arbConv extends fc.Arbitrary<infer T> ? T : never

const convGraph = (o: Conv) => {
  const rng = prng(o.seed)
  const rand = (shape: number[]): Tensor => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))
  const [OH, OW] = [Math.floor((o.H + o.pb - 1) / o.sh) + 1, Math.floor((o.W + o.pb - 1) / o.sw) + 1]
  const graph = makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [1, o.C, o.H, o.W] } }],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [1, o.M, OH, OW] } }],
    initializers: new Map([["w", rand([o.M, o.C, 1, 1])], ...(o.bias ? [["b", rand([o.M])] as const] : [])]),
    nodes: [node("Conv", ["x", "w", ...(o.bias ? ["b"] : [])], ["y"], { kernel_shape: attr.ints([1, 1]), strides: attr.ints([o.sh, o.sw]), pads: attr.ints([0, 0, o.pb, o.pb]) })],
  })
  return { graph, feeds: new Map([["x", rand([1, o.C, o.H, o.W])]]), OH, OW, rand }
}

/** The conv anchor's compute-stage input (its padded or subsampled copy), if any. */
const inputCopy = (outputs: readonly ComputeTensor[]): ComputeTensor | undefined => {
  const seen = new Set<string>()
  const walk = (t: TeTensor): ComputeTensor | undefined => {
    if (t.kind !== "compute" || seen.has(t.name)) return undefined
    seen.add(t.name)
    if (t.tag === "conv2d_nchwc") return t.inputs.find((x): x is ComputeTensor => x.kind === "compute")
    for (const x of t.inputs) {
      const r = walk(x)
      if (r) return r
    }
    return undefined
  }
  for (const o of outputs) {
    const r = walk(o)
    if (r) return r
  }
  return undefined
}

describe("the strided 1×1 conv's input copy (ConvNCHWc, the conv rule's pad_root)", () => {
  it("holds only the pixels the conv reads, is computed at root by the defaults, and every pad_root evaluates equal to the TE; the compiled network equals the graph's reference", async () => {
    await fc.assert(
      fc.asyncProperty(arbConv, async (o) => {
        const { graph, feeds, OH, OW, rand } = convGraph(o)
        const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }))
        const group = program.fused.groups.find((g) => g.ops[0] === "ConvNCHWc")
        expect(group).toBeDefined()
        const te = buildGroupTE(program.fused, group!)
        const copy = inputCopy(te.outputs)
        const strided = o.sh > 1 || o.sw > 1
        if (strided || o.pb > 0) {
          expect(copy).toBeDefined()
          // its rows and columns the output's: at a stride only the pixels read, not the span
          expect(copy!.shape.slice(2, 4)).toEqual([OH, OW])
        } else expect(copy).toBeUndefined()
        const base = baseSchedule(te.outputs)
        const t = templateFor(base)
        expect(t.name).toBe("conv2d_NCHWc")
        const knobs = t.space(te.outputs, base)
        const defaults = t.defaults(knobs, { vectorLanes: LANES, cores: 1 })
        if (copy) {
          expect(defaults.pad_root).toBe(true)
          const s = t.apply(te.outputs, base, defaults)
          expect(s.stages.get(copy.name)!.attach.kind).toBe("root")
        }
        // every pad_root, at the defaults' tiles, evaluates equal to the TE
        const inputs = new Map<string, Tensor>()
        const leaves = (x: TeTensor): void => {
          if (x.kind === "placeholder") inputs.set(x.name, rand([...x.shape]))
          else x.inputs.forEach(leaves)
        }
        te.outputs.forEach(leaves)
        const want = evaluateTE(te.outputs, inputs)
        for (const padRoot of copy ? [true, false] : [undefined]) {
          const config = padRoot === undefined ? defaults : { ...defaults, pad_root: padRoot }
          const f = runTirSync(cpuTirPipeline(), lowerSync(t.apply(te.outputs, base, config) as S.Schedule))
          const outs = evaluatePrimFunc(f, inputs)
          assertAllClose(te.outputs.map((x) => outs.get(x.name)!), want, 1e-4, 1e-5)
        }
        // the network, compiled, against the graph's reference
        const exec = await Effect.runPromise(loadProgram(program, target))
        assertAllClose([...exec.run(feeds).values()], [...runGraph(graph, feeds).values()], 1e-4, 1e-5)
      }),
      lawParams(25),
    )
  })
})
