// The quantization pass for fp32 models: a model and calibration inputs in, a QDQ model (the
// format onnxruntime's quantize_static writes, which onnxruntime and Tessera both run) and a
// per-layer report out. Pure: the calibration runs the reference evaluator; no files, clocks or
// randomness (the caller makes the inputs, seeded or read).
//
// 1. prepare: bind the input shapes, fold BatchNormalization into Conv and the other inference
//    simplifications, fold constants (what onnxruntime's quant_pre_process does before it);
// 2. plan (plan.ts): which nodes and activations are quantized; a node of the quantized region
//    with no quantized meaning fails the pass (QuantizationUnsupportedError), unless skipped;
// 3. calibrate (calibrate.ts): the fp32 graph runs on every input with an observer that records
//    each planned activation's min and max (and, for percentile and entropy, a second pass its
//    histogram), and each activation's range comes from the method;
// 4. insert the Q/DQ pairs (insert-qdq.ts) and encode the model;
// 5. measure: the fp32 and the QDQ graph run on the first inputs, and each quantized layer's
//    dequantized output is compared with the fp32 one (SQNR and relative error).
//
// Why the reference evaluator and not the compiled c model: calibration needs every
// intermediate activation, which the evaluator hands to an observer as it runs, in the graph's
// own names; a compiled model fuses them away, and making each one an output would compile a
// different model (no fusion) that is slower than the evaluator for the 32 inputs calibration
// runs. The evaluator is also the meaning the QDQ model is checked against.
import { Effect } from "effect"
import { InputError, type EvalError } from "../../ast/graph/errors.js"
import { checkFeeds, runGraph, type NodeObserver } from "../../ast/graph/evaluate.js"
import type { Graph, Node } from "../../ast/graph/graph.js"
import { bindSync } from "../../ast/graph/infer.js"
import type { Tensor } from "../../ast/graph/tensor.js"
import { encodeOnnx } from "../../ast/onnx/encode.js"
import { eliminateDeadCodeSync } from "../eliminate-dead-code.js"
import { foldConstantsSync } from "../fold-constants.js"
import { simplifyInferenceSync } from "../simplify-inference.js"
import { calibratedRange, DEFAULT_PERCENTILE, histogramFor, MinMax, type CalibrationMethod, type Histogram } from "./calibrate.js"
import { QuantizationUnsupportedError, QuantizeOptionError } from "./errors.js"
import { insertQdq } from "./insert-qdq.js"
import { activationParams, clipRange, type ActivationParams, type Range } from "./params.js"
import { planQuantization } from "./plan.js"

export { CALIBRATION_METHODS, DEFAULT_PERCENTILE, type CalibrationMethod } from "./calibrate.js"
export { QuantizationUnsupportedError, QuantizeOptionError, type UnquantizableNode } from "./errors.js"
export { planQuantization, ROLES, type QuantizationPlan } from "./plan.js"

export interface QuantizeOptions {
  readonly method: CalibrationMethod
  /** percentile: the percentile kept (default 99.99). */
  readonly percentile?: number
  /** Weights per output channel (axis 0 of Conv, the output axis of Gemm / MatMul). */
  readonly perChannel: boolean
  /** Nodes left float on purpose. */
  readonly skip?: readonly string[]
  /** Inputs the per-layer error is measured on (the first ones; default 4). */
  readonly errorSamples?: number
  /** Called as the work advances (the CLI draws a bar with it). */
  readonly onProgress?: (p: QuantizeProgress) => void
}

export interface QuantizeProgress {
  readonly phase: "calibrate" | "histogram" | "measure"
  readonly done: number
  readonly total: number
}

/** One quantized layer of the report. */
export interface LayerReport {
  readonly node: string
  readonly op: string
  /** The tensor quantized after it (the folded activation's output where one was folded). */
  readonly output: string
  readonly scale: number
  readonly zeroPoint: number
  /** What quantizing clips the output to: [(-128 - zp) · scale, (127 - zp) · scale]. */
  readonly clip: Range
  /** The range seen in calibration (the value the method started from). */
  readonly seen: Range
  /** Weighted layers: the smallest and largest weight scale, and how many. */
  readonly weightScales?: { readonly min: number; readonly max: number; readonly count: number }
  /** Signal-to-quantization-noise ratio of the layer's dequantized output against fp32 (dB). */
  readonly sqnrDb: number
  /** ‖q - fp32‖ / ‖fp32‖ of the same. */
  readonly relError: number
  /** Activations folded into this layer's range (ReLU, ReLU6). */
  readonly folded?: readonly string[]
}

export interface QuantizeReport {
  readonly method: CalibrationMethod
  readonly percentile?: number
  readonly perChannel: boolean
  readonly calibrationInputs: number
  readonly errorInputs: number
  readonly activationType: "int8"
  readonly weightType: "int8"
  readonly layers: readonly LayerReport[]
  readonly skipped: readonly string[]
  /** Each graph output's error against fp32. */
  readonly outputs: readonly { readonly name: string; readonly sqnrDb: number; readonly relError: number }[]
}

export interface QuantizeResult {
  readonly bytes: Uint8Array
  readonly graph: Graph
  readonly report: QuantizeReport
}

export type QuantizeError = QuantizationUnsupportedError | QuantizeOptionError | EvalError

/** BatchNormalization folded into Conv renames the Conv `NAME_bn`: give it its name back. */
const restoreNames = (before: Graph, after: Graph): Graph => {
  const original = new Set(before.nodes.map((n) => n.name))
  const taken = new Set(after.nodes.map((n) => n.name))
  const nodes = after.nodes.map((n): Node => {
    const m = /^(.*)_bn(_\d+)?$/.exec(n.name)
    if (m && original.has(m[1]) && !taken.has(m[1])) {
      taken.add(m[1])
      return { ...n, name: m[1] }
    }
    return n
  })
  return { ...after, nodes }
}

/** The graph the pass quantizes: shapes bound, BatchNorm folded, constants folded. */
export const prepareForQuantization = (graph: Graph, shapes: ReadonlyMap<string, readonly number[]>): Graph => {
  const bound = bindSync(graph, shapes, { requireStatic: true })
  const simplified = eliminateDeadCodeSync(foldConstantsSync(simplifyInferenceSync(bound)))
  return bindSync(restoreNames(graph, simplified), shapes, { requireStatic: true })
}

const sqnr = (signal: number, noise: number): number => (noise === 0 ? Infinity : signal === 0 ? -Infinity : 10 * Math.log10(signal / noise))

const run = (g: Graph, feeds: ReadonlyMap<string, Tensor>, observe: NodeObserver): void => {
  checkFeeds(g, feeds)
  runGraph(g, feeds, undefined, observe)
}

/** The pass as a plain function (throws the typed errors). */
export const quantizeModelSync = (graph: Graph, calibration: readonly ReadonlyMap<string, Tensor>[], options: QuantizeOptions): QuantizeResult => {
  if (calibration.length === 0) throw new QuantizeOptionError({ option: "calibration", reason: "needs at least one calibration input" })
  const percentile = options.percentile ?? DEFAULT_PERCENTILE
  if (options.method === "percentile" && !(percentile > 50 && percentile <= 100))
    throw new QuantizeOptionError({ option: "percentile", reason: `${percentile} is not a percentile in (50, 100]` })
  if (graph.opset < 13)
    throw new QuantizeOptionError({ option: "opset", reason: `the model's opset ${graph.opset} is older than 13, which per-axis DequantizeLinear (per-channel weights, int32 biases) needs; re-export it with opset ≥ 13` })
  const first = calibration[0]
  for (const i of graph.inputs) if (!first.has(i.name)) throw new InputError({ input: i.name, reason: "the calibration data has no value for this input" })
  const shapes = new Map([...first].map(([k, t]) => [k, t.shape] as const))
  const g = prepareForQuantization(graph, shapes)

  const skip = new Set(options.skip ?? [])
  const names = new Set(g.nodes.map((n) => n.name))
  const missing = [...skip].filter((s) => !names.has(s))
  if (missing.length)
    throw new QuantizeOptionError({
      option: "skip",
      reason: `no node named ${missing.map((m) => `'${m}'`).join(", ")} in the model (after BatchNormalization folding; its nodes include ${g.nodes.slice(0, 6).map((n) => `'${n.name}'`).join(", ")}…)`,
    })
  const plan = planQuantization(g, skip)
  if (plan.unsupported.length) throw new QuantizationUnsupportedError({ nodes: plan.unsupported })

  // calibrate: the value each planned tensor's range is taken from
  const rangeSource = (t: string) => plan.rangeOf.get(t) ?? t
  const calibrated = new Set(plan.tensors.filter((t) => !plan.shares.has(t)).map(rangeSource))
  const minmax = new Map([...calibrated].map((t) => [t, new MinMax()] as const))
  const inputNames = new Set(g.inputs.map((i) => i.name))
  const progress = options.onProgress ?? (() => {})
  const visit = (feeds: ReadonlyMap<string, Tensor>, each: (name: string, data: ArrayLike<number>) => void) => {
    for (const name of inputNames) if (calibrated.has(name)) each(name, feeds.get(name)!.data as ArrayLike<number>)
    run(g, feeds, (n, _i, outs) => n.outputs.forEach((o, k) => calibrated.has(o) && outs[k] && each(o, outs[k].data as ArrayLike<number>)))
  }
  calibration.forEach((feeds, k) => {
    for (const i of graph.inputs) if (!feeds.has(i.name)) throw new InputError({ input: i.name, reason: `calibration input ${k} has no value for it` })
    visit(feeds, (name, data) => minmax.get(name)!.add(data))
    progress({ phase: "calibrate", done: k + 1, total: calibration.length })
  })
  const seen = new Map([...minmax].map(([k, m]) => [k, m.range()] as const))
  const histograms = new Map<string, Histogram>()
  if (options.method !== "minmax") {
    for (const [t, r] of seen) histograms.set(t, histogramFor(options.method, r)!)
    calibration.forEach((feeds, k) => {
      visit(feeds, (name, data) => histograms.get(name)!.add(data))
      progress({ phase: "histogram", done: k + 1, total: calibration.length })
    })
  }
  const params = new Map<string, ActivationParams>()
  const paramsOf = (t: string): ActivationParams => {
    const known = params.get(t)
    if (known) return known
    const shared = plan.shares.get(t)
    const src = rangeSource(t)
    const p = shared !== undefined ? paramsOf(shared) : activationParams(calibratedRange(options.method, seen.get(src)!, histograms.get(src), percentile))
    params.set(t, p)
    return p
  }
  for (const t of plan.tensors) paramsOf(t)

  const qdq = insertQdq(g, plan, params, options.perChannel)

  // measure each quantized layer's output against fp32 on the first inputs
  const errorInputs = Math.min(calibration.length, Math.max(1, options.errorSamples ?? 4))
  const layerOut = plan.nodes.filter((q) => q.node.outputs[0] && plan.tensors.includes(q.node.outputs[0]))
  const refName = (t: string) => rangeSource(t)
  const wanted = new Map<string, string>() // dequantized name in the QDQ graph → fp32 name
  for (const q of layerOut) wanted.set(qdq.dequantized.get(q.node.outputs[0])!, refName(q.node.outputs[0]))
  for (const o of g.outputs) if (!wanted.has(o.name)) wanted.set(o.name, o.name)
  const refs = new Set(wanted.values())
  const sums = new Map<string, { signal: number; noise: number }>()
  for (let k = 0; k < errorInputs; k++) {
    const feeds = calibration[k]
    const reference = new Map<string, Tensor>()
    for (const i of g.inputs) if (refs.has(i.name)) reference.set(i.name, feeds.get(i.name)!)
    run(g, feeds, (n, _i, outs) => n.outputs.forEach((o, j) => refs.has(o) && outs[j] && reference.set(o, outs[j])))
    run(qdq.graph, feeds, (n, _i, outs) =>
      n.outputs.forEach((o, j) => {
        const r = wanted.get(o)
        const ref = r !== undefined ? reference.get(r) : undefined
        if (!ref || !outs[j]) return
        const s = sums.get(o) ?? { signal: 0, noise: 0 }
        const a = ref.data as ArrayLike<number>
        const b = outs[j].data as ArrayLike<number>
        for (let i = 0; i < a.length; i++) {
          s.signal += a[i] * a[i]
          s.noise += (a[i] - b[i]) * (a[i] - b[i])
        }
        sums.set(o, s)
      }),
    )
    progress({ phase: "measure", done: k + 1, total: errorInputs })
  }
  const errorOf = (name: string) => {
    const s = sums.get(name) ?? { signal: 0, noise: 0 }
    return { sqnrDb: sqnr(s.signal, s.noise), relError: s.signal > 0 ? Math.sqrt(s.noise / s.signal) : s.noise > 0 ? Infinity : 0 }
  }
  const weightOf = new Map(qdq.weights.map((w) => [w.node, w.scales] as const))
  const foldedInto = new Map<string, string[]>()
  for (const f of plan.folded) foldedInto.set(f.into, [...(foldedInto.get(f.into) ?? []), f.node])
  const layers: LayerReport[] = layerOut.map((q) => {
    const t = q.node.outputs[0]
    const p = params.get(t)!
    const ws = weightOf.get(q.node.name)
    const folded = foldedInto.get(q.node.name)
    return {
      node: q.node.name,
      op: q.node.op,
      output: refName(t),
      scale: p.scale,
      zeroPoint: p.zeroPoint,
      clip: clipRange(p),
      seen: seen.get(rangeSource(plan.shares.get(t) ?? t)) ?? { min: 0, max: 0 },
      ...(ws ? { weightScales: { min: Math.min(...ws), max: Math.max(...ws), count: ws.length } } : {}),
      ...errorOf(qdq.dequantized.get(t)!),
      ...(folded ? { folded } : {}),
    }
  })
  const report: QuantizeReport = {
    method: options.method,
    ...(options.method === "percentile" ? { percentile } : {}),
    perChannel: options.perChannel,
    calibrationInputs: calibration.length,
    errorInputs,
    activationType: "int8",
    weightType: "int8",
    layers,
    skipped: plan.skipped,
    outputs: g.outputs.map((o) => ({ name: o.name, ...errorOf(o.name) })),
  }
  return { bytes: encodeOnnx(qdq.graph), graph: qdq.graph, report }
}

const isQuantizeError = (e: unknown): e is QuantizeError =>
  typeof e === "object" && e !== null && "_tag" in e &&
  ["QuantizationUnsupportedError", "QuantizeOptionError", "UnsupportedOpError", "NodeError", "InputError", "GraphError", "InterruptedError"].includes((e as { _tag: string })._tag)

/** The pass: a fp32 model and calibration inputs → the QDQ model's bytes, its graph and the report (anything untyped is a defect). */
export const quantizeModel = (graph: Graph, calibration: readonly ReadonlyMap<string, Tensor>[], options: QuantizeOptions): Effect.Effect<QuantizeResult, QuantizeError> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(quantizeModelSync(graph, calibration, options))
    } catch (e) {
      return isQuantizeError(e) ? Effect.fail(e) : Effect.die(e)
    }
  })
