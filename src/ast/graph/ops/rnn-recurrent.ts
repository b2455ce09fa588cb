// Recurrent layers: LSTM, GRU and RNN with ONNX's semantics — per-direction weights (gate order
// iofc for LSTM, zrh for GRU), forward / reverse / bidirectional, sequence_lens (steps past a
// batch entry's length keep its state and give zeros in Y), optional initial state, peepholes,
// clip, configurable activations, and layout 0 ([seq, batch, ...]) or 1 ([batch, seq, ...]).
// Arithmetic is in float64; outputs are stored in X's dtype.
import { A, attrs } from "../attrs.js"
import { allocate, isFloat, isInteger, type TypedArray } from "../dtype.js"
import { check, defineOp, fail, type Dim, type InferCtx, type ValueType } from "../op.js"
import { tensor, type Tensor } from "../tensor.js"
import { inputType, req } from "./util.js"

// ---------------------------------------------------------------------------------------------
// Activations (names are case-insensitive; alpha/beta are consumed in order by the functions
// that take them, with ONNX's defaults when the lists run out — onnxruntime's reading).

type Activation = (x: number) => number

interface ActivationSpec {
  readonly alpha?: number
  readonly beta?: number
  readonly make: (alpha: number, beta: number) => Activation
}

const sigmoid: Activation = (x) => 1 / (1 + Math.exp(-x))

const ACTIVATIONS: Readonly<Record<string, ActivationSpec>> = {
  relu: { make: () => (x) => (x > 0 ? x : 0) },
  tanh: { make: () => Math.tanh },
  sigmoid: { make: () => sigmoid },
  affine: { alpha: 1, beta: 0, make: (a, b) => (x) => a * x + b },
  leakyrelu: { alpha: 0.01, make: (a) => (x) => (x >= 0 ? x : a * x) },
  thresholdedrelu: { alpha: 1, make: (a) => (x) => (x > a ? x : 0) },
  scaledtanh: { alpha: 1, beta: 1, make: (a, b) => (x) => a * Math.tanh(b * x) },
  hardsigmoid: { alpha: 0.2, beta: 0.5, make: (a, b) => (x) => Math.max(0, Math.min(1, a * x + b)) },
  elu: { alpha: 1, make: (a) => (x) => (x >= 0 ? x : a * (Math.exp(x) - 1)) },
  softsign: { make: () => (x) => x / (1 + Math.abs(x)) },
  softplus: { make: () => (x) => (x > 30 ? x : Math.log1p(Math.exp(x))) },
}

/** The activation functions of each direction: `defaults.length` per direction. */
const activationsOf = (
  a: { activations?: readonly string[]; activation_alpha?: readonly number[]; activation_beta?: readonly number[] },
  defaults: readonly string[],
  dirs: number,
): Activation[][] => {
  const n = defaults.length
  const names = a.activations ?? Array.from({ length: dirs }, () => defaults).flat()
  check(names.length === n * dirs, () => `activations lists ${names.length} functions, expected ${n * dirs} (${n} per direction)`)
  const alphas = a.activation_alpha ?? []
  const betas = a.activation_beta ?? []
  let ai = 0
  let bi = 0
  const fns = names.map((name) => {
    const spec = ACTIVATIONS[name.toLowerCase()] ?? fail(`unknown activation '${name}' (expected one of ${Object.keys(ACTIVATIONS).join(", ")})`)
    const alpha = spec.alpha === undefined ? 0 : ai < alphas.length ? alphas[ai++] : spec.alpha
    const beta = spec.beta === undefined ? 0 : bi < betas.length ? betas[bi++] : spec.beta
    return spec.make(alpha, beta)
  })
  return Array.from({ length: dirs }, (_, d) => fns.slice(d * n, d * n + n))
}

// ---------------------------------------------------------------------------------------------
// Shared attributes, shapes and the time loop

const recurrentAttrs = {
  activation_alpha: A.optFloats(),
  activation_beta: A.optFloats(),
  activations: A.optStrs(),
  clip: A.optFloat(),
  direction: A.oneOf(["forward", "reverse", "bidirectional"], "forward"),
  hidden_size: A.optInt(),
  layout: A.int(0),
}

type RecurrentAttrs = {
  readonly activation_alpha?: readonly number[]
  readonly activation_beta?: readonly number[]
  readonly activations?: readonly string[]
  readonly clip?: number
  readonly direction: "forward" | "reverse" | "bidirectional"
  readonly hidden_size?: number
  readonly layout: number
}

const numDirections = (a: RecurrentAttrs): number => (a.direction === "bidirectional" ? 2 : 1)

/** Output types Y, Y_h (and Y_c for LSTM) from X and R. */
const inferRecurrent = (ctx: InferCtx<RecurrentAttrs>, states: number): ValueType[] => {
  const X = inputType(ctx, 0)
  const R = inputType(ctx, 2)
  check(X.shape.length === 3, () => `X must have rank 3, got rank ${X.shape.length}`)
  check(R.shape.length === 3, () => `R must have rank 3, got rank ${R.shape.length}`)
  check(isFloat(X.dtype), () => `X must be a float tensor, got ${X.dtype}`)
  check(ctx.attrs.layout === 0 || ctx.attrs.layout === 1, () => `layout must be 0 or 1, got ${ctx.attrs.layout}`)
  const dirs = numDirections(ctx.attrs)
  const hidden: Dim = ctx.attrs.hidden_size ?? R.shape[2]
  const [seq, batch] = ctx.attrs.layout === 0 ? [X.shape[0], X.shape[1]] : [X.shape[1], X.shape[0]]
  const Y = ctx.attrs.layout === 0 ? [seq, dirs, batch, hidden] : [batch, seq, dirs, hidden]
  const Yh = ctx.attrs.layout === 0 ? [dirs, batch, hidden] : [batch, dirs, hidden]
  return [{ dtype: X.dtype, shape: Y }, ...Array.from({ length: states }, () => ({ dtype: X.dtype, shape: Yh }))]
}

interface Dims {
  readonly seq: number
  readonly batch: number
  readonly input: number
  readonly hidden: number
  readonly dirs: number
  readonly layout: number
}

const showShape = (t: Tensor) => `[${t.shape.join(", ")}]`

/** Checks X, W, R (and the optional B, sequence_lens, initial states) against each other. */
const recurrentDims = (inputs: readonly (Tensor | undefined)[], a: RecurrentAttrs, gates: number): Dims => {
  const X = req(inputs, 0, "X")
  const W = req(inputs, 1, "W")
  const R = req(inputs, 2, "R")
  check(isFloat(X.dtype), () => `X must be a float tensor, got ${X.dtype}`)
  check(X.shape.length === 3 && W.shape.length === 3 && R.shape.length === 3, () => `X, W and R must have rank 3, got ${showShape(X)}, ${showShape(W)}, ${showShape(R)}`)
  check(a.layout === 0 || a.layout === 1, () => `layout must be 0 or 1, got ${a.layout}`)
  const dirs = numDirections(a)
  const hidden = a.hidden_size ?? R.shape[2]
  const [seq, batch] = a.layout === 0 ? [X.shape[0], X.shape[1]] : [X.shape[1], X.shape[0]]
  const input = X.shape[2]
  check(W.shape[0] === dirs && W.shape[1] === gates * hidden && W.shape[2] === input, () => `W has shape ${showShape(W)}, expected [${dirs}, ${gates * hidden}, ${input}] (direction ${a.direction}, hidden_size ${hidden})`)
  check(R.shape[0] === dirs && R.shape[1] === gates * hidden && R.shape[2] === hidden, () => `R has shape ${showShape(R)}, expected [${dirs}, ${gates * hidden}, ${hidden}]`)
  const B = inputs[3]
  if (B) check(B.shape.length === 2 && B.shape[0] === dirs && B.shape[1] === 2 * gates * hidden, () => `B has shape ${showShape(B)}, expected [${dirs}, ${2 * gates * hidden}]`)
  return { seq, batch, input, hidden, dirs, layout: a.layout }
}

/** Per-batch sequence lengths (all `seq` when sequence_lens is absent). */
const sequenceLengths = (t: Tensor | undefined, d: Dims): number[] => {
  if (!t) return Array.from({ length: d.batch }, () => d.seq)
  check(isInteger(t.dtype), () => `sequence_lens must be an integer tensor, got ${t.dtype}`)
  check(t.data.length === d.batch, () => `sequence_lens has ${t.data.length} entries, batch size is ${d.batch}`)
  return Array.from(t.data as ArrayLike<number>, (n, b) => {
    check(n >= 0 && n <= d.seq, () => `sequence_lens[${b}] is ${n}, outside [0, ${d.seq}]`)
    return n
  })
}

/** The initial state input (initial_h / initial_c) checked against Y_h's shape. */
const initialState = (t: Tensor | undefined, d: Dims, what: string): Tensor | undefined => {
  if (!t) return undefined
  const want = d.layout === 0 ? [d.dirs, d.batch, d.hidden] : [d.batch, d.dirs, d.hidden]
  check(t.shape.length === 3 && t.shape.every((n, k) => n === want[k]), () => `${what} has shape ${showShape(t)}, expected [${want.join(", ")}]`)
  return t
}

/**
 * Advances one (direction, batch entry) by one step: reads X at `xOff`, updates `h` (and `c`)
 * in place.
 */
type Step = (x: TypedArray, xOff: number, h: Float64Array, c: Float64Array) => void

/**
 * The time loop shared by the three layers. `makeStep(d)` gives direction d's step; `inits`
 * are the initial states (h, then c), each absent meaning zeros. Returns Y and the final states
 * in X's dtype and the op's layout.
 */
const runRecurrent = (X: Tensor, d: Dims, seqLens: readonly number[], inits: readonly (Tensor | undefined)[], reverseOf: (dir: number) => boolean, makeStep: (dir: number) => Step): Tensor[] => {
  const { seq, batch, input, hidden: H, dirs, layout } = d
  const Y = allocate(X.dtype, seq * dirs * batch * H)
  const finals = inits.map(() => allocate(X.dtype, dirs * batch * H))
  const xOff = layout === 0 ? (t: number, b: number) => (t * batch + b) * input : (t: number, b: number) => (b * seq + t) * input
  const yOff = layout === 0 ? (t: number, dir: number, b: number) => ((t * dirs + dir) * batch + b) * H : (t: number, dir: number, b: number) => ((b * seq + t) * dirs + dir) * H
  const sOff = layout === 0 ? (dir: number, b: number) => (dir * batch + b) * H : (dir: number, b: number) => (b * dirs + dir) * H
  const h = new Float64Array(H)
  const c = new Float64Array(H)
  for (let dir = 0; dir < dirs; dir++) {
    const step = makeStep(dir)
    const reverse = reverseOf(dir)
    for (let b = 0; b < batch; b++) {
      const so = sOff(dir, b)
      const states = [h, c]
      inits.forEach((init, k) => {
        for (let j = 0; j < H; j++) states[k][j] = init ? init.data[so + j] : 0
      })
      const L = seqLens[b]
      for (let s = 0; s < L; s++) {
        const t = reverse ? L - 1 - s : s
        step(X.data, xOff(t, b), h, c)
        const yo = yOff(t, dir, b)
        for (let j = 0; j < H; j++) Y[yo + j] = h[j]
      }
      finals.forEach((f, k) => {
        for (let j = 0; j < H; j++) f[so + j] = states[k][j]
      })
    }
  }
  const yShape = layout === 0 ? [seq, dirs, batch, H] : [batch, seq, dirs, H]
  const sShape = layout === 0 ? [dirs, batch, H] : [batch, dirs, H]
  return [tensor(X.dtype, yShape, Y), ...finals.map((f) => tensor(X.dtype, sShape, f))]
}

const isReverse = (a: RecurrentAttrs) => (dir: number) => a.direction === "reverse" || dir === 1

/** `out[k] (+)= M[k, :]·v` for k in [0, rows), M row-major with `n` columns from `mOff`. */
const matVec = (out: Float64Array, rows: number, M: TypedArray, mOff: number, v: ArrayLike<number>, vOff: number, n: number, accumulate = false): void => {
  for (let k = 0; k < rows; k++) {
    let acc = accumulate ? out[k] : 0
    const row = mOff + k * n
    for (let i = 0; i < n; i++) acc += M[row + i] * v[vOff + i]
    out[k] = acc
  }
}

/** Bias pairs Wb + Rb of direction `dir` (zeros when B is absent). */
const summedBias = (B: Tensor | undefined, dir: number, rows: number): Float64Array => {
  const out = new Float64Array(rows)
  if (!B) return out
  const o = dir * 2 * rows
  for (let k = 0; k < rows; k++) out[k] = B.data[o + k] + B.data[o + rows + k]
  return out
}

const clipper = (clip: number | undefined): ((x: number) => number) => {
  if (clip === undefined) return (x) => x
  check(clip > 0, () => `clip must be positive, got ${clip}`)
  return (x) => (x > clip ? clip : x < -clip ? -clip : x)
}

// ---------------------------------------------------------------------------------------------
// LSTM

const LSTM = defineOp({
  attrs: attrs({ ...recurrentAttrs, input_forget: A.int(0) }),
  inputs: [3, 8],
  outputs: [0, 3],
  kind: "opaque",
  infer: (ctx) => inferRecurrent(ctx, 2),
  kernel: (ctx) => {
    const a = ctx.attrs
    const d = recurrentDims(ctx.inputs, a, 4)
    const [X, W, R, B, lens, h0, c0, P] = ctx.inputs as (Tensor | undefined)[]
    const H = d.hidden
    if (P) check(P.shape.length === 2 && P.shape[0] === d.dirs && P.shape[1] === 3 * H, () => `P has shape ${showShape(P)}, expected [${d.dirs}, ${3 * H}]`)
    const acts = activationsOf(a, ["Sigmoid", "Tanh", "Tanh"], d.dirs)
    const clip = clipper(a.clip)
    const gates = new Float64Array(4 * H)
    const makeStep = (dir: number): Step => {
      const [f, g, hAct] = acts[dir]
      const bias = summedBias(B, dir, 4 * H)
      const peep = new Float64Array(3 * H)
      if (P) for (let k = 0; k < 3 * H; k++) peep[k] = P.data[dir * 3 * H + k]
      const wOff = dir * 4 * H * d.input
      const rOff = dir * 4 * H * H
      return (x, xOff, h, c) => {
        matVec(gates, 4 * H, W!.data, wOff, x, xOff, d.input)
        matVec(gates, 4 * H, R!.data, rOff, h, 0, H, true)
        for (let j = 0; j < H; j++) {
          const i = f(clip(gates[j] + bias[j] + peep[j] * c[j]))
          const forget = a.input_forget ? 1 - i : f(clip(gates[2 * H + j] + bias[2 * H + j] + peep[2 * H + j] * c[j]))
          const cand = g(clip(gates[3 * H + j] + bias[3 * H + j]))
          const cNew = forget * c[j] + i * cand
          const o = f(clip(gates[H + j] + bias[H + j] + peep[H + j] * cNew))
          c[j] = cNew
          gates[j] = o * hAct(cNew) // the i gate is spent: stage the new h there
        }
        for (let j = 0; j < H; j++) h[j] = gates[j]
      }
    }
    return runRecurrent(X!, d, sequenceLengths(lens, d), [initialState(h0, d, "initial_h"), initialState(c0, d, "initial_c")], isReverse(a), makeStep)
  },
})

// ---------------------------------------------------------------------------------------------
// GRU

const GRU = defineOp({
  attrs: attrs({ ...recurrentAttrs, linear_before_reset: A.int(0) }),
  inputs: [3, 6],
  outputs: [0, 2],
  kind: "opaque",
  infer: (ctx) => inferRecurrent(ctx, 1),
  kernel: (ctx) => {
    const a = ctx.attrs
    const d = recurrentDims(ctx.inputs, a, 3)
    const [X, W, R, B, lens, h0] = ctx.inputs as (Tensor | undefined)[]
    const H = d.hidden
    const acts = activationsOf(a, ["Sigmoid", "Tanh"], d.dirs)
    const clip = clipper(a.clip)
    const wx = new Float64Array(3 * H)
    const rh = new Float64Array(3 * H)
    const z = new Float64Array(H)
    const rGated = new Float64Array(H)
    const cand = new Float64Array(H)
    const makeStep = (dir: number): Step => {
      const [f, g] = acts[dir]
      const wb = new Float64Array(3 * H)
      const rb = new Float64Array(3 * H)
      if (B)
        for (let k = 0; k < 3 * H; k++) {
          wb[k] = B.data[dir * 6 * H + k]
          rb[k] = B.data[dir * 6 * H + 3 * H + k]
        }
      const wOff = dir * 3 * H * d.input
      const rOff = dir * 3 * H * H
      const Rd = R!.data
      return (x, xOff, h) => {
        matVec(wx, 3 * H, W!.data, wOff, x, xOff, d.input)
        matVec(rh, 3 * H, Rd, rOff, h, 0, H)
        for (let j = 0; j < H; j++) {
          z[j] = f(clip(wx[j] + rh[j] + wb[j] + rb[j]))
          const r = f(clip(wx[H + j] + rh[H + j] + wb[H + j] + rb[H + j]))
          if (a.linear_before_reset) cand[j] = wx[2 * H + j] + r * (rh[2 * H + j] + rb[2 * H + j]) + wb[2 * H + j]
          else rGated[j] = r * h[j]
        }
        if (!a.linear_before_reset) {
          // Rh·(r ⊙ h) replaces Rh·h
          matVec(cand, H, Rd, rOff + 2 * H * H, rGated, 0, H)
          for (let j = 0; j < H; j++) cand[j] += wx[2 * H + j] + wb[2 * H + j] + rb[2 * H + j]
        }
        for (let j = 0; j < H; j++) h[j] = (1 - z[j]) * g(clip(cand[j])) + z[j] * h[j]
      }
    }
    return runRecurrent(X!, d, sequenceLengths(lens, d), [initialState(h0, d, "initial_h")], isReverse(a), makeStep)
  },
})

// ---------------------------------------------------------------------------------------------
// RNN

const RNN = defineOp({
  attrs: attrs(recurrentAttrs),
  inputs: [3, 6],
  outputs: [0, 2],
  kind: "opaque",
  infer: (ctx) => inferRecurrent(ctx, 1),
  kernel: (ctx) => {
    const a = ctx.attrs
    const d = recurrentDims(ctx.inputs, a, 1)
    const [X, W, R, B, lens, h0] = ctx.inputs as (Tensor | undefined)[]
    const H = d.hidden
    const acts = activationsOf(a, ["Tanh"], d.dirs)
    const clip = clipper(a.clip)
    const pre = new Float64Array(H)
    const makeStep = (dir: number): Step => {
      const [f] = acts[dir]
      const bias = summedBias(B, dir, H)
      const wOff = dir * H * d.input
      const rOff = dir * H * H
      return (x, xOff, h) => {
        matVec(pre, H, W!.data, wOff, x, xOff, d.input)
        matVec(pre, H, R!.data, rOff, h, 0, H, true)
        for (let j = 0; j < H; j++) h[j] = f(clip(pre[j] + bias[j]))
      }
    }
    return runRecurrent(X!, d, sequenceLengths(lens, d), [initialState(h0, d, "initial_h")], isReverse(a), makeStep)
  },
})

export const recurrentOps = { LSTM, GRU, RNN }
