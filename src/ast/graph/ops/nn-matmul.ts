// Matrix products: MatMul (NumPy semantics: batched, broadcast batch dims, 1-D operands promoted
// and their dim removed), Gemm (transposes, alpha/beta, C broadcast to the output), and the
// integer/quantized MatMulInteger and QLinearMatMul. Float32 storage runs on `gemmNT`; other
// types accumulate in float64 with a row-at-a-time loop.
import { A, attrs } from "../attrs.js"
import { allocate, converter, isFloat, type DType, type TypedArray } from "../dtype.js"
import { check, defineOp, fail, type AnyOpDef, type Dim, type ValueType } from "../op.js"
import { broadcastIndex, broadcastShapes, tensor, type Tensor } from "../tensor.js"
import { arity, broadcastDims, inputType, req } from "./util.js"
import { gemmNT, transposeInto } from "./nn-gemm.js"
import { check8bit, range8, saturate, scaleValues, shifted } from "./nn-quant.js"

/** A batched product: out[t] (M×N) = a[aOff[t]] (M×K) · b[bOff[t]] (K×N) for each batch t. */
interface MatmulPlan {
  readonly m: number
  readonly k: number
  readonly n: number
  readonly aOff: ArrayLike<number>
  readonly bOff: ArrayLike<number>
  readonly shape: number[]
}

/** NumPy matmul shapes: 1-D operands promoted to matrices, batch dims broadcast. */
const planMatmul = (aShape: readonly number[], bShape: readonly number[]): MatmulPlan => {
  check(aShape.length >= 1 && bShape.length >= 1, "MatMul operands must have rank >= 1")
  const a2 = aShape.length === 1 ? [1, aShape[0]] : aShape
  const b2 = bShape.length === 1 ? [bShape[0], 1] : bShape
  const [m, k] = a2.slice(-2)
  const [k2, n] = b2.slice(-2)
  check(k === k2, () => `MatMul inner dims differ: [${aShape.join(", ")}] · [${bShape.join(", ")}]`)
  const aB = a2.slice(0, -2)
  const bB = b2.slice(0, -2)
  const outB = broadcastShapes(aB, bB) ?? fail(`MatMul batch dims [${aB.join(", ")}] and [${bB.join(", ")}] do not broadcast`)
  const ai = broadcastIndex(aB, outB).map((i) => i * m * k)
  const bi = broadcastIndex(bB, outB).map((i) => i * k * n)
  const shape = [...outB, ...(aShape.length > 1 ? [m] : []), ...(bShape.length > 1 ? [n] : [])]
  return { m, k, n, aOff: ai, bOff: bi, shape }
}

/**
 * The product over float32 storage: `gemmNT` with B transposed once per distinct B matrix. Results
 * go to a fresh Float32Array, or into `into` (a Float64Array keeps integer sums exact).
 */
const matmulF32 = <Y extends Float32Array | Float64Array = Float32Array>(a: Float32Array, b: Float32Array, p: MatmulPlan, into?: Y): Y => {
  const { m, k, n } = p
  const batches = p.aOff.length
  const out = into ?? (new Float32Array(batches * m * n) as Y)
  // one shared B under contiguous A batches: a single product with the batches as rows
  const shared = batches > 1 && Array.prototype.every.call(p.bOff, (o: number) => o === p.bOff[0])
  const contiguous = shared && Array.prototype.every.call(p.aOff, (o: number, t: number) => o === t * m * k)
  const rows = contiguous ? batches * m : m
  const runs = contiguous ? 1 : batches
  if (rows < 4) {
    // a few rows: stream B row by row (no transpose), accumulating in float64
    const acc = new Float64Array(n)
    for (let t = 0; t < runs; t++)
      for (let i = 0; i < rows; i++) {
        acc.fill(0)
        const pa = p.aOff[t] + i * k
        for (let kk = 0; kk < k; kk++) {
          const av = a[pa + kk]
          if (av === 0) continue
          const pb = p.bOff[t] + kk * n
          for (let j = 0; j < n; j++) acc[j] += av * b[pb + j]
        }
        out.set(acc, (t * rows + i) * n)
      }
    return out
  }
  const bt = new Float32Array(k * n)
  let packed = -1
  for (let t = 0; t < runs; t++) {
    if (p.bOff[t] !== packed) {
      transposeInto(b, p.bOff[t], k, n, n, bt)
      packed = p.bOff[t]
    }
    gemmNT(rows, n, k, a, p.aOff[t], k, bt, 0, k, out, t * rows * n, n)
  }
  return out
}

/** The product in float64 over any numbers (float64, integer and shifted quantized operands). */
const matmulF64 = (a: ArrayLike<number>, b: ArrayLike<number>, p: MatmulPlan): Float64Array => {
  const { m, k, n } = p
  const out = new Float64Array(p.aOff.length * m * n)
  for (let t = 0; t < p.aOff.length; t++)
    for (let i = 0; i < m; i++) {
      const po = (t * m + i) * n
      const pa = p.aOff[t] + i * k
      for (let kk = 0; kk < k; kk++) {
        const av = a[pa + kk]
        const pb = p.bOff[t] + kk * n
        for (let j = 0; j < n; j++) out[po + j] += av * b[pb + j]
      }
    }
  return out
}

/** Stores float64 results in `dtype` (integers wrap as a C store would). */
const store = (dtype: DType, values: Float64Array): TypedArray => {
  if (dtype === "float64") return values
  const out = allocate(dtype, values.length)
  if (isFloat(dtype)) out.set(values)
  else {
    const conv = converter(dtype)
    for (let i = 0; i < values.length; i++) out[i] = conv(values[i])
  }
  return out
}

/** NumPy's matmul of two tensors of one type (float32 storage on the fast path). */
export const matmul = (a: Tensor, b: Tensor): Tensor => {
  const p = planMatmul(a.shape, b.shape)
  if (a.data instanceof Float32Array && b.data instanceof Float32Array) return tensor(a.dtype, p.shape, matmulF32(a.data, b.data, p))
  return tensor(a.dtype, p.shape, store(a.dtype, matmulF64(a.data, b.data, p)))
}

const inferMatmul = (a: ValueType, b: ValueType, dtype: DType): ValueType[] => {
  check(a.shape.length >= 1 && b.shape.length >= 1, "MatMul operands must have rank >= 1")
  const a2 = a.shape.length === 1 ? [1, a.shape[0]] : a.shape
  const b2 = b.shape.length === 1 ? [b.shape[0], 1] : b.shape
  const ka = a2[a2.length - 1]
  const kb = b2[b2.length - 2]
  if (typeof ka === "number" && typeof kb === "number")
    check(ka === kb, () => `MatMul inner dims differ: [${a.shape.join(", ")}] · [${b.shape.join(", ")}]`)
  const batch = broadcastDims(a2.slice(0, -2), b2.slice(0, -2))
  const shape: Dim[] = [...batch, ...(a.shape.length > 1 ? [a2[a2.length - 2]] : []), ...(b.shape.length > 1 ? [b2[b2.length - 1]] : [])]
  return [{ dtype, shape }]
}

const MatMul = defineOp({
  attrs: attrs({}),
  inputs: arity.two,
  outputs: arity.one,
  kind: "out-elementwise-fusable",
  infer: (ctx) => {
    const a = inputType(ctx, 0)
    const b = inputType(ctx, 1)
    check(a.dtype === b.dtype, () => `MatMul operand types differ: ${a.dtype} and ${b.dtype}`)
    check(a.dtype !== "bool", "MatMul does not take bool")
    return inferMatmul(a, b, a.dtype)
  },
  kernel: ({ inputs }) => {
    const a = req(inputs, 0, "A")
    const b = req(inputs, 1, "B")
    check(a.dtype === b.dtype, () => `MatMul operand types differ: ${a.dtype} and ${b.dtype}`)
    return [matmul(a, b)]
  },
})

/** A rows×cols view of a 2-D operand, transposed when `trans`: element (i, j) sits at i·rs + j·cs. */
const gemmDims = (t: Tensor, trans: boolean, what: string): [number, number] => {
  check(t.shape.length === 2, () => `Gemm ${what} must be 2-D, got shape [${t.shape.join(", ")}]`)
  return trans ? [t.shape[1], t.shape[0]] : [t.shape[0], t.shape[1]]
}

const Gemm = defineOp({
  attrs: attrs({ alpha: A.float(1), beta: A.float(1), transA: A.int(0), transB: A.int(0), broadcast: A.int(0) }),
  inputs: arity.range(2, 3),
  outputs: arity.one,
  kind: "out-elementwise-fusable",
  infer: (ctx) => {
    const a = inputType(ctx, 0)
    const b = inputType(ctx, 1)
    check(a.shape.length === 2 && b.shape.length === 2, "Gemm operands must be 2-D")
    check(a.dtype === b.dtype, () => `Gemm operand types differ: ${a.dtype} and ${b.dtype}`)
    const m = ctx.attrs.transA ? a.shape[1] : a.shape[0]
    const n = ctx.attrs.transB ? b.shape[0] : b.shape[1]
    const [k, k2] = [ctx.attrs.transA ? a.shape[0] : a.shape[1], ctx.attrs.transB ? b.shape[1] : b.shape[0]]
    // (as the kernel checks: a compiled target would read past A's rows or B's columns)
    if (typeof k === "number" && typeof k2 === "number") check(k === k2, () => `Gemm inner dims differ: ${k} and ${k2}`)
    const c = ctx.inputs[2]
    if (c && typeof m === "number" && typeof n === "number" && c.shape.every((d): d is number => typeof d === "number"))
      check(broadcastShapes(c.shape, [m, n])?.join() === [m, n].join(), () => `C of shape [${c.shape.join(", ")}] does not broadcast to [${m}, ${n}]`)
    return [{ dtype: a.dtype, shape: [m, n] }]
  },
  kernel: ({ inputs, attrs: at }) => {
    const a = req(inputs, 0, "A")
    const b = req(inputs, 1, "B")
    const c = inputs[2]
    check(a.dtype === b.dtype && (!c || c.dtype === a.dtype), "Gemm inputs must share one type")
    const [m, k] = gemmDims(a, at.transA !== 0, "A")
    const [k2, n] = gemmDims(b, at.transB !== 0, "B")
    check(k === k2, () => `Gemm inner dims differ: ${k} and ${k2}`)
    const cIdx = c ? broadcastIndex(c.shape, [m, n]) : undefined
    if (c) check(broadcastShapes(c.shape, [m, n])?.join() === [m, n].join(), () => `C of shape [${c.shape.join(", ")}] does not broadcast to [${m}, ${n}]`)
    const { alpha, beta } = at
    let prod: Float32Array | Float64Array
    if (a.data instanceof Float32Array && b.data instanceof Float32Array) {
      const av = at.transA ? transposeInto(a.data, 0, k, m, m, new Float32Array(m * k)) : a.data
      const out = new Float32Array(m * n)
      if (!at.transB && m < 4) {
        prod = matmulF32(av, b.data, { m, k, n, aOff: [0], bOff: [0], shape: [m, n] })
      } else {
        const bv = at.transB ? b.data : transposeInto(b.data, 0, k, n, n, new Float32Array(n * k))
        // a vector C with alpha = beta = 1 starts the accumulators
        const colBias = c && alpha === 1 && beta === 1 && c.data.length === n && c.shape[c.shape.length - 1] === n ? (c.data as Float32Array) : undefined
        gemmNT(m, n, k, av, 0, k, bv, 0, k, out, 0, n, undefined, colBias)
        if (colBias || ((!c || beta === 0) && alpha === 1)) return [tensor(a.dtype, [m, n], out)]
        prod = out
      }
    } else {
      const av = a.data as ArrayLike<number>
      const bv = b.data as ArrayLike<number>
      const [ars, acs] = at.transA ? [1, m] : [k, 1]
      const [brs, bcs] = at.transB ? [1, k] : [n, 1]
      prod = new Float64Array(m * n)
      for (let i = 0; i < m; i++)
        for (let j = 0; j < n; j++) {
          let acc = 0
          for (let kk = 0; kk < k; kk++) acc += av[i * ars + kk * acs] * bv[kk * brs + j * bcs]
          prod[i * n + j] = acc
        }
    }
    const y = new Float64Array(m * n)
    const cd = c ? (c.data as ArrayLike<number>) : undefined
    for (let i = 0; i < y.length; i++) y[i] = alpha * prod[i] + (cd && cIdx && beta !== 0 ? beta * cd[cIdx[i]] : 0)
    return [tensor(a.dtype, [m, n], store(a.dtype, y))]
  },
})

const MatMulInteger = defineOp({
  attrs: attrs({}),
  inputs: arity.range(2, 4),
  outputs: arity.one,
  kind: "opaque",
  infer: (ctx) => {
    check8bit(inputType(ctx, 0), "A")
    check8bit(inputType(ctx, 1), "B")
    return inferMatmul(inputType(ctx, 0), inputType(ctx, 1), "int32")
  },
  kernel: ({ inputs }) => {
    const a = req(inputs, 0, "A")
    const b = req(inputs, 1, "B")
    check8bit(a, "A")
    check8bit(b, "B")
    const p = planMatmul(a.shape, b.shape)
    const av = shifted(a, inputs[2], a.shape.length - 2, "a")
    const bv = shifted(b, inputs[3], b.shape.length - 1, "b")
    return [tensor("int32", p.shape, Int32Array.from(matmulF32(av, bv, p, new Float64Array(p.aOff.length * p.m * p.n))))]
  },
})

const QLinearMatMul = defineOp({
  attrs: attrs({}),
  inputs: arity.range(8, 8),
  outputs: arity.one,
  kind: "opaque",
  infer: (ctx) => {
    check8bit(inputType(ctx, 0), "a")
    check8bit(inputType(ctx, 3), "b")
    return inferMatmul(inputType(ctx, 0), inputType(ctx, 3), inputType(ctx, 7).dtype)
  },
  kernel: ({ inputs }) => {
    const a = req(inputs, 0, "a")
    const b = req(inputs, 3, "b")
    check8bit(a, "a")
    check8bit(b, "b")
    const p = planMatmul(a.shape, b.shape)
    const as = scaleValues(req(inputs, 1, "a_scale"), "a_scale")
    const bs = scaleValues(req(inputs, 4, "b_scale"), "b_scale")
    const ys = scaleValues(req(inputs, 6, "y_scale"), "y_scale")
    const yzp = req(inputs, 7, "y_zero_point")
    check8bit(yzp, "y_zero_point")
    check(ys.length === 1 && yzp.data.length === 1, "y_scale and y_zero_point must be scalars")
    check(as.length === 1 || as.length === p.m, () => `a_scale has ${as.length} values for ${p.m} rows`)
    check(bs.length === 1 || bs.length === p.n, () => `b_scale has ${bs.length} values for ${p.n} columns`)
    const av = shifted(a, req(inputs, 2), a.shape.length - 2, "a")
    const bv = shifted(b, req(inputs, 5), b.shape.length - 1, "b")
    const acc = matmulF32(av, bv, p, new Float64Array(p.aOff.length * p.m * p.n))
    const r = converter(req(inputs, 1).dtype)
    const [lo, hi] = range8(yzp.dtype)
    const z = yzp.data[0] as number
    const out = allocate(yzp.dtype, acc.length)
    for (let i = 0; i < acc.length; i++) {
      const col = i % p.n
      const row = Math.floor(i / p.n) % p.m
      const mult = r(r(as[as.length === 1 ? 0 : row] * bs[bs.length === 1 ? 0 : col]) / ys[0])
      out[i] = saturate(acc[i] * mult, z, lo, hi)
    }
    return [tensor(yzp.dtype, p.shape, out)]
  },
})

export const matmulOps = { MatMul, Gemm, MatMulInteger, QLinearMatMul } satisfies Record<string, AnyOpDef>

