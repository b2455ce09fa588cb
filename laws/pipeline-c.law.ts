// The whole compiler to C: compileGraph for the c target (graph passes, fusion, memory plan,
// lowering with the default CPU schedules, the CPU TIR pipeline) → emitC → gcc → koffi → the
// executor with the planned buffers equals the reference evaluator, at vector lanes 0, 4 and 16.
// Many random graphs are merged into one graph of disjoint components, so one gcc run builds a
// batch. A second generator makes graphs whose index arithmetic goes negative on purpose:
// asymmetric padding, strided and dilated Conv, ConvTranspose, Resize under every coordinate
// transform, Pad (negative pads too), Slice with negative steps, padded pooling, GridSample.
// Skipped, visibly, where gcc is absent.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbGraphCase, prng, type GraphCase } from "../src/ast/graph/arbitrary.js"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node, type Attrs, type Graph, type Node } from "../src/ast/graph/graph.js"
import { bindSync } from "../src/ast/graph/infer.js"
import { sizeOf, tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { makeTarget } from "../src/ast/target.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { assertAllClose, lawParams } from "./support.js"
import { HAVE_GCC, mergeGraphs, NO_GCC } from "./support-c.js"

/** Compiles a batch for c, runs it twice (the planned buffers are reused), compares each output with the evaluator's; the compiled kernel count. */
const checkBatch = async (cases: readonly GraphCase[], lanes: number, optLevel = 3): Promise<number> => {
  const { graph, inputs } = mergeGraphs(cases)
  const target = makeTarget("c", { vectorLanes: lanes })
  const program = await Effect.runPromise(compileGraph(graph, target, { optLevel }))
  const exec = await Effect.runPromise(loadProgram(program, target))
  const want = runGraph(graph, inputs)
  for (let r = 0; r < 2; r++) {
    const got = exec.run(inputs)
    graph.outputs.forEach((o, k) => {
      const [, k0, name] = /^g(\d+)_(.*)$/.exec(o.name)!
      const origin = cases[Number(k0)].graph.name
      try {
        assertAllClose([got.get(o.name)!], [want[k]], 1e-3, 1e-4)
      } catch (e) {
        throw new Error(`${origin}, output ${name} (run ${r + 1}, vector lanes ${lanes}, opt level ${optLevel}): ${(e as Error).message}`)
      }
    })
  }
  return program.kernels.filter((k) => k.kind === "compiled").length
}

// ---------------------------------------------------------------------------------------------
// Graphs whose index arithmetic goes negative

type Rng = ReturnType<typeof prng>
const rand = (rng: Rng, shape: readonly number[], lo = -1, hi = 1): Tensor => tensor("float32", shape, Float32Array.from({ length: sizeOf(shape) }, () => rng.float(lo, hi)))
const i64 = (xs: readonly number[]): Tensor => tensor("int64", [xs.length], Float64Array.from(xs))
const f32s = (xs: readonly number[]): Tensor => tensor("float32", [xs.length], Float32Array.from(xs))
const CTMS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"]

/** One op over a 4-D value `x` of shape `s`: its node, and the constants it reads. */
const negativeIndexOp = (rng: Rng, x: string, s: readonly number[], out: string, cst: (t: Tensor) => string): Node | undefined => {
  const [, C, H, W] = s
  const n = (op: string, inputs: string[], attrs: Attrs) => node(op, inputs, [out], attrs, `${op.toLowerCase()}_${out}`)
  switch (rng.int(0, 7)) {
    case 0: {
      // Conv: asymmetric pads, stride, dilation
      const [kh, kw, d, st] = [rng.int(1, 3), rng.int(1, 3), rng.int(1, 2), rng.int(1, 2)]
      const pads = [rng.int(0, kh - 1), rng.int(0, kw - 1), rng.int(0, kh), rng.int(0, kw)]
      if (H + pads[0] + pads[2] < d * (kh - 1) + 1 || W + pads[1] + pads[3] < d * (kw - 1) + 1) return undefined
      const O = rng.int(1, 3)
      return n("Conv", [x, cst(rand(rng, [O, C, kh, kw], -0.5, 0.5)), cst(rand(rng, [O]))], { pads: attr.ints(pads), strides: attr.ints([st, st]), dilations: attr.ints([d, d]) })
    }
    case 1: {
      // ConvTranspose: strides, asymmetric pads, output padding, dilation
      const [k, st, d] = [rng.int(1, 3), rng.int(1, 3), rng.int(1, 2)]
      const pads = [rng.int(0, k - 1), rng.int(0, k - 1), rng.int(0, k - 1), 0]
      const O = rng.int(1, 2)
      return n("ConvTranspose", [x, cst(rand(rng, [C, O, k, k], -0.5, 0.5))], { strides: attr.ints([st, st]), pads: attr.ints(pads), dilations: attr.ints([d, d]), output_padding: attr.ints([rng.int(0, st - 1), 0]) })
    }
    case 2:
    case 3: {
      // Resize: source coordinates below 0 and past the end before clamping
      const mode = rng.pick(["nearest", "linear"])
      const ctm = rng.pick(CTMS)
      const attrs = { mode: attr.str(mode), coordinate_transformation_mode: attr.str(ctm), nearest_mode: attr.str(rng.pick(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])) }
      if (rng.next() < 0.5) return n("Resize", [x, "", cst(f32s([1, 1, rng.pick([0.6, 1.5, 2, 2.5]), rng.pick([0.5, 0.75, 1.7, 3])]))], attrs)
      return n("Resize", [x, "", "", cst(i64([s[0], C, rng.int(1, 2 * H + 1), rng.int(1, 2 * W + 1)]))], attrs)
    }
    case 4: {
      // Pad: every mode; constant pads may be negative (a crop)
      const mode = rng.pick(["constant", "edge", "reflect", "wrap"])
      const p = (d: number) => (mode === "constant" ? rng.int(-Math.min(1, d - 1), 2) : mode === "edge" ? rng.int(0, 2) : rng.int(0, Math.min(2, d - 1)))
      return n("Pad", [x, cst(i64([0, 0, p(H), p(W), 0, 0, p(H), p(W)]))], { mode: attr.str(mode) })
    }
    case 5: {
      // Slice: negative steps and negative starts / ends
      const starts = [rng.int(-1, 0) - (rng.next() < 0.5 ? 0 : 1), -1]
      return n("Slice", [x, cst(i64(starts)), cst(i64([-H - 1, rng.int(-W - 5, -W)])), cst(i64([2, 3])), cst(i64([-1, -rng.int(1, 2)]))], {})
    }
    case 6: {
      // pooling: asymmetric pads, stride, ceil mode, padding counted or not
      const k = rng.int(2, 3)
      const pads = [rng.int(0, k - 1), rng.int(0, k - 1), rng.int(0, k - 1), rng.int(0, k - 1)]
      if (H + pads[0] + pads[2] < k || W + pads[1] + pads[3] < k) return undefined
      const op = rng.pick(["MaxPool", "AveragePool"])
      return n(op, [x], { kernel_shape: attr.ints([k, k]), pads: attr.ints(pads), strides: attr.ints([rng.int(1, 2), rng.int(1, 2)]), ceil_mode: attr.int(rng.int(0, 1)), ...(op === "AveragePool" ? { count_include_pad: attr.int(rng.int(0, 1)) } : {}) })
    }
    default: {
      // GridSample: grid points outside [-1, 1] under every padding mode
      const grid = cst(rand(rng, [s[0], rng.int(1, 3), rng.int(1, 3), 2], -1.4, 1.4))
      return n("GridSample", [x, grid], { mode: attr.str(rng.pick(["nearest", "linear", "cubic"])), padding_mode: attr.str(rng.pick(["zeros", "border", "reflection"])), align_corners: attr.int(rng.int(0, 1)) })
    }
  }
}

/** A chain of one to three negative-index ops over an NCHW input, each followed at times by an elementwise op (so fusion takes them in). */
export const negativeIndexGraph = (seed: number): GraphCase => {
  const rng = prng(seed)
  const s0 = [rng.int(1, 2), rng.int(1, 3), rng.int(2, 6), rng.int(2, 6)]
  const initializers = new Map<string, Tensor>()
  const cst = (t: Tensor) => {
    const name = `c${initializers.size}`
    initializers.set(name, t)
    return name
  }
  const nodes: Node[] = []
  const inputs = [{ name: "x", type: { dtype: "float32" as const, shape: s0 } }]
  const typed = (last: string): Graph => bindSync(makeGraph({ name: `negative_index_${seed}`, opset: 20, inputs, outputs: [{ name: last, type: { dtype: "float32", shape: [] } }], initializers, nodes }))
  let last = "x"
  let shape: readonly number[] = s0
  for (let k = 0, steps = rng.int(1, 3); k < steps; k++) {
    const op = negativeIndexOp(rng, last, shape, `v${k}`, cst)
    if (!op) continue
    const next = [...nodes, op]
    const s = bindSync(makeGraph({ opset: 20, inputs, outputs: [{ name: op.outputs[0], type: { dtype: "float32", shape: [] } }], initializers, nodes: next })).valueTypes.get(op.outputs[0])!.shape as number[]
    if (s.some((d) => d < 1) || sizeOf(s) > 4096) continue
    nodes.push(op)
    last = op.outputs[0]
    shape = s
    if (rng.next() < 0.5) {
      nodes.push(node(rng.pick(["Relu", "Neg", "Sigmoid"]), [last], [`e${k}`], {}, `e_${k}`))
      last = `e${k}`
    }
  }
  if (last === "x") nodes.push(node("Relu", ["x"], ["y"], {}, "relu_y"))
  return { graph: typed(last === "x" ? "y" : last), inputs: new Map([["x", rand(rng, s0)]]) }
}

const arbNegativeIndexGraph = fc.integer({ min: 0, max: 0x7fffffff }).map(negativeIndexGraph)

// ---------------------------------------------------------------------------------------------

/** Graphs a gcc run: one translation unit per law and lane count (gcc costs about a second a batch). */
const RANDOM_BATCH = 20
const NEGATIVE_BATCH = 16

describe("compile → c → run", () => {
  for (const lanes of [0, 4, 16])
    it.skipIf(!HAVE_GCC)(`equals the evaluator on ${RANDOM_BATCH} random graphs in one gcc run (vector lanes ${lanes})${NO_GCC}`, async () => {
      expect(await checkBatch(fc.sample(arbGraphCase({ maxNodes: 10 }), lawParams(RANDOM_BATCH)), lanes)).toBeGreaterThan(0)
    }, 300_000)

  for (const lanes of [0, 16])
    it.skipIf(!HAVE_GCC)(`equals the evaluator where index arithmetic goes negative: padding, ConvTranspose, Resize, Pad, Slice, pooling, GridSample (vector lanes ${lanes})${NO_GCC}`, async () => {
      expect(await checkBatch(fc.sample(arbNegativeIndexGraph, lawParams(NEGATIVE_BATCH)), lanes)).toBeGreaterThan(0)
    }, 300_000)

  it.skipIf(!HAVE_GCC)(`equals the evaluator at opt level 0 (a group per node, every index expression its own kernel)${NO_GCC}`, async () => {
    const cases = [...fc.sample(arbGraphCase({ maxNodes: 8 }), lawParams(6)), ...fc.sample(arbNegativeIndexGraph, lawParams(6))]
    expect(await checkBatch(cases, 4, 0)).toBeGreaterThan(0)
  }, 300_000)
})
