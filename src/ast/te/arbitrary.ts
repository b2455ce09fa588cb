// Generators for the operator-level laws: a family of TE computes (elementwise chains with
// broadcasting, matmul, batch matmul, conv2d NCHW and NCHWc with stride/pad/dilation/groups,
// depthwise conv, pooling, softmax, reductions on any axis) with seeded inputs, and random legal
// schedules over them (arbitrary-schedule.ts). Built from a seed by a PRNG so fast-check shrinks seeds and sizes.
import * as fc from "fast-check"
import { prng } from "../graph/arbitrary.js"
import { fromArray, sizeOf, type Tensor } from "../graph/tensor.js"
import { add, and, c, call, div, f32, floordiv, floormod, ge, lt, max, mul, select, sub, type Expr } from "./expr.js"
import { at, compute, maxReduce, placeholder, reduceAxis, sum, type ComputeTensor, type Placeholder } from "./tensor.js"
import { randomSchedule } from "./arbitrary-schedule.js"

export { randomSchedule } from "./arbitrary-schedule.js"

export interface ComputeCase {
  readonly family: string
  readonly outputs: readonly ComputeTensor[]
  readonly inputs: ReadonlyMap<string, Tensor>
}

type Rng = ReturnType<typeof prng>

const data = (rng: Rng, p: Placeholder, integer = false): Tensor =>
  fromArray(p.dtype, p.shape, Array.from({ length: sizeOf(p.shape) }, () => (integer ? rng.int(-3, 3) : rng.float(-1, 1))))

const inBounds = (idx: readonly Expr[], shape: readonly number[]): Expr =>
  idx.map((e, k) => and(ge(e, c(0)), lt(e, c(shape[k])))).reduce((a, b) => and(a, b))

export const COMPUTE_FAMILIES = ["elementwise", "matmul", "batch_matmul", "conv2d", "conv2d_nchwc", "depthwise", "pool", "softmax", "reduce"] as const

/** A blocked (NCHW[ib]c → NCHW[ob]c) conv with padding, optionally with a bias + relu epilogue. */
export interface BlockedConvShape {
  readonly ib: number
  readonly ob: number
  readonly CB: number
  readonly OB: number
  readonly H: number
  readonly W: number
  readonly K: number
  readonly stride: number
  readonly epilogue: boolean
  /** Groups (default 1): each has CB / groups input blocks and OB / groups output blocks. */
  readonly groups?: number
  /** Zero padding on every side (default: 1 for a 3×3 kernel, else 0). */
  readonly pad?: number
}

const blockedConv = (family: string, ph: (name: string, shape: number[]) => Placeholder, feeds: ReadonlyMap<string, Tensor>, o: BlockedConvShape): ComputeCase => {
  const { ib, ob, CB, OB, H, W, K, stride } = o
  const groups = o.groups ?? 1
  const pad = o.pad ?? (K === 3 ? 1 : 0)
  const [OH, OW] = [Math.floor((H + 2 * pad - K) / stride) + 1, Math.floor((W + 2 * pad - K) / stride) + 1]
  const X = ph("X", [1, CB, H, W, ib])
  const Wt = ph("W", [OB, CB / groups, K, K, ib, ob])
  const padded = compute("pad", [1, CB, H + 2 * pad, W + 2 * pad, ib], (n, cb, y, x, ci) => {
    const iy = sub(y, c(pad))
    const ix = sub(x, c(pad))
    return select(inBounds([iy, ix], [H, W]), at(X, n, cb, iy, ix, ci), f32(0))
  })
  const ic = reduceAxis((CB / groups) * ib, "ic")
  const ry = reduceAxis(K, "ry")
  const rx = reduceAxis(K, "rx")
  const conv = compute("conv", [1, OB, OH, OW, ob], (n, oc, y, x, oi) => {
    const [iy, ix] = [add(mul(y, c(stride)), ry.var), add(mul(x, c(stride)), rx.var)]
    // (grouped: output block oc's group is oc / (OB / groups), its input blocks start at group · CB / groups)
    const block = groups === 1 ? floordiv(ic.var, c(ib)) : add(mul(floordiv(oc, c(OB / groups)), c(CB / groups)), floordiv(ic.var, c(ib)))
    return sum(mul(at(padded, n, block, iy, ix, floormod(ic.var, c(ib))), at(Wt, oc, floordiv(ic.var, c(ib)), ry.var, rx.var, floormod(ic.var, c(ib)), oi)), [ic, ry, rx])
  }, "float32", "conv2d_nchwc")
  if (!o.epilogue) return { family, outputs: [conv], inputs: feeds }
  // a fused epilogue: bias and relu
  const B = ph("B", [OB * ob])
  const out = compute("bias_relu", [1, OB, OH, OW, ob], (n, oc, y, x, oi) => max(add(at(conv, n, oc, y, x, oi), at(B, add(mul(oc, c(ob)), oi))), f32(0)))
  return { family, outputs: [out], inputs: feeds }
}

/** A case's input tensors: each declared input (a TE placeholder) gets seeded data in `feeds`. */
const seededInputs = (rng: Rng) => {
  const feeds = new Map<string, Tensor>()
  const ph = (name: string, shape: number[], dtype: "float32" | "int32" = "float32") => {
    const p = placeholder(name, shape, dtype)
    feeds.set(name, data(rng, p, dtype === "int32"))
    return p
  }
  return { feeds, ph }
}

/** A blocked conv of a given shape, its inputs seeded (for laws about wider convs than the families'). */
export const blockedConvCase = (seed: number, o: BlockedConvShape): ComputeCase => {
  const { feeds, ph } = seededInputs(prng(seed))
  return blockedConv("conv2d_nchwc", ph, feeds, o)
}

/**
 * A batch-1 dense layer (one output row, then a bias), its inputs seeded: `n` columns, `k` inputs
 * (for laws about the one-row tiles wider than the families' matmuls).
 */
export const denseRowCase = (seed: number, n: number, kk: number): ComputeCase => {
  const { feeds, ph } = seededInputs(prng(seed))
  const A = ph("A", [1, kk])
  const W = ph("W", [kk, n])
  const B = ph("B", [n])
  const k = reduceAxis(kk, "k")
  const mm = compute("mm", [1, n], (i, j) => sum(mul(at(A, i, k.var), at(W, k.var, j)), [k]), "float32", "dense")
  return { family: "matmul", outputs: [compute("dense", [1, n], (i, j) => add(at(mm, i, j), at(B, j)))], inputs: feeds }
}

/**
 * An NCHW convolution of network-like sizes (channels and images multiples of 4: the rows a GPU
 * fetch may move as float4), its inputs seeded: `c` → `o` channels on an `hw`² image, a `k`×`k`
 * window (padded by k/2 when `pad`, the pad its own stage) at `stride`.
 */
export const convCase = (o: { readonly seed: number; readonly c: number; readonly o: number; readonly hw: number; readonly k: number; readonly stride: number; readonly pad?: boolean }): ComputeCase => {
  const { feeds, ph } = seededInputs(prng(o.seed))
  const pad = o.pad === false ? 0 : Math.floor(o.k / 2)
  const X = ph("X", [1, o.c, o.hw, o.hw])
  const Wt = ph("W", [o.o, o.c, o.k, o.k])
  const OH = Math.floor((o.hw + 2 * pad - o.k) / o.stride) + 1
  const padded = pad === 0 ? X : compute("pad", [1, o.c, o.hw + 2 * pad, o.hw + 2 * pad], (n, ch, y, x) => {
    const iy = sub(y, c(pad))
    const ix = sub(x, c(pad))
    return select(inBounds([iy, ix], [o.hw, o.hw]), at(X, n, ch, iy, ix), f32(0))
  })
  const rc = reduceAxis(o.c, "rc")
  const ry = reduceAxis(o.k, "ry")
  const rx = reduceAxis(o.k, "rx")
  const out = compute("conv", [1, o.o, OH, OH], (n, oc, y, x) => sum(mul(at(padded, n, rc.var, add(mul(y, c(o.stride)), ry.var), add(mul(x, c(o.stride)), rx.var)), at(Wt, oc, rc.var, ry.var, rx.var)), [rc, ry, rx]), "float32", "conv2d_nchw")
  return { family: "conv2d", outputs: [out], inputs: feeds }
}

/**
 * A matrix product of the sizes a tiling rule meets (for laws about tiles wider than the families'
 * matmuls, and tiles that do not divide): `batch` leading dims (none when 0), m × k · k × n, and
 * with `epilogue` a bias and a ReLU after it.
 */
export const matmulCase = (seed: number, o: { readonly batch: number; readonly m: number; readonly n: number; readonly k: number; readonly epilogue: boolean }): ComputeCase => {
  const { feeds, ph } = seededInputs(prng(seed))
  const lead = o.batch > 0 ? [o.batch] : []
  const A = ph("A", [...lead, o.m, o.k])
  const B = ph("B", [...lead, o.k, o.n])
  const k = reduceAxis(o.k, "k")
  const mm = compute("mm", [...lead, o.m, o.n], (...idx) => {
    const [i, j] = idx.slice(-2)
    const b = idx.slice(0, -2)
    return sum(mul(at(A, ...b, i, k.var), at(B, ...b, k.var, j)), [k])
  }, "float32", "matmul")
  if (!o.epilogue) return { family: "matmul", outputs: [mm], inputs: feeds }
  const bias = ph("bias", [o.n])
  return { family: "matmul", outputs: [compute("out", [...lead, o.m, o.n], (...idx) => max(add(at(mm, ...idx), at(bias, idx[idx.length - 1])), f32(0)))], inputs: feeds }
}

/**
 * A matrix product over a weight packed in column panels (MatMulPacked's compute): `batch` leading
 * dims (none when 0), A m × k, B [⌈n/panel⌉, k, panel] (the last panel's lanes past n unread),
 * column j read at panel j / panel, lane j % panel; with `epilogue` a bias and a ReLU after it.
 */
export const matmulPackedCase = (seed: number, o: { readonly batch: number; readonly m: number; readonly n: number; readonly k: number; readonly panel: number; readonly epilogue: boolean }): ComputeCase => {
  const { feeds, ph } = seededInputs(prng(seed))
  const lead = o.batch > 0 ? [o.batch] : []
  const A = ph("A", [...lead, o.m, o.k])
  const B = ph("B", [Math.ceil(o.n / o.panel), o.k, o.panel])
  const k = reduceAxis(o.k, "k")
  const mm = compute("mm", [...lead, o.m, o.n], (...idx) => {
    const [i, j] = idx.slice(-2)
    return sum(mul(at(A, ...idx.slice(0, -2), i, k.var), at(B, floordiv(j, c(o.panel)), k.var, floormod(j, c(o.panel)))), [k])
  }, "float32", "matmul_packed")
  if (!o.epilogue) return { family: "matmul", outputs: [mm], inputs: feeds }
  const bias = ph("bias", [o.n])
  return { family: "matmul", outputs: [compute("out", [...lead, o.m, o.n], (...idx) => max(add(at(mm, ...idx), at(bias, idx[idx.length - 1])), f32(0)))], inputs: feeds }
}

/**
 * A reduction of few outputs over a long last axis (for laws about the rfactor rule): X [rows,
 * cols, r] summed (or its max taken) over r, and with `mean` divided by r after it.
 */
export const longReductionCase = (seed: number, o: { readonly rows: number; readonly cols: number; readonly r: number; readonly max: boolean; readonly mean: boolean }): ComputeCase => {
  const { feeds, ph } = seededInputs(prng(seed))
  const X = ph("X", [o.rows, o.cols, o.r])
  const r = reduceAxis(o.r, "r")
  const red = compute("red", [o.rows, o.cols], (a, b) => (o.max ? maxReduce : sum)(at(X, a, b, r.var), [r]))
  if (!o.mean) return { family: "reduce", outputs: [red], inputs: feeds }
  return { family: "reduce", outputs: [compute("mean", [o.rows, o.cols], (a, b) => div(at(red, a, b), f32(o.r)))], inputs: feeds }
}

export const buildCompute = (family: (typeof COMPUTE_FAMILIES)[number], seed: number): ComputeCase => {
  const rng = prng(seed)
  const { feeds, ph } = seededInputs(rng)
  switch (family) {
    case "elementwise": {
      const m = rng.int(1, 6)
      const n = rng.int(1, 9)
      const A = ph("A", [m, n])
      const B = ph("B", [n])
      const C = compute("C", [m, n], (i, j) => add(mul(at(A, i, j), at(B, j)), f32(0.5)))
      const D = compute("D", [m, n], (i, j) => max(at(C, i, j), f32(0)))
      const E = compute("E", [m, n], (i, j) => call("tanh", sub(at(D, i, j), at(A, i, j))))
      return { family, outputs: [E], inputs: feeds }
    }
    case "matmul": {
      const [m, n, kk] = [rng.int(1, 9), rng.int(1, 9), rng.int(1, 9)]
      const integer = rng.next() < 0.3
      const A = ph("A", [m, kk], integer ? "int32" : "float32")
      const B = ph("B", [kk, n], integer ? "int32" : "float32")
      const k = reduceAxis(kk, "k")
      return { family, outputs: [compute("C", [m, n], (i, j) => sum(mul(at(A, i, k.var), at(B, k.var, j)), [k]), A.dtype, "matmul")], inputs: feeds }
    }
    case "batch_matmul": {
      const [b, m, n, kk] = [rng.int(1, 3), rng.int(1, 5), rng.int(1, 5), rng.int(1, 6)]
      const A = ph("A", [b, m, kk])
      const B = ph("B", [b, kk, n])
      const k = reduceAxis(kk, "k")
      return { family, outputs: [compute("C", [b, m, n], (x, i, j) => sum(mul(at(A, x, i, k.var), at(B, x, k.var, j)), [k]), "float32", "matmul")], inputs: feeds }
    }
    case "conv2d":
    case "depthwise": {
      const depthwise = family === "depthwise"
      const groups = depthwise ? 0 : rng.pick([1, 1, 2])
      const C = depthwise ? rng.int(1, 4) : rng.int(1, 2) * (groups || 1)
      const O = depthwise ? C : rng.int(1, 2) * (groups || 1)
      const g = depthwise ? C : groups
      const [H, W] = [rng.int(3, 7), rng.int(3, 7)]
      const K = rng.pick([1, 3])
      const stride = rng.pick([1, 2])
      const dil = K === 3 ? rng.pick([1, 1, 2]) : 1
      const pad = rng.int(0, 1)
      const OH = Math.floor((H + 2 * pad - dil * (K - 1) - 1) / stride) + 1
      const OW = Math.floor((W + 2 * pad - dil * (K - 1) - 1) / stride) + 1
      if (OH < 1 || OW < 1) return buildCompute(family, seed + 1)
      const X = ph("X", [1, C, H, W])
      const Wt = ph("W", [O, C / g, K, K])
      const padded = compute("pad", [1, C, H + 2 * pad, W + 2 * pad], (n, ch, y, x) => {
        const iy = sub(y, c(pad))
        const ix = sub(x, c(pad))
        return select(inBounds([iy, ix], [H, W]), at(X, n, ch, iy, ix), f32(0))
      })
      const rc = reduceAxis(C / g, "rc")
      const ry = reduceAxis(K, "ry")
      const rx = reduceAxis(K, "rx")
      const out = compute("conv", [1, O, OH, OW], (n, o, y, x) => {
        const cin = add(mul(floordiv(o, c(O / g)), c(C / g)), rc.var)
        return sum(mul(at(padded, n, cin, add(mul(y, c(stride)), mul(ry.var, c(dil))), add(mul(x, c(stride)), mul(rx.var, c(dil)))), at(Wt, o, rc.var, ry.var, rx.var)), [rc, ry, rx])
      }, "float32", "conv2d_nchw")
      return { family, outputs: [out], inputs: feeds }
    }
    case "conv2d_nchwc": {
      const [ib, ob] = [rng.pick([1, 2, 4]), rng.pick([1, 2, 4])]
      // a third grouped (2 or 3 groups of 1-2 input and 1-2 output blocks each)
      const groups = rng.pick([1, 1, 2, 3])
      const [CB, OB] = groups === 1 ? [rng.int(1, 2), rng.int(1, 3)] : [groups * rng.int(1, 2), groups * rng.int(1, 2)]
      const [H, W] = [rng.int(3, 7), rng.int(3, 7)]
      const K = rng.pick([1, 3])
      const stride = rng.pick([1, 1, 2])
      return blockedConv(family, ph, feeds, { ib, ob, CB, OB, H, W, K, stride, epilogue: rng.next() >= 0.5, groups })
    }
    case "pool": {
      const [C, H, W] = [rng.int(1, 3), rng.int(2, 7), rng.int(2, 7)]
      const K = rng.int(1, Math.min(3, H, W))
      const X = ph("X", [1, C, H, W])
      const ry = reduceAxis(K, "ry")
      const rx = reduceAxis(K, "rx")
      const OH = H - K + 1
      const OW = W - K + 1
      const mx = compute("maxpool", [1, C, OH, OW], (n, ch, y, x) => maxReduce(at(X, n, ch, add(y, ry.var), add(x, rx.var)), [ry, rx]), "float32", "pool")
      return { family, outputs: [mx], inputs: feeds }
    }
    case "softmax": {
      const [m, n] = [rng.int(1, 5), rng.int(1, 9)]
      const X = ph("X", [m, n])
      const k1 = reduceAxis(n, "k1")
      const mx = compute("rowmax", [m], (i) => maxReduce(at(X, i, k1.var), [k1]))
      const ex = compute("exp", [m, n], (i, j) => call("exp", sub(at(X, i, j), at(mx, i))))
      const k2 = reduceAxis(n, "k2")
      const sm = compute("rowsum", [m], (i) => sum(at(ex, i, k2.var), [k2]))
      const out = compute("softmax", [m, n], (i, j) => div(at(ex, i, j), at(sm, i)))
      return { family, outputs: [out], inputs: feeds }
    }
    case "reduce": {
      const shape = [rng.int(1, 4), rng.int(1, 5), rng.int(1, 5)]
      const axis = rng.int(0, 2)
      const X = ph("X", shape)
      const r = reduceAxis(shape[axis], "r")
      const outShape = shape.filter((_, k) => k !== axis)
      const out = compute("red", outShape, (a, b) => {
        const idx = axis === 0 ? [r.var, a, b] : axis === 1 ? [a, r.var, b] : [a, b, r.var]
        return sum(mul(at(X, ...idx), at(X, ...idx)), [r])
      })
      return { family, outputs: [out], inputs: feeds }
    }
  }
}

export const arbComputeCase = (families: readonly (typeof COMPUTE_FAMILIES)[number][] = COMPUTE_FAMILIES): fc.Arbitrary<ComputeCase> =>
  fc.tuple(fc.constantFrom(...families), fc.integer({ min: 0, max: 0x7fffffff })).map(([f, seed]) => buildCompute(f, seed))

export const arbScheduledCase = (families?: readonly (typeof COMPUTE_FAMILIES)[number][]) =>
  fc.tuple(arbComputeCase(families), fc.integer({ min: 0, max: 0x7fffffff })).map(([cc, seed]) => ({ ...cc, schedule: randomSchedule(cc.outputs, seed) }))
