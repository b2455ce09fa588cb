// How the fuzzer (scripts/fuzz.ts) judges a target's outputs against the interpreter's: pure, no
// I/O, seeded; its own module so the test suite can check the judging itself
// (test/fuzz-judge.test.ts). Three things beside the plain tolerance, each narrow on purpose:
//
// - **Undefined casts.** ONNX leaves a Cast (or CastLike) from a float to an integer type undefined
//   when the truncated value is outside the type's range (NaN and ±Inf included): the interpreter
//   wraps like JavaScript's typed arrays, wasm saturates, C is undefined. `undefinedCast` finds each
//   such cast as the interpreter runs; an output that depends on one (`downstreamOf`) and differs
//   is `undefined-cast`, not a wrong answer. Any other output of the case is still compared.
// - **Ill-conditioned outputs.** The interpreter computes some ops in float64, the targets in
//   float32, so an output whose value hangs on rounding (a LayerNorm of a constant row, the mean of
//   values just centred, a variance that cancels to about 0 under a zero epsilon) may differ by far
//   more than the tolerance with no bug on either side. `perturbedFeeds` reruns the interpreter with
//   every float input and every float initializer of more than one value scaled by (1 + δu), and
//   `perturbOutputs` scales every node's float outputs the same way as they are computed (the
//   rounding a float32 target adds at each op, summands of a reduction included), δ = 2^-20 (16
//   float32 ulps), u uniform in [-1, 1] from the seed, twice; the spread s_i = max |perturbed_i − ref_i| is the output's own
//   sensitivity to rounding of that size (an empirical condition), and the target's value may then
//   differ by the plain tolerance + K·s_i, K = 4. An element the perturbation does not move keeps
//   the plain tolerance, so a wrong index, a missed broadcast or a wrong op in a well-conditioned
//   output is still a wrong answer. Only when the difference is within that widened bound is the
//   outcome `ill-conditioned` (counted, not a finding).
// - **Edge floats**: in a case whose mutations put NaN, ±Inf or ±1e38 in, a value not finite on one
//   side, or huge on both, is `edge-float`; so is any difference in an output downstream of a node
//   that computed with a value at |v| ≥ 2^64 or not finite (`hugeValue`) — one that holds such a
//   value, or took one in and is not a move or selection (`computesWith`: a Gather of the ordinary
//   rows of a table with one 1e38 in it computes nothing and stays compared). Past 2^64 a square
//   overflows float32, so a variance, a norm or a product of two such values leaves the range: the
//   float32 targets and the evaluator (float64 inside some ops) part ways there with no bug on
//   either side. Outputs the edge values do not reach are compared as usual.
import type { Graph, Node } from "../src/ast/graph/graph.js"
import { isFloat, type DType } from "../src/ast/graph/dtype.js"
import { prng } from "../src/ast/graph/arbitrary-builder.js"
import { INT64_EXACT_IN_DOUBLE } from "../src/ast/graph/ops/exact-int64.js"
import { fromArray, type Tensor } from "../src/ast/graph/tensor.js"

export const RTOL = 1e-3
export const ATOL = 1e-4
/** The relative size of the perturbation (16 float32 ulps) and the factor on the spread it shows. */
export const PERTURB = 2 ** -20
export const SPREAD_FACTOR = 4

/** [lo, hi): the values an integer type holds, as doubles (2^63 and 2^64 are exact). */
const INT_RANGE: Partial<Record<DType, readonly [number, number]>> = {
  int8: [-(2 ** 7), 2 ** 7],
  uint8: [0, 2 ** 8],
  int16: [-(2 ** 15), 2 ** 15],
  uint16: [0, 2 ** 16],
  int32: [-(2 ** 31), 2 ** 31],
  uint32: [0, 2 ** 32],
  int64: [-(2 ** 63), 2 ** 63],
  uint64: [0, 2 ** 64],
}

/**
 * The first value a float → integer Cast / CastLike cannot represent (NaN, ±Inf, or out of the
 * type's range after truncation), as a message; undefined when every value fits (or the node is
 * not such a cast).
 */
export const undefinedCast = (node: Node, inputs: readonly (Tensor | undefined)[], outputs: readonly Tensor[]): string | undefined => {
  if (node.op !== "Cast" && node.op !== "CastLike") return undefined
  const x = inputs[0]
  const y = outputs[0]
  if (!x || !y || !isFloat(x.dtype)) return undefined
  const range = INT_RANGE[y.dtype]
  if (!range) return undefined
  const d = x.data as ArrayLike<number>
  for (let i = 0; i < d.length; i++) {
    const t = Math.trunc(d[i])
    if (!(t >= range[0] && t < range[1])) return `${node.op} '${node.name}' of ${d[i]} (${x.dtype}) to ${y.dtype} [${i}]: out of range, undefined in ONNX`
  }
  return undefined
}

/** Whether a float tensor holds a value not finite or of magnitude ≥ 2^64 (its square overflows float32). */
export const hugeValue = (t: Tensor): boolean => {
  if (!isFloat(t.dtype)) return false
  const d = t.data as ArrayLike<number>
  for (let i = 0; i < d.length; i++) if (!(Math.abs(d[i]) < 2 ** 64) && !Number.isNaN(d[i])) return true
  for (let i = 0; i < d.length; i++) if (Number.isNaN(d[i])) return true
  return false
}

/**
 * Whether a node computed with a value past 2^64 or not finite: it holds one in an output, or took
 * one in and is not an op that only moves, selects or compares values (INT64_EXACT_IN_DOUBLE: the
 * moves, ArgMax / ArgMin, Max / Min, Cast, Trilu…), whose outputs are exact whatever they hold.
 */
export const computesWith = (node: Node, inputs: readonly (Tensor | undefined)[], outputs: readonly Tensor[]): boolean =>
  outputs.some(hugeValue) || (!INT64_EXACT_IN_DOUBLE.has(node.op) && inputs.some((t) => t !== undefined && hugeValue(t)))

/** Every value computed from one of `roots` in the graph's top-level nodes (roots included). */
export const downstreamOf = (graph: Graph, roots: Iterable<string>): Set<string> => {
  const reached = new Set(roots)
  // nodes are in topological order (the decoder and the builder keep them so)
  for (const n of graph.nodes) if (n.inputs.some((i) => i !== "" && reached.has(i))) for (const o of n.outputs) if (o !== "") reached.add(o)
  return reached
}

/** The graph with its float initializers, and the feeds, scaled by (1 + δu) from `seed`; other dtypes as they are. */
export const perturbedFeeds = (graph: Graph, feeds: ReadonlyMap<string, Tensor>, seed: number): { graph: Graph; feeds: Map<string, Tensor> } => {
  const rng = prng(seed)
  const perturb = (t: Tensor): Tensor => {
    if (!isFloat(t.dtype)) return t
    const d = t.data as ArrayLike<number>
    return fromArray(t.dtype, t.shape, Array.from(d, (v) => v * (1 + PERTURB * (2 * rng.next() - 1))))
  }
  // (a float initializer of one value is left alone: it is an exponent, an epsilon, a divisor or a
  // bound more often than data, and Pow(x, 2 + 2^-20) of a negative x is NaN, a change of the
  // computation, not of its rounding)
  const inits = new Map([...graph.initializers].map(([k, t]) => [k, t.data.length > 1 ? perturb(t) : t] as const))
  return { graph: { ...graph, initializers: inits }, feeds: new Map([...feeds].map(([k, t]) => [k, perturb(t)] as const)) }
}

/**
 * An evaluator observer that scales each node's float outputs by (1 + δu) in place, as they are
 * computed; integer values (Floor's, Relu's zeros, shapes held as floats) are exact in float32 too
 * and stay, and an output that shares its storage with an input (Identity, Reshape) is left alone.
 */
export const perturbOutputs = (seed: number) => {
  const rng = prng(seed)
  return (_node: Node, inputs: readonly (Tensor | undefined)[], outputs: readonly Tensor[]): void => {
    for (const t of outputs) {
      if (t.dtype !== "float32" && t.dtype !== "float64") continue
      if (inputs.some((i) => i?.data === t.data)) continue
      const d = t.data as Float32Array | Float64Array
      for (let i = 0; i < d.length; i++) if (!Number.isInteger(d[i]) && Number.isFinite(d[i])) d[i] *= 1 + PERTURB * (2 * rng.next() - 1)
    }
  }
}

export type Judgement =
  | { readonly kind: "ok" }
  | { readonly kind: "wrong" | "edge-float" | "undefined-cast" | "ill-conditioned"; readonly message: string }

export interface JudgeOptions {
  /** The case's mutations put edge floats in. */
  readonly edgeFloats: boolean
  /** Outputs downstream of a node that computed with a value past 2^64 or not finite (`computesWith`), with which; used only with `edgeFloats`. */
  readonly hugeBy: ReadonlyMap<string, string>
  /** Outputs that depend on an undefined cast, with the cast's message. */
  readonly undefinedBy: ReadonlyMap<string, string>
  /** The interpreter's outputs under perturbed inputs (`perturbedFeeds`), asked for only when some value is off. */
  readonly perturbed: () => readonly ReadonlyMap<string, Tensor>[]
}

/**
 * `got` against the interpreter's `ref`: same shapes, values within tolerance (NaN with NaN,
 * infinities equal); the first difference decides the outcome, as the file header says. A worse
 * outcome of a later output is not hidden by a milder one of an earlier: wrong beats the rest.
 */
export const judge = (ref: ReadonlyMap<string, Tensor>, got: ReadonlyMap<string, Tensor>, o: JudgeOptions): Judgement => {
  let mild: Judgement = { kind: "ok" }
  let spreads: readonly ReadonlyMap<string, Tensor>[] | undefined
  for (const [name, want] of ref) {
    const have = got.get(name)
    if (!have) return { kind: "wrong", message: `output '${name}' missing` }
    if (have.shape.join("x") !== want.shape.join("x")) return { kind: "wrong", message: `output '${name}': shape ${have.shape.join("x")}, interp ${want.shape.join("x")}` }
    const w = want.data as ArrayLike<number | bigint>
    const h = have.data as ArrayLike<number | bigint>
    let scale = 0
    for (let i = 0; i < w.length; i++) {
      const x = Number(w[i])
      if (Number.isFinite(x)) scale = Math.max(scale, Math.abs(x))
    }
    for (let i = 0; i < w.length; i++) {
      const a = Number(h[i])
      const b = Number(w[i])
      if (Number.isNaN(a) && Number.isNaN(b)) continue
      if (a === b) continue
      const tol = ATOL + RTOL * (Math.abs(b) + scale / 10)
      if (Math.abs(a - b) <= tol) continue
      const at = `output '${name}' [${i}]: ${a}, interp ${b}`
      const cast = o.undefinedBy.get(name)
      if (cast !== undefined) {
        if (mild.kind === "ok") mild = { kind: "undefined-cast", message: `${at}: after ${cast}` }
        break
      }
      const huge = o.edgeFloats ? o.hugeBy.get(name) : undefined
      if (o.edgeFloats && (huge !== undefined || !Number.isFinite(a) || !Number.isFinite(b) || (Math.abs(a) > 1e30 && Math.abs(b) > 1e30))) {
        if (mild.kind === "ok") mild = { kind: "edge-float", message: huge ? `${at}: computed from ${huge}` : at }
        break
      }
      spreads ??= o.perturbed()
      let spread = 0
      for (const p of spreads) {
        const t = p.get(name)
        if (!t || t.shape.join("x") !== want.shape.join("x")) continue
        const v = Number((t.data as ArrayLike<number | bigint>)[i])
        spread = Math.max(spread, Number.isNaN(v) !== Number.isNaN(b) ? Infinity : Number.isNaN(v) ? 0 : Math.abs(v - b))
      }
      if (Math.abs(a - b) <= tol + SPREAD_FACTOR * spread) {
        if (mild.kind === "ok") mild = { kind: "ill-conditioned", message: `${at} (the interpreter moves by ${spread.toPrecision(3)} under a 2^-20 perturbation of its float inputs and op outputs)` }
        continue
      }
      return { kind: "wrong", message: `${at} (${want.dtype}, ${w.length} elements${spread > 0 ? `; perturbed interp spread ${spread.toPrecision(3)}` : ""})` }
    }
  }
  return mild
}
