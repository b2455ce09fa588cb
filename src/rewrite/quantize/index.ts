// The quantization pass for fp32 models: a model and calibration inputs in, a QDQ model (the
// format onnxruntime's quantize_static writes, which onnxruntime and Tessera both run) and a
// per-layer report out. Pure: the graphs run through a GraphRunner the caller hands in (runner.ts;
// the reference evaluator by default); no files, clocks or randomness (the caller makes the
// inputs, seeded or read).
//
// 1. prepare: bind the input shapes, fold BatchNormalization into Conv and the other inference
//    simplifications, fold constants (what onnxruntime's quant_pre_process does before it);
// 2. plan (plan.ts): which nodes and activations are quantized; a node of the quantized region
//    with no quantized meaning fails the pass (QuantizationUnsupportedError), unless skipped;
// 3. calibrate (calibrate.ts): the fp32 graph runs on every input, handing back each planned
//    activation, whose min and max are recorded (and, for percentile and entropy, in a second
//    pass its histogram); each activation's range comes from the method;
// 4. insert the Q/DQ pairs (insert-qdq.ts) and encode the model;
// 5. measure: the fp32 and the QDQ graph run on the first inputs, and each quantized layer's
//    dequantized output is compared with the fp32 one (SQNR and relative error).
//
// The parameters depend only on the values the runner hands back, not on their order: a runner
// whose float values equal the evaluator's writes the same bytes. The CLI's compiled runner
// (src/cli/quantize-runner.ts) compiles the graph with every observed value an output; its
// kernels sum in their own order, so a range may move in its last bits (tested: within 1e-5).
import { Effect } from "effect"
import { InputError, type EvalError, type Interrupt } from "../../ast/graph/errors.js"
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
import { planQuantization, type QuantizationPlan, type QuantizedNode } from "./plan.js"
import { evaluatorRunner, type GraphRunner, type ObservedRun } from "./runner.js"

export { CALIBRATION_METHODS, DEFAULT_PERCENTILE, type CalibrationMethod } from "./calibrate.js"
export { QuantizationUnsupportedError, QuantizeOptionError, type UnquantizableNode } from "./errors.js"
export { planQuantization, ROLES, type QuantizationPlan } from "./plan.js"
export { evaluatorRunner, observingInputs, withObservedOutputs, type GraphRunner, type ObservedGraph, type ObservedRun } from "./runner.js"

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
  /** A stop flag (the CLI's SIGINT / SIGTERM / --deadline), checked before each run and, on the evaluator, at each node. */
  readonly interrupt?: Interrupt
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

/** The graph prepared and planned, and what the runs must observe. */
interface Planned {
  readonly g: Graph
  readonly plan: QuantizationPlan
  readonly percentile: number
  /** Each planned tensor's range comes from this value (a folded activation's output for the node before it). */
  readonly rangeSource: (t: string) => string
  /** The values whose range is calibrated. */
  readonly calibrated: ReadonlySet<string>
  /** What the fp32 run hands back: the calibrated values, the layers' reference outputs and the graph's outputs. */
  readonly observe: ReadonlySet<string>
  /** The quantized layers reported (their output has a Q/DQ pair). */
  readonly layerOut: readonly QuantizedNode[]
}

/** Stage 1: options checked, the graph prepared, the plan (its unsupported nodes a typed failure). */
const planStage = (graph: Graph, calibration: readonly ReadonlyMap<string, Tensor>[], options: QuantizeOptions): Planned => {
  if (calibration.length === 0) throw new QuantizeOptionError({ option: "calibration", reason: "needs at least one calibration input" })
  const percentile = options.percentile ?? DEFAULT_PERCENTILE
  if (options.method === "percentile" && !(percentile > 50 && percentile <= 100))
    throw new QuantizeOptionError({ option: "percentile", reason: `${percentile} is not a percentile in (50, 100]` })
  if (graph.opset < 13)
    throw new QuantizeOptionError({ option: "opset", reason: `the model's opset ${graph.opset} is older than 13, which per-axis DequantizeLinear (per-channel weights, int32 biases) needs; re-export it with opset ≥ 13` })
  const first = calibration[0]
  for (const i of graph.inputs) if (!first.has(i.name)) throw new InputError({ input: i.name, reason: "the calibration data has no value for this input" })
  calibration.forEach((feeds, k) => {
    for (const i of graph.inputs) if (!feeds.has(i.name)) throw new InputError({ input: i.name, reason: `calibration input ${k} has no value for it` })
  })
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
  const rangeSource = (t: string) => plan.rangeOf.get(t) ?? t
  const calibrated = new Set(plan.tensors.filter((t) => !plan.shares.has(t)).map(rangeSource))
  const layerOut = plan.nodes.filter((q) => q.node.outputs[0] && plan.tensors.includes(q.node.outputs[0]))
  const observe = new Set([...calibrated, ...layerOut.map((q) => rangeSource(q.node.outputs[0])), ...g.outputs.map((o) => o.name)])
  return { g, plan, percentile, rangeSource, calibrated, observe, layerOut }
}

/** The values of the fp32 run that are calibrated, in a fixed order (min, max and counts do not depend on it). */
const eachCalibrated = (p: Planned, seen: ReadonlyMap<string, Tensor>, each: (name: string, data: ArrayLike<number>) => void): void => {
  for (const name of p.calibrated) {
    const t = seen.get(name)
    if (t) each(name, t.data as ArrayLike<number>)
  }
}

/** Stage 2: calibrate on the fp32 runs, then the Q/DQ pairs with the parameters of the ranges. */
const calibrateStage = (p: Planned, calibration: readonly ReadonlyMap<string, Tensor>[], options: QuantizeOptions, fp32: ObservedRun) => {
  const { plan, rangeSource, calibrated } = p
  const progress = options.onProgress ?? (() => {})
  const minmax = new Map([...calibrated].map((t) => [t, new MinMax()] as const))
  calibration.forEach((feeds, k) => {
    eachCalibrated(p, fp32(feeds), (name, data) => minmax.get(name)!.add(data))
    progress({ phase: "calibrate", done: k + 1, total: calibration.length })
  })
  const seen = new Map([...minmax].map(([k, m]) => [k, m.range()] as const))
  const histograms = new Map<string, Histogram>()
  if (options.method !== "minmax") {
    for (const [t, r] of seen) histograms.set(t, histogramFor(options.method, r)!)
    calibration.forEach((feeds, k) => {
      eachCalibrated(p, fp32(feeds), (name, data) => histograms.get(name)!.add(data))
      progress({ phase: "histogram", done: k + 1, total: calibration.length })
    })
  }
  const params = new Map<string, ActivationParams>()
  const paramsOf = (t: string): ActivationParams => {
    const known = params.get(t)
    if (known) return known
    const shared = plan.shares.get(t)
    const src = rangeSource(t)
    const q = shared !== undefined ? paramsOf(shared) : activationParams(calibratedRange(options.method, seen.get(src)!, histograms.get(src), p.percentile))
    params.set(t, q)
    return q
  }
  for (const t of plan.tensors) paramsOf(t)
  const qdq = insertQdq(p.g, plan, params, options.perChannel)
  // dequantized name in the QDQ graph → fp32 name, for the error of each layer and output
  const wanted = new Map<string, string>()
  for (const q of p.layerOut) wanted.set(qdq.dequantized.get(q.node.outputs[0])!, rangeSource(q.node.outputs[0]))
  for (const o of p.g.outputs) if (!wanted.has(o.name)) wanted.set(o.name, o.name)
  return { seen, params, qdq, wanted }
}

type Calibrated = ReturnType<typeof calibrateStage>

/** Stage 3: each quantized layer's dequantized output against fp32 on the first inputs, and the report. */
const measureStage = (p: Planned, c: Calibrated, calibration: readonly ReadonlyMap<string, Tensor>[], options: QuantizeOptions, fp32: ObservedRun, quantized: ObservedRun): QuantizeResult => {
  const { plan, rangeSource, g } = p
  const { seen, params, qdq, wanted } = c
  const progress = options.onProgress ?? (() => {})
  const errorInputs = Math.min(calibration.length, Math.max(1, options.errorSamples ?? 4))
  const sums = new Map<string, { signal: number; noise: number }>()
  for (let k = 0; k < errorInputs; k++) {
    const reference = fp32(calibration[k])
    const outs = quantized(calibration[k])
    for (const [o, r] of wanted) {
      const ref = reference.get(r)
      const got = outs.get(o)
      if (!ref || !got) continue
      const s = sums.get(o) ?? { signal: 0, noise: 0 }
      const a = ref.data as ArrayLike<number>
      const b = got.data as ArrayLike<number>
      for (let i = 0; i < a.length; i++) {
        s.signal += a[i] * a[i]
        s.noise += (a[i] - b[i]) * (a[i] - b[i])
      }
      sums.set(o, s)
    }
    progress({ phase: "measure", done: k + 1, total: errorInputs })
  }
  const errorOf = (name: string) => {
    const s = sums.get(name) ?? { signal: 0, noise: 0 }
    return { sqnrDb: sqnr(s.signal, s.noise), relError: s.signal > 0 ? Math.sqrt(s.noise / s.signal) : s.noise > 0 ? Infinity : 0 }
  }
  const weightOf = new Map(qdq.weights.map((w) => [w.node, w.scales] as const))
  const foldedInto = new Map<string, string[]>()
  for (const f of plan.folded) foldedInto.set(f.into, [...(foldedInto.get(f.into) ?? []), f.node])
  const layers: LayerReport[] = p.layerOut.map((q) => {
    const t = q.node.outputs[0]
    const qp = params.get(t)!
    const ws = weightOf.get(q.node.name)
    const folded = foldedInto.get(q.node.name)
    return {
      node: q.node.name,
      op: q.node.op,
      output: rangeSource(t),
      scale: qp.scale,
      zeroPoint: qp.zeroPoint,
      clip: clipRange(qp),
      seen: seen.get(rangeSource(plan.shares.get(t) ?? t)) ?? { min: 0, max: 0 },
      ...(ws ? { weightScales: { min: Math.min(...ws), max: Math.max(...ws), count: ws.length } } : {}),
      ...errorOf(qdq.dequantized.get(t)!),
      ...(folded ? { folded } : {}),
    }
  })
  const report: QuantizeReport = {
    method: options.method,
    ...(options.method === "percentile" ? { percentile: p.percentile } : {}),
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

/** The pass as a plain function on the reference evaluator (throws the typed errors). */
export const quantizeModelSync = (graph: Graph, calibration: readonly ReadonlyMap<string, Tensor>[], options: QuantizeOptions): QuantizeResult => {
  const p = planStage(graph, calibration, options)
  const runner = evaluatorRunner(options.interrupt)
  const fp32 = Effect.runSync(runner(p.g, p.observe, "fp32"))
  const c = calibrateStage(p, calibration, options, fp32)
  const quantized = Effect.runSync(runner(c.qdq.graph, new Set(c.wanted.keys()), "qdq"))
  return measureStage(p, c, calibration, options, fp32, quantized)
}

const isQuantizeError = (e: unknown): e is QuantizeError =>
  typeof e === "object" && e !== null && "_tag" in e &&
  ["QuantizationUnsupportedError", "QuantizeOptionError", "UnsupportedOpError", "NodeError", "InputError", "GraphError", "InterruptedError"].includes((e as { _tag: string })._tag)

/** A stage's typed throws as failures (anything untyped is a defect). */
const stage = <A>(f: () => A): Effect.Effect<A, QuantizeError> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(f())
    } catch (e) {
      return isQuantizeError(e) ? Effect.fail(e) : Effect.die(e)
    }
  })

/**
 * The pass: a fp32 model and calibration inputs → the QDQ model's bytes, its graph and the report.
 * `runner` runs the fp32 and the QDQ graph (default: the reference evaluator); its failures (a
 * compiler's) join the pass's. The parameters depend only on the values it hands back: a runner
 * whose values equal the evaluator's writes the same bytes.
 */
export const quantizeModel = <E = never>(
  graph: Graph,
  calibration: readonly ReadonlyMap<string, Tensor>[],
  options: QuantizeOptions,
  runner: GraphRunner<E> = evaluatorRunner(options.interrupt),
): Effect.Effect<QuantizeResult, QuantizeError | E> =>
  Effect.gen(function* () {
    const p = yield* stage(() => planStage(graph, calibration, options))
    const fp32 = yield* runner(p.g, p.observe, "fp32")
    const c = yield* stage(() => calibrateStage(p, calibration, options, fp32))
    const quantized = yield* runner(c.qdq.graph, new Set(c.wanted.keys()), "qdq")
    return yield* stage(() => measureStage(p, c, calibration, options, fp32, quantized))
  })
