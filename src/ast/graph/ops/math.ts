// Elementwise math, comparison, logic and activation ops: unary and broadcasting binary kernels
// built from scalar functions, computed in float64 and stored with the output dtype's semantics.
import { A, attrs, noAttrs } from "../attrs.js"
import { allocate, converter, isFloat, isInteger, isSigned, type DType } from "../dtype.js"
import { check, defineOp, fail, unsupported, type AnyOpDef, type InferCtx, type ValueType } from "../op.js"
import { broadcastIndex, broadcastShapes, sizeOf, tensor, type Tensor } from "../tensor.js"
import { broadcastDims, inferBroadcast, inferSame, req } from "./util.js"

const sameShape = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((d, i) => d === b[i])

/** out[i] = f(x[i]) with the output stored in `dtype` (default: the input's). */
const mapUnary = (x: Tensor, f: (v: number) => number, dtype: DType = x.dtype): Tensor => {
  const out = allocate(dtype, x.data.length)
  const conv = converter(dtype)
  const d = x.data
  for (let i = 0; i < d.length; i++) out[i] = conv(f(d[i]))
  return tensor(dtype, x.shape, out)
}

/**
 * Before opset 7, binary ops broadcast only with `broadcast=1`, B onto A starting at `axis`
 * (trailing by default): B's shape is padded with 1s to A's rank accordingly.
 */
const legacyShape = (a: readonly number[], b: readonly number[], axis: number | undefined): number[] => {
  if (axis === undefined || b.length === a.length) return [...b]
  const ax = axis < 0 ? axis + a.length : axis
  return [...new Array(ax).fill(1), ...b, ...new Array(Math.max(0, a.length - ax - b.length)).fill(1)]
}

interface LegacyAttrs {
  readonly broadcast?: number
  readonly axis?: number
}

/** out = f(a, b) with NumPy broadcasting, stored in `dtype`. */
const mapBinary = (a: Tensor, b0: Tensor, f: (x: number, y: number) => number, dtype: DType, legacy?: LegacyAttrs): Tensor => {
  let b = b0
  if (legacy?.broadcast === 1 && b.shape.length < a.shape.length) b = { ...b, shape: legacyShape(a.shape, b.shape, legacy.axis) }
  const shape = broadcastShapes(a.shape, b.shape) ?? fail(`shapes [${a.shape.join(", ")}] and [${b0.shape.join(", ")}] do not broadcast`)
  const n = sizeOf(shape)
  const out = allocate(dtype, n)
  const conv = converter(dtype)
  const ad = a.data
  const bd = b.data
  if (sameShape(a.shape, shape) && sameShape(b.shape, shape)) for (let i = 0; i < n; i++) out[i] = conv(f(ad[i], bd[i]))
  else if (sameShape(a.shape, shape) && bd.length === 1) {
    const y = bd[0]
    for (let i = 0; i < n; i++) out[i] = conv(f(ad[i], y))
  } else {
    const ia = broadcastIndex(a.shape, shape)
    const ib = broadcastIndex(b.shape, shape)
    for (let i = 0; i < n; i++) out[i] = conv(f(ad[ia[i]], bd[ib[i]]))
  }
  return tensor(dtype, shape, out)
}

const legacyAttrs = attrs({ broadcast: A.optInt(), axis: A.optInt() })

const inferLegacyBroadcast =
  (dtype?: DType) =>
  (ctx: InferCtx<{ broadcast?: number; axis?: number }>): readonly ValueType[] => {
    const a = ctx.inputs[0]
    const b = ctx.inputs[1]
    if (!a || !b) return fail("two inputs are required")
    if (ctx.attrs.broadcast === 1 && b.shape.length < a.shape.length) return [{ dtype: dtype ?? a.dtype, shape: a.shape }]
    return [{ dtype: dtype ?? a.dtype, shape: broadcastDims(a.shape, b.shape) }]
  }

const unaryOp = (f: (x: number, attrs: never) => number, opts: { floatOnly?: boolean; out?: DType } = {}) =>
  defineOp({
    attrs: noAttrs,
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "elementwise",
    infer: (ctx) => {
      const t = ctx.inputs[0] ?? fail("input 0 is required")
      return [{ dtype: opts.out ?? t.dtype, shape: t.shape }]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      if (opts.floatOnly && !isFloat(x.dtype)) unsupported(`${x.dtype} input (only float types)`)
      return [mapUnary(x, (v) => f(v, undefined as never), opts.out)]
    },
  })

/** A unary op with attributes given to its scalar function. */
const unaryWith = <P extends Parameters<typeof attrs>[0]>(props: P, f: (x: number, a: Record<string, number>) => number) => {
  const codec = attrs(props)
  return defineOp({
    attrs: codec,
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "elementwise",
    infer: inferSame(0),
    kernel: (ctx) => [mapUnary(req(ctx.inputs, 0), (v) => f(v, ctx.attrs as unknown as Record<string, number>))],
  })
}

const roundHalfEven = (x: number): number => {
  if (!Number.isFinite(x)) return x
  const r = Math.round(x)
  return Math.abs(x - Math.trunc(x)) === 0.5 && r % 2 !== 0 ? r - 1 : r
}

const erf = (x: number): number => {
  // W. J. Cody's rational approximations (double precision)
  const ax = Math.abs(x)
  if (ax < 0.5) {
    const t = x * x
    const p = [3.1611237438705656, 113.86415415105016, 377.485237685302, 3209.3775891384694, 0.18577770618460315]
    const q = [23.601290952344122, 244.02463793444417, 1282.6165260773723, 2844.2368334391704]
    const num = ((((p[4] * t + p[0]) * t + p[1]) * t + p[2]) * t + p[3])
    const den = ((((t + q[0]) * t + q[1]) * t + q[2]) * t + q[3])
    return (x * num) / den
  }
  if (ax < 4) {
    const p = [0.5641884969886701, 8.883149794388376, 66.11919063714163, 298.635138197400, 881.952221241769, 1712.0476126340707, 2051.0783778260716, 1230.339354797997, 2.1531153547440383e-8]
    const q = [15.744926110709835, 117.6939508913125, 537.1811018620099, 1621.3895745666903, 3290.7992357334597, 4362.619090143247, 3439.3676741437216, 1230.3393548037495]
    let num = p[8] * ax
    let den = ax
    for (let i = 0; i < 7; i++) {
      num = (num + p[i]) * ax
      den = (den + q[i]) * ax
    }
    const r = (num + p[7]) / (den + q[7])
    const z = Math.floor(ax * 16) / 16
    const del = (ax - z) * (ax + z)
    const res = 1 - Math.exp(-z * z) * Math.exp(-del) * r
    return x < 0 ? -res : res
  }
  const t = 1 / (ax * ax)
  const p = [0.30532663496123236, 0.36034489994980445, 0.12578172611122926, 0.016083785148742275, 6.587491615298378e-4, 0.016315387137302097]
  const q = [2.568520192289822, 1.8729528499234604, 0.5279051029514285, 0.06051834131244132, 0.0023352049762686918]
  let num = p[5] * t
  let den = t
  for (let i = 0; i < 4; i++) {
    num = (num + p[i]) * t
    den = (den + q[i]) * t
  }
  let r = (t * (num + p[4])) / (den + q[4])
  r = (0.5641895835477563 - r) / ax
  const z = Math.floor(ax * 16) / 16
  const del = (ax - z) * (ax + z)
  const res = 1 - Math.exp(-z * z) * Math.exp(-del) * r
  return x < 0 ? -res : res
}

const numericBinary = (f: (x: number, y: number, dtype: DType) => number, kind: "broadcast" = "broadcast") =>
  defineOp({
    attrs: legacyAttrs,
    inputs: [2, 2],
    outputs: [1, 1],
    kind,
    infer: inferLegacyBroadcast(),
    kernel: (ctx) => {
      const a = req(ctx.inputs, 0)
      const b = req(ctx.inputs, 1)
      check(a.dtype === b.dtype, () => `input dtypes differ: ${a.dtype} and ${b.dtype}`)
      return [mapBinary(a, b, (x, y) => f(x, y, a.dtype), a.dtype, ctx.opset < 7 ? ctx.attrs : undefined)]
    },
  })

const divide = (x: number, y: number, dtype: DType): number => {
  if (!isInteger(dtype)) return x / y
  if (y === 0) return fail("integer division by zero")
  return Math.trunc(x / y)
}

const modulo = (x: number, y: number, fmod: number, dtype: DType): number => {
  if (isInteger(dtype) && y === 0) return fail("integer modulo by zero")
  if (fmod || isFloat(dtype)) return x % y
  const r = x % y
  return r !== 0 && Math.sign(r) !== Math.sign(y) ? r + y : r
}

const compare = (f: (x: number, y: number) => boolean) =>
  defineOp({
    attrs: legacyAttrs,
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "broadcast",
    infer: inferLegacyBroadcast("bool"),
    kernel: (ctx) => [mapBinary(req(ctx.inputs, 0), req(ctx.inputs, 1), (x, y) => (f(x, y) ? 1 : 0), "bool", ctx.opset < 7 ? ctx.attrs : undefined)],
  })

const logic = (f: (x: boolean, y: boolean) => boolean) =>
  defineOp({
    attrs: legacyAttrs,
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "broadcast",
    infer: inferLegacyBroadcast("bool"),
    kernel: (ctx) => [mapBinary(req(ctx.inputs, 0), req(ctx.inputs, 1), (x, y) => (f(x !== 0, y !== 0) ? 1 : 0), "bool", ctx.opset < 7 ? ctx.attrs : undefined)],
  })

/** Max / Min / Sum / Mean of any number of inputs, broadcasting; NaN propagates. */
const variadic = (f: (acc: number, x: number) => number, finish?: (acc: number, n: number) => number) =>
  defineOp({
    attrs: noAttrs,
    inputs: [1, Infinity],
    outputs: [1, 1],
    kind: "broadcast",
    infer: inferBroadcast(),
    kernel: (ctx) => {
      const xs = ctx.inputs.filter((t): t is Tensor => t !== undefined)
      check(xs.every((t) => t.dtype === xs[0].dtype), "inputs must share one dtype")
      let acc = xs[0]
      if (xs.length === 1) acc = mapUnary(acc, (v) => v)
      for (const x of xs.slice(1)) acc = mapBinary(acc, x, f, xs[0].dtype)
      return [finish ? mapUnary(acc, (v) => finish(v, xs.length)) : acc]
    },
  })

const nanMax = (a: number, b: number) => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.max(a, b))
const nanMin = (a: number, b: number) => (Number.isNaN(a) || Number.isNaN(b) ? NaN : Math.min(a, b))

const bitwise = (f: (a: bigint, b: bigint) => bigint) =>
  defineOp({
    attrs: noAttrs,
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "broadcast",
    infer: inferBroadcast(),
    kernel: (ctx) => {
      const a = req(ctx.inputs, 0)
      return [mapBinary(a, req(ctx.inputs, 1), (x, y) => Number(BigInt.asIntN(64, f(BigInt(x), BigInt(y)))), a.dtype)]
    },
  })

const DTYPE_BY_CODE: Record<number, DType> = { 1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16" }
const NAMED: Record<number, string> = { 8: "string", 14: "complex64", 15: "complex128", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1" }
const castTarget = (to: number): DType => DTYPE_BY_CODE[to] ?? unsupported(`Cast to ${NAMED[to] ?? `element type ${to}`}`)

/** Cast of one value as ONNX specifies: float → int truncates (saturating is undefined; we wrap), NaN → 0. */
const castValue = (x: number, from: DType, to: DType): number => {
  if (to === "bool") return x !== 0 && !Number.isNaN(x) ? 1 : 0
  if (isFloat(to)) return x
  if (Number.isNaN(x)) return 0
  void from
  return Math.trunc(x)
}

const castTensor = (x: Tensor, to: DType): Tensor => mapUnary(x, (v) => castValue(v, x.dtype, to), to)

const sigmoid = (x: number) => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x)))
const softplus = (x: number) => (x > 30 ? x : Math.log1p(Math.exp(x)))

export const mathOps = {
  // unary math
  Abs: unaryOp(Math.abs),
  Neg: unaryOp((x) => -x),
  Sign: unaryOp(Math.sign),
  Reciprocal: unaryOp((x) => 1 / x),
  Floor: unaryOp(Math.floor),
  Ceil: unaryOp(Math.ceil),
  Round: unaryOp(roundHalfEven),
  Sqrt: unaryOp(Math.sqrt),
  Exp: unaryOp(Math.exp),
  Log: unaryOp(Math.log),
  Sin: unaryOp(Math.sin),
  Cos: unaryOp(Math.cos),
  Tan: unaryOp(Math.tan),
  Asin: unaryOp(Math.asin),
  Acos: unaryOp(Math.acos),
  Atan: unaryOp(Math.atan),
  Sinh: unaryOp(Math.sinh),
  Cosh: unaryOp(Math.cosh),
  Tanh: unaryOp(Math.tanh),
  Asinh: unaryOp(Math.asinh),
  Acosh: unaryOp(Math.acosh),
  Atanh: unaryOp(Math.atanh),
  Erf: unaryOp(erf),
  IsNaN: unaryOp((x) => (Number.isNaN(x) ? 1 : 0), { out: "bool" }),
  IsInf: defineOp({
    attrs: attrs({ detect_negative: A.int(1), detect_positive: A.int(1) }),
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "elementwise",
    infer: (ctx) => [{ dtype: "bool", shape: (ctx.inputs[0] ?? fail("input 0 is required")).shape }],
    kernel: (ctx) => [
      mapUnary(req(ctx.inputs, 0), (x) => ((x === Infinity && ctx.attrs.detect_positive) || (x === -Infinity && ctx.attrs.detect_negative) ? 1 : 0), "bool"),
    ],
  }),
  Not: unaryOp((x) => (x ? 0 : 1)),
  BitwiseNot: defineOp({
    attrs: noAttrs,
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "elementwise",
    infer: inferSame(0),
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const bits = { uint8: 8, uint16: 16, uint32: 32, uint64: 64 }[x.dtype as "uint8"]
      return [mapUnary(x, (v) => (isSigned(x.dtype) ? Number(BigInt.asIntN(64, ~BigInt(v))) : Number(BigInt.asUintN(bits ?? 64, ~BigInt(v)))), x.dtype)]
    },
  }),
  Identity: defineOp({ attrs: noAttrs, inputs: [1, 1], outputs: [1, 1], kind: "elementwise", infer: inferSame(0), kernel: (ctx) => [req(ctx.inputs, 0)] }),
  Dropout: defineOp({
    attrs: attrs({ ratio: A.float(0.5), seed: A.optInt(), is_test: A.int(0) }),
    inputs: [1, 3],
    outputs: [1, 2],
    kind: "elementwise",
    infer: (ctx) => {
      const t = ctx.inputs[0] ?? fail("input 0 is required")
      return [t, { dtype: "bool", shape: t.shape }]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const training = ctx.inputs[2]
      if (training && training.data[0]) {
        const ratio = ctx.inputs[1] ? ctx.inputs[1].data[0] : ctx.attrs.ratio
        if (ratio !== 0) unsupported("Dropout in training mode with a nonzero ratio (random)")
      }
      const mask = tensor("bool", x.shape, allocate("bool", x.data.length).fill(1))
      return [x, mask]
    },
  }),
  // binary arithmetic
  Add: numericBinary((x, y) => x + y),
  Sub: numericBinary((x, y) => x - y),
  Mul: numericBinary((x, y) => x * y),
  Div: numericBinary(divide),
  Pow: defineOp({
    attrs: legacyAttrs,
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "broadcast",
    infer: inferLegacyBroadcast(),
    kernel: (ctx) => {
      const a = req(ctx.inputs, 0)
      const b = req(ctx.inputs, 1)
      return [mapBinary(a, b, (x, y) => (isInteger(a.dtype) ? Math.trunc(Math.pow(x, y)) : Math.pow(x, y)), a.dtype, ctx.opset < 7 ? ctx.attrs : undefined)]
    },
  }),
  Mod: defineOp({
    attrs: attrs({ fmod: A.int(0) }),
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "broadcast",
    infer: inferBroadcast(),
    kernel: (ctx) => {
      const a = req(ctx.inputs, 0)
      if (isFloat(a.dtype) && !ctx.attrs.fmod) fail("Mod of floats requires fmod=1")
      return [mapBinary(a, req(ctx.inputs, 1), (x, y) => modulo(x, y, ctx.attrs.fmod, a.dtype), a.dtype)]
    },
  }),
  Max: variadic(nanMax),
  Min: variadic(nanMin),
  Sum: variadic((a, b) => a + b),
  Mean: variadic((a, b) => a + b, (acc, n) => acc / n),
  // comparison and logic
  Equal: compare((x, y) => x === y),
  Greater: compare((x, y) => x > y),
  GreaterOrEqual: compare((x, y) => x >= y),
  Less: compare((x, y) => x < y),
  LessOrEqual: compare((x, y) => x <= y),
  And: logic((x, y) => x && y),
  Or: logic((x, y) => x || y),
  Xor: logic((x, y) => x !== y),
  BitwiseAnd: bitwise((a, b) => a & b),
  BitwiseOr: bitwise((a, b) => a | b),
  BitwiseXor: bitwise((a, b) => a ^ b),
  BitShift: defineOp({
    attrs: attrs({ direction: A.oneOf(["LEFT", "RIGHT"], "LEFT") }),
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "broadcast",
    infer: inferBroadcast(),
    kernel: (ctx) => {
      const a = req(ctx.inputs, 0)
      const bits = { uint8: 8, uint16: 16, uint32: 32, uint64: 64 }[a.dtype as "uint8"] ?? fail(`BitShift of ${a.dtype} (unsigned integers only)`)
      const left = ctx.attrs.direction === "LEFT"
      return [
        mapBinary(a, req(ctx.inputs, 1), (x, y) => Number(BigInt.asUintN(bits, left ? BigInt(x) << BigInt(y) : BigInt(x) >> BigInt(y))), a.dtype),
      ]
    },
  }),
  Where: defineOp({
    attrs: noAttrs,
    inputs: [3, 3],
    outputs: [1, 1],
    kind: "broadcast",
    infer: (ctx) => {
      const [c, x, y] = ctx.inputs
      if (!c || !x || !y) return fail("three inputs are required")
      return [{ dtype: x.dtype, shape: broadcastDims(broadcastDims(c.shape, x.shape), y.shape) }]
    },
    kernel: (ctx) => {
      const c = req(ctx.inputs, 0)
      const x = req(ctx.inputs, 1)
      const y = req(ctx.inputs, 2)
      const shape = broadcastShapes(broadcastShapes(c.shape, x.shape) ?? fail("condition and X do not broadcast"), y.shape) ?? fail("inputs do not broadcast")
      const n = sizeOf(shape)
      const [ic, ix, iy] = [c, x, y].map((t) => broadcastIndex(t.shape, shape))
      const out = allocate(x.dtype, n)
      for (let i = 0; i < n; i++) out[i] = c.data[ic[i]] ? x.data[ix[i]] : y.data[iy[i]]
      return [tensor(x.dtype, shape, out)]
    },
  }),
  Cast: defineOp({
    attrs: attrs({ to: A.int(), saturate: A.int(1) }),
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "elementwise",
    infer: (ctx) => [{ dtype: castTarget(ctx.attrs.to), shape: (ctx.inputs[0] ?? fail("input 0 is required")).shape }],
    kernel: (ctx) => [castTensor(req(ctx.inputs, 0), castTarget(ctx.attrs.to))],
  }),
  CastLike: defineOp({
    attrs: attrs({ saturate: A.int(1) }),
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "elementwise",
    infer: (ctx) => [{ dtype: (ctx.inputs[1] ?? fail("input 1 is required")).dtype, shape: (ctx.inputs[0] ?? fail("input 0 is required")).shape }],
    kernel: (ctx) => [castTensor(req(ctx.inputs, 0), req(ctx.inputs, 1).dtype)],
  }),
  Clip: defineOp({
    attrs: attrs({ min: A.optFloat(), max: A.optFloat() }),
    inputs: [1, 3],
    outputs: [1, 1],
    kind: "broadcast",
    infer: inferSame(0),
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const lo = ctx.opset < 11 ? (ctx.attrs.min ?? -Infinity) : ctx.inputs[1] ? ctx.inputs[1].data[0] : -Infinity
      const hi = ctx.opset < 11 ? (ctx.attrs.max ?? Infinity) : ctx.inputs[2] ? ctx.inputs[2].data[0] : Infinity
      return [mapUnary(x, (v) => (Number.isNaN(v) ? v : Math.min(Math.max(v, lo), hi)))]
    },
  }),
  // activations
  Relu: unaryOp((x) => (x > 0 ? x : x === 0 || Number.isNaN(x) ? x : 0)),
  Sigmoid: unaryOp(sigmoid),
  Softplus: unaryOp(softplus),
  Softsign: unaryOp((x) => x / (1 + Math.abs(x))),
  Mish: unaryOp((x) => x * Math.tanh(softplus(x))),
  HardSwish: unaryOp((x) => x * Math.max(0, Math.min(1, x / 6 + 0.5))),
  LeakyRelu: unaryWith({ alpha: A.float(0.01) }, (x, a) => (x >= 0 ? x : a.alpha * x)),
  Elu: unaryWith({ alpha: A.float(1) }, (x, a) => (x >= 0 ? x : a.alpha * (Math.exp(x) - 1))),
  Celu: unaryWith({ alpha: A.float(1) }, (x, a) => Math.max(0, x) + Math.min(0, a.alpha * (Math.exp(x / a.alpha) - 1))),
  Selu: unaryWith({ alpha: A.float(1.6732632423543772), gamma: A.float(1.0507009873554805) }, (x, a) => (x > 0 ? a.gamma * x : a.gamma * (a.alpha * Math.exp(x) - a.alpha))),
  HardSigmoid: unaryWith({ alpha: A.float(0.2), beta: A.float(0.5) }, (x, a) => Math.max(0, Math.min(1, a.alpha * x + a.beta))),
  ThresholdedRelu: unaryWith({ alpha: A.float(1) }, (x, a) => (x > a.alpha ? x : 0)),
  Shrink: unaryWith({ bias: A.float(0), lambd: A.float(0.5) }, (x, a) => (x < -a.lambd ? x + a.bias : x > a.lambd ? x - a.bias : 0)),
  Swish: unaryWith({ alpha: A.float(1) }, (x, a) => x * sigmoid(a.alpha * x)),
  Gelu: defineOp({
    attrs: attrs({ approximate: A.oneOf(["none", "tanh"], "none") }),
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "elementwise",
    infer: inferSame(0),
    kernel: (ctx) => {
      const tanh = ctx.attrs.approximate === "tanh"
      return [
        mapUnary(req(ctx.inputs, 0), (x) =>
          tanh ? 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x))) : 0.5 * x * (1 + erf(x / Math.SQRT2)),
        ),
      ]
    },
  }),
  PRelu: defineOp({
    attrs: noAttrs,
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "broadcast",
    infer: inferSame(0),
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      let slope = req(ctx.inputs, 1)
      // opset < 7 (and exporters) give a per-channel slope of shape [C]: it applies on axis 1
      if (slope.shape.length === 1 && x.shape.length > 2 && slope.shape[0] === x.shape[1] && slope.shape[0] !== x.shape[x.shape.length - 1])
        slope = { ...slope, shape: [slope.shape[0], ...new Array(x.shape.length - 2).fill(1)] }
      return [mapBinary(x, slope, (v, s) => (v < 0 ? v * s : v), x.dtype)]
    },
  }),
} satisfies Record<string, AnyOpDef>

