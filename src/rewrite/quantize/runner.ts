// What runs the graphs the quantization pass observes: the fp32 graph on the calibration inputs
// (every planned activation's values) and, on the first inputs, the fp32 and the QDQ graph for
// the per-layer error. The pass asks for a run of a graph that hands back the values it names; by
// default the reference evaluator gives it (pure, the ONNX meaning), and a caller with a compiler
// at hand gives one of its own (the CLI: the graph compiled for c, wasm or js with every observed
// value made a graph output), which is many times faster and sums in its own order.
import { Effect } from "effect"
import { checkInterrupt, type Interrupt } from "../../ast/graph/errors.js"
import { checkFeeds, newRunLimits, runGraph } from "../../ast/graph/evaluate.js"
import type { Graph } from "../../ast/graph/graph.js"
import type { Tensor } from "../../ast/graph/tensor.js"

/** One run of a graph on one set of inputs: the values asked for, by name (inputs included). */
export type ObservedRun = (feeds: ReadonlyMap<string, Tensor>) => ReadonlyMap<string, Tensor>

/**
 * Which graph a run is made for: the fp32 model (calibration and the error's reference), or the
 * QDQ model the pass wrote (its meaning is the float QDQ graph: a compiled run must not rewrite it
 * to integer ops first).
 */
export type ObservedGraph = "fp32" | "qdq"

/** Makes a run of `graph` (shapes bound) that hands back the values of `observe`. */
export type GraphRunner<E = never> = (graph: Graph, observe: ReadonlySet<string>, which: ObservedGraph) => Effect.Effect<ObservedRun, E>

/** The reference evaluator as the runner: the values handed to its observer as each node runs. */
export const evaluatorRunner =
  (interrupt?: Interrupt): GraphRunner<never> =>
  (graph, observe) =>
    Effect.succeed((feeds) => {
      checkInterrupt(interrupt, () => "the next calibration input")
      checkFeeds(graph, feeds)
      const seen = new Map<string, Tensor>()
      for (const i of graph.inputs) if (observe.has(i.name)) seen.set(i.name, feeds.get(i.name)!)
      runGraph(graph, feeds, undefined, (n, _i, outs) => n.outputs.forEach((o, k) => observe.has(o) && outs[k] && seen.set(o, outs[k])), newRunLimits(interrupt))
      return seen
    })

/** The graph with every observed value that is not already one made an output (its type from the bound graph). */
export const withObservedOutputs = (graph: Graph, observe: ReadonlySet<string>): Graph => {
  const have = new Set([...graph.inputs.map((i) => i.name), ...graph.outputs.map((o) => o.name)])
  const extra = [...observe].filter((v) => !have.has(v) && !graph.initializers.has(v))
  const outputs = extra.map((name) => {
    const type = graph.valueTypes.get(name)
    if (!type) throw new Error(`withObservedOutputs: '${name}' has no type in the bound graph`)
    return { name, type }
  })
  return { ...graph, outputs: [...graph.outputs, ...outputs] }
}

/** A run that hands back the inputs asked for as well (a compiled model returns only its outputs). */
export const observingInputs = (graph: Graph, observe: ReadonlySet<string>, run: (feeds: ReadonlyMap<string, Tensor>) => ReadonlyMap<string, Tensor>): ObservedRun => (feeds) => {
  const outs = run(feeds)
  const seen = new Map<string, Tensor>()
  for (const i of graph.inputs) if (observe.has(i.name)) seen.set(i.name, feeds.get(i.name)!)
  for (const v of observe) {
    const t = outs.get(v)
    if (t) seen.set(v, t)
  }
  return seen
}

