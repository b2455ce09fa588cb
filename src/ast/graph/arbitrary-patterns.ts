// Graphs that spell out, op by op, what exporters write for LayerNormalization, Gelu and
// HardSwish (recognize-patterns.ts), in every association and operand order the rules accept, and
// near misses that must stay as they are: a constant a little off, a value read outside the
// pattern, axes that differ or do not trail, a Mul tree of four factors, a LayerNormalization with
// its statistics read. Each case says which ops the graph must consist of once the patterns are
// recognised (and the dead nodes removed): one node per planted pattern, the affine Mul / Add after
// a LayerNormalization absorbed into it, every near miss left node for node.
import * as fc from "fast-check"
import { attr, type Attrs } from "./attrs.js"
import { graphBuilder, prng, randomTensor, type GraphBuilder, type GraphCase, type Val } from "./arbitrary-builder.js"
import type { DType } from "./dtype.js"
import { fromArray } from "./tensor.js"

export interface PatternCase extends GraphCase {
  /** The ops of the graph with every planted pattern recognised (a multiset, sorted). */
  readonly expected: readonly string[]
  /** How often each rule fires on the way (by rule name). */
  readonly fired: ReadonlyMap<string, number>
  /** How many patterns were planted (recognisable), and how many near misses. */
  readonly planted: number
  readonly nearMisses: number
}

interface Ctx {
  readonly b: GraphBuilder
  readonly dtype: DType
  readonly opset: number
  /** The ops that must remain, one per node. */
  readonly kept: string[]
  /** Values made graph outputs (read outside the pattern). */
  readonly side: Val[]
  /** How often each rule must fire. */
  readonly fired: Map<string, number>
}
const fire = (c: Ctx, rule: string) => c.fired.set(rule, (c.fired.get(rule) ?? 0) + 1)

const scalar = (c: Ctx, v: number): Val => c.b.constant(fromArray(c.dtype, c.b.rng.next() < 0.5 ? [] : [1], [v]))
/** A constant the rules compare with a tolerance (1e-5 relative to max(1, |v|), `tol`): exact, or off by most of the tolerance. */
const nearly = (c: Ctx, v: number, tol = 1e-5): Val => scalar(c, c.b.rng.next() < 0.5 ? v : v + c.b.rng.pick([-0.8, 0.8]) * tol * Math.max(1, Math.abs(v)))
/** Not a scalar: `v` first along the last dim of `x`, other values after it (broadcast, it changes the result). */
const vectorOf = (c: Ctx, x: Val, v: number): Val => {
  const D = x.shape[x.shape.length - 1]
  return c.b.constant(fromArray(c.dtype, [D], Array.from({ length: D }, (_, i) => (i === 0 ? v : v + 0.5 + i / 4))))
}
/** A one-element constant of rank 5: a scalar that broadcasts the result to a higher rank. */
const rankUp = (c: Ctx, v: number): Val => c.b.constant(fromArray(c.dtype, [1, 1, 1, 1, 1], [v]))
const filled = (c: Ctx, shape: readonly number[], lo: number, hi: number): Val => c.b.constant(randomTensor(c.b.rng, shape, lo, hi, c.dtype))
/** Two operands in either order. */
const swap = <T>(c: Ctx, a: T, b: T): [T, T] => (c.b.rng.next() < 0.5 ? [a, b] : [b, a])
/** A near miss keeps every node it made. */
const keepAll = (c: Ctx, ops: readonly string[]) => c.kept.push(...ops)
/** `v` read outside the pattern: a graph output, or read by one more node (whose value is one). */
const readOutside = (c: Ctx, v: Val) => {
  if (c.b.rng.next() < 0.5) c.side.push(v)
  else {
    c.kept.push("Tanh")
    c.side.push(c.b.op1("Tanh", [v]))
  }
}

/** ReduceMean over `axes` (every axis when undefined) with keepdims (or not), the axes as the opset spells them. */
const reduceMean = (c: Ctx, x: Val, axes0: readonly number[] | undefined, keepdims = 1): Val => {
  let axes = axes0
  const keep: Attrs = keepdims === 0 || c.b.rng.next() < 0.5 ? { keepdims: attr.int(keepdims) } : {}
  // every axis: no axes at all, or an empty list of them
  if (axes === undefined && c.b.rng.next() < 0.5) return c.b.op1("ReduceMean", [x], keep)
  if (axes === undefined) axes = []
  return c.opset >= 18
    ? c.b.op1("ReduceMean", [x, c.b.constant(fromArray("int64", [axes.length], axes), "axes")], keep)
    : c.b.op1("ReduceMean", [x], { axes: attr.ints(axes), ...keep })
}

/** The trailing axes [rank-k, …, rank-1], spelled negative or positive, in either order. */
const trailing = (c: Ctx, rank: number, k: number): number[] => {
  const axes = Array.from({ length: k }, (_, i) => rank - k + i).map((a) => (c.b.rng.next() < 0.5 ? a - rank : a))
  return c.b.rng.next() < 0.5 ? axes : axes.reverse()
}

const LN_MISSES = [
  "pow3", "pow-vector", "pow-other", "square-of-x", "other-square", "plus-two", "div-d-d", "eps-computed", "eps-vector", "no-eps", "axes-differ", "not-trailing",
  "reduce-all", "reduce-all-first", "keepdims-0", "mul-not-div", "numerator-not-sub", "no-sqrt",
  "d-read", "mean-read", "mean-of-other", "var-read", "sq-read", "ve-read", "sqrt-read",
] as const
type LnMiss = (typeof LN_MISSES)[number]

/**
 * LayerNorm spelled out: Div(d, Sqrt(Add(ReduceMean(d²), ε))), d = x − ReduceMean(x), then an
 * optional Mul by a scale and Add of a shift that fit the normalised dims (absorbed), or that do not.
 */
const layerNormSpelled = (c: Ctx, x: Val): Val => {
  const { b } = c
  const { rng } = b
  const rank = x.shape.length
  const k = rank >= 3 && rng.next() < 0.4 ? 2 : 1
  // keepdims 0 type-checks (and means something else) on a square [D, D] only
  const square = rank === 2 && x.shape[0] === x.shape[1]
  const miss: LnMiss | undefined = square && rng.next() < 0.3 ? "keepdims-0" : rng.next() < 0.5 ? rng.pick(LN_MISSES.filter((m) => m !== "keepdims-0" && (rank > 1 || (m !== "axes-differ" && m !== "not-trailing")))) : undefined
  // a leading axis is never trailing (rank ≥ 2); a second axis set of another length, or the first axis, differs
  const axes1 = miss === "not-trailing" ? (rank >= 3 && rng.next() < 0.5 ? [0, rank - 1] : [rng.pick([0, -rank])]) : trailing(c, rank, k)
  const axes2 = miss === "axes-differ" ? (rank >= 3 ? trailing(c, rank, 3 - k) : [rng.pick([0, -rank])]) : miss === "not-trailing" ? axes1 : trailing(c, rank, k)
  const ops: string[] = []
  const op1 = (op: string, ins: readonly Val[], attrs = {}) => {
    ops.push(op)
    return b.op1(op, ins, attrs)
  }
  const mean = (v: Val, axes: readonly number[] | undefined) => {
    ops.push("ReduceMean")
    return reduceMean(c, v, axes)
  }
  const other = miss === "mean-of-other" ? op1("Abs", [x]) : x
  const m = miss === "reduce-all" || miss === "reduce-all-first" ? mean(other, undefined) : miss === "keepdims-0" ? (ops.push("ReduceMean"), reduceMean(c, other, axes1, 0)) : mean(other, axes1)
  const d = op1("Sub", [x, m])
  const sq =
    miss === "pow3"
      ? op1("Pow", [d, scalar(c, 3)])
      : miss === "pow-vector"
        ? op1("Pow", [d, vectorOf(c, d, 2)])
      : miss === "other-square"
        ? op1("Mul", swap(c, d, op1("Relu", [d])))
      : miss === "pow-other"
        ? op1("Pow", [op1("Relu", [d]), scalar(c, 2)])
      : miss === "square-of-x"
        ? rng.next() < 0.4 ? op1("Pow", [x, scalar(c, 2)]) : op1("Mul", rng.pick([[x, x], [x, d], [d, x]]))
      : miss === "plus-two"
        ? op1("Add", [d, scalar(c, 2)])
      : miss === "div-d-d"
        ? op1("Div", [d, d])
        : rng.next() < 0.5
          ? op1("Pow", [d, scalar(c, 2)])
          : op1("Mul", [d, d])
  const v = mean(sq, miss === "reduce-all" ? undefined : axes2)
  const eps = miss === "eps-computed" ? op1("Abs", [scalar(c, 0.1)]) : miss === "eps-vector" ? vectorOf(c, x, 1e-3) : scalar(c, rng.pick([1e-5, 1e-3, 0.1]))
  const ve = miss === "no-eps" ? v : op1("Add", swap(c, v, eps))
  const root = miss === "no-sqrt" ? ve : op1("Sqrt", [ve])
  const n = op1(miss === "mul-not-div" ? "Mul" : "Div", [miss === "numerator-not-sub" ? op1("Relu", [d]) : d, root])
  const reads: Partial<Record<LnMiss, Val>> = { "d-read": d, "mean-read": m, "var-read": v, "sq-read": sq, "ve-read": ve, "sqrt-read": root }
  if (miss && reads[miss]) readOutside(c, reads[miss])
  if (miss) {
    keepAll(c, ops)
    return n
  }
  c.kept.push("LayerNormalization")
  fire(c, "recognize-layer-norm")
  return affine(c, n, x.shape.slice(rank - k))
}

type AffineMiss = "wide" | "computed" | "read"

/**
 * After a LayerNormalization over `norm` dims: Mul by a constant and / or Add a constant (either
 * side) that broadcast over the normalised dims (absorbed), or a near miss that stays.
 */
const affine = (c: Ctx, y0: Val, norm: readonly number[]): Val => {
  const { b } = c
  const { rng } = b
  // shapes that broadcast over `norm` only: a suffix of it with some dims 1, or a scalar
  const fitting = (): number[] => {
    const len = rng.int(0, norm.length)
    return norm.slice(norm.length - len).map((d) => (rng.next() < 0.3 ? 1 : d))
  }
  let y = y0
  // after a near miss the value is no LayerNormalization's any more: what follows stays too
  let missed = false
  for (const op of rng.next() < 0.5 ? ["Mul", "Add"] : rng.pick([["Mul"], ["Add"], [], ["Add", "Mul"]])) {
    // (wide needs a dim before the normalised ones)
    const miss: AffineMiss | undefined = rng.next() < 0.25 ? rng.pick<AffineMiss>(y.shape.length > norm.length ? ["wide", "computed", "read"] : ["computed", "read"]) : undefined
    // wide: one more leading dim than the normalised ones (a [T, D] constant after a norm over D)
    const cst = miss === "wide" ? filled(c, y.shape.slice(y.shape.length - norm.length - 1), 0.5, 1.5) : filled(c, fitting(), 0.5, 1.5)
    const operand = miss === "computed" ? b.op1("Relu", [cst]) : cst
    if (miss === "computed") c.kept.push("Relu")
    if (miss === "read") readOutside(c, y)
    missed ||= miss !== undefined
    if (missed) c.kept.push(op)
    else fire(c, "absorb-affine-into-layer-norm")
    y = b.op1(op, swap(c, y, operand))
  }
  return y
}

type LnOpMiss = "stats" | "scale-computed" | "bias-computed"

/** LayerNormalization as the op (scale constant, bias constant or none), then an affine tail. */
const layerNormOp = (c: Ctx, x: Val): Val => {
  const { b } = c
  const { rng } = b
  const rank = x.shape.length
  const k = rank >= 3 && rng.next() < 0.4 ? 2 : 1
  const norm = x.shape.slice(rank - k)
  const miss: LnOpMiss | undefined = rng.next() < 0.3 ? rng.pick<LnOpMiss>(["stats", "scale-computed", "bias-computed"]) : undefined
  const computed = (v: Val) => {
    c.kept.push("Abs")
    return b.op1("Abs", [v])
  }
  const scale0 = filled(c, norm, 0.5, 1.5)
  const scale = miss === "scale-computed" ? computed(scale0) : scale0
  const bias = filled(c, norm, -0.5, 0.5)
  const ins = miss === "bias-computed" ? [x, scale, computed(bias)] : rng.next() < 0.5 ? [x, scale, bias] : [x, scale]
  const attrs = { axis: attr.int(rng.next() < 0.5 ? -k : rank - k), epsilon: attr.float(rng.pick([1e-5, 1e-2])) }
  const y = miss === "stats" ? b.op("LayerNormalization", ins, attrs, 2)[0] : b.op1("LayerNormalization", ins, attrs)
  c.kept.push("LayerNormalization")
  if (!miss) return affine(c, y, norm)
  // nothing after it is absorbed: one Mul by a fitting constant stays
  c.kept.push("Mul")
  return b.op1("Mul", swap(c, y, filled(c, norm, 0.5, 1.5)))
}

const GELU_MISSES = [
  "half-off", "half-vector", "half-rank-up", "one-off", "one-vector", "root-off", "root-vector", "erf-of-other", "tanh-not-erf", "four-factors",
  "erf-read", "scaled-read", "plus-read", "inner-read",
] as const
type GeluMiss = (typeof GELU_MISSES)[number]

/** x · ½ · (1 + erf(x / √2)) in any association and operand order, or x · (1/√2) inside. */
const geluSpelled = (c: Ctx, x: Val): Val => {
  const { b } = c
  const { rng } = b
  const miss: GeluMiss | undefined = rng.next() < 0.5 ? rng.pick(GELU_MISSES) : undefined
  const ops: string[] = []
  const op1 = (op: string, ins: readonly Val[]) => {
    ops.push(op)
    return b.op1(op, ins)
  }
  const inner = miss === "erf-of-other" ? op1("Neg", [x]) : x
  const byDiv = rng.next() < 0.5
  const root = byDiv ? Math.SQRT2 : Math.SQRT1_2
  const rootC = miss === "root-off" ? scalar(c, root * 1.1) : miss === "root-vector" ? vectorOf(c, x, root) : nearly(c, root)
  const scaled = byDiv ? op1("Div", [inner, rootC]) : op1("Mul", swap(c, inner, rootC))
  const e = op1(miss === "tanh-not-erf" ? "Tanh" : "Erf", [scaled])
  const plus = op1("Add", swap(c, e, miss === "one-off" ? scalar(c, 2) : miss === "one-vector" ? vectorOf(c, x, 1) : nearly(c, 1)))
  const half = miss === "half-off" ? scalar(c, 0.45) : miss === "half-vector" ? vectorOf(c, x, 0.5) : miss === "half-rank-up" ? rankUp(c, 0.5) : nearly(c, 0.5)
  const factors = [x, half, plus]
  // a tree of two Muls over the three factors in a random order: (f0 · f1) · f2 or f0 · (f1 · f2)
  for (let i = factors.length - 1; i > 0; i--) {
    const j = rng.int(0, i)
    ;[factors[i], factors[j]] = [factors[j], factors[i]]
  }
  const left = rng.next() < 0.5
  const pair = left ? op1("Mul", [factors[0], factors[1]]) : op1("Mul", [factors[1], factors[2]])
  let y = left ? op1("Mul", swap(c, pair, factors[2])) : op1("Mul", swap(c, factors[0], pair))
  if (miss === "four-factors") y = op1("Mul", swap(c, op1("Mul", [y, half]), scalar(c, 2)))
  const reads: Partial<Record<GeluMiss, Val>> = { "erf-read": e, "scaled-read": scaled, "plus-read": plus, "inner-read": pair }
  if (miss && reads[miss]) readOutside(c, reads[miss])
  if (miss && miss !== "four-factors") {
    keepAll(c, ops)
    return y
  }
  if (miss === "four-factors") {
    // the inner three-factor tree is Gelu all the same (its Mul is read by the outer one alone)
    c.kept.push("Gelu", "Mul", "Mul")
    fire(c, "recognize-gelu")
    return y
  }
  c.kept.push("Gelu")
  fire(c, "recognize-gelu")
  return y
}

type HsMiss =
  | "alpha-off" | "beta-off" | "of-other" | "hs-read"
  | "lo-off" | "hi-off" | "three-off" | "three-vector" | "six-off" | "six-vector" | "six-rank-up" | "sub-not-div" | "numerator-not-mul"
  | "add-of-other" | "clip-read" | "add-read" | "mul-read"

/** x · HardSigmoid(x; 1/6, ½), or x · Clip(x + 3, 0, 6) / 6, operands in either order. */
const hardSwishSpelled = (c: Ctx, x: Val): Val => {
  const { b } = c
  const { rng } = b
  const ops: string[] = []
  const op1 = (op: string, ins: readonly Val[], attrs = {}) => {
    ops.push(op)
    return b.op1(op, ins, attrs)
  }
  const finish = (miss: HsMiss | undefined, y: Val) => {
    if (miss) keepAll(c, ops)
    else {
      c.kept.push("HardSwish")
      fire(c, "recognize-hard-swish")
    }
    return y
  }
  if (rng.next() < 0.4) {
    const miss: HsMiss | undefined = rng.next() < 0.5 ? rng.pick<HsMiss>(["alpha-off", "beta-off", "of-other", "hs-read"]) : undefined
    const other = miss === "of-other" ? op1("Neg", [x]) : x
    const jitter = (v: number) => (rng.next() < 0.5 ? v : v + rng.pick([-0.8, 0.8]) * 1e-5)
    const hs = op1("HardSigmoid", [other], {
      ...(miss === "alpha-off" ? {} : { alpha: attr.float(jitter(1 / 6)) }),
      beta: attr.float(miss === "beta-off" ? 0.6 : jitter(0.5)),
    })
    if (miss === "hs-read") readOutside(c, hs)
    return finish(miss, op1("Mul", swap(c, x, hs)))
  }
  const miss: HsMiss | undefined =
    rng.next() < 0.5
      ? rng.pick<HsMiss>(["lo-off", "hi-off", "three-off", "three-vector", "six-off", "six-vector", "six-rank-up", "sub-not-div", "numerator-not-mul", "add-of-other", "clip-read", "add-read", "mul-read"])
      : undefined
  const other = miss === "add-of-other" ? op1("Neg", [x]) : x
  const add = op1("Add", swap(c, other, miss === "three-off" ? scalar(c, 2.5) : miss === "three-vector" ? vectorOf(c, x, 3) : scalar(c, 3)))
  const [lo, hi] = [miss === "lo-off" ? -1 : 0, miss === "hi-off" ? 5 : 6]
  const clip = c.opset < 11 ? op1("Clip", [add], { min: attr.float(lo), max: attr.float(hi) }) : op1("Clip", [add, scalar(c, lo), scalar(c, hi)])
  const mul = op1("Mul", swap(c, x, clip))
  const y = op1(miss === "sub-not-div" ? "Sub" : "Div", [miss === "numerator-not-mul" ? op1("Tanh", [mul]) : mul, miss === "six-off" ? scalar(c, 5) : miss === "six-vector" ? vectorOf(c, x, 6) : miss === "six-rank-up" ? rankUp(c, 6) : nearly(c, 6)])
  const reads: Partial<Record<HsMiss, Val>> = { "clip-read": clip, "add-read": add, "mul-read": mul }
  if (miss && reads[miss]) readOutside(c, reads[miss])
  return finish(miss, y)
}

/** A unary op between patterns (never a Mul or an Add, so nothing is absorbed by accident). */
const filler = (c: Ctx, x: Val): Val => {
  const op = c.b.rng.pick(["Relu", "Tanh", "Abs", "Neg"])
  c.kept.push(op)
  return c.b.op1(op, [x])
}

const MOTIFS = [layerNormSpelled, layerNormOp, geluSpelled, hardSwishSpelled, filler] as const

/** One case from `seed`: an input of rank 2 to 4, `budget` motifs in a chain. */
export const buildPatternGraph = (seed: number, budget: number): PatternCase => {
  const rng = prng(seed)
  const opset = rng.pick([10, 13, 18])
  const dtype: DType = rng.next() < 0.2 ? "float64" : "float32"
  const b = graphBuilder(rng, opset)
  const rank = rng.int(1, 4)
  const D = rng.pick([4, 6, 8])
  // (a square [D, D] at times: a ReduceMean without keepdims type-checks there)
  const shape = rank === 2 && rng.next() < 0.3 ? [D, D] : Array.from({ length: rank }, (_, i) => (i === rank - 1 ? D : rng.int(1, 3)))
  const input = b.input("x", randomTensor(rng, shape, -2, 2, dtype))
  const c: Ctx = { b, dtype, opset, kept: [], side: [], fired: new Map() }
  let x = input
  let planted = 0
  let nearMisses = 0
  for (let k = 0; k < budget; k++) {
    const before = c.kept.length
    const motif = rng.pick(MOTIFS)
    x = motif(c, x)
    const added = c.kept.slice(before)
    if (motif !== filler) {
      if (added.some((op) => op === "LayerNormalization" || op === "Gelu" || op === "HardSwish")) planted++
      else nearMisses++
    }
  }
  if (x === input) {
    c.kept.push("Relu")
    x = b.op1("Relu", [x])
  }
  const outputs = [x, ...c.side.filter((v, k, all) => v !== x && all.indexOf(v) === k)]
  const { graph, inputs } = b.finish(`patterns_${seed}_${budget}`, outputs, opset)
  return { graph, inputs, expected: [...c.kept].sort(), fired: c.fired, planted, nearMisses }
}

/** fast-check arbitrary of pattern cases (1 to `maxMotifs` motifs, default 4). */
export const arbPatternCase = (maxMotifs = 5): fc.Arbitrary<PatternCase> =>
  fc.tuple(fc.integer({ min: 0, max: 0x7fffffff }), fc.integer({ min: 1, max: maxMotifs })).map(([seed, budget]) => buildPatternGraph(seed, budget))
