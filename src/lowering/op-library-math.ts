// Elementwise computes beyond the basic arithmetic: unary math and activations, predicates,
// comparisons and logic (bool outputs), Where, the variadic Max/Min/Sum/Mean, integer Mod and
// Cast. Each matches its reference kernel in src/ast/graph/ops/{elementwise-*,activation}.ts.
import type { DType } from "../ast/graph/dtype.js"
import { add, and, c, call, cast, div, eq, ge, gt, le, lt, max, min, mul, or, select, sub, bin, floormod, type Expr } from "../ast/te/expr.js"
import { compute, reduceAxis, sum, type ComputeTensor } from "../ast/te/tensor.js"
import { bread, binary, fl, floatUnary, inp, isFloatDtype, none, num, shapeOf, unary, type OpCompute, type OpComputeCtx } from "./op-library-common.js"

const one = (x: Expr) => fl(x.dtype, 1)
const zero = (x: Expr) => fl(x.dtype, 0)
const neg = (x: Expr) => call("neg", x)
const exp = (x: Expr) => call("exp", x)
const log = (x: Expr) => call("log", x)
const sqrt = (x: Expr) => call("sqrt", x)

/** log(1 + e^x) without overflow for large x. */
const softplus = (x: Expr): Expr => select(gt(x, zero(x)), add(x, log(add(one(x), exp(neg(x))))), log(add(one(x), exp(x))))
const sigmoid = (x: Expr): Expr => call("sigmoid", x)
/** x·sign(s) for s's sign bit (s = ±0 keeps x). */
const signed = (s: Expr, v: Expr): Expr => select(lt(s, zero(s)), neg(v), v)

/**
 * A stage kept in memory (computed at root, not inlined into its reader): a sum over one element.
 * Long formulas read it several times without copying their operand's expression.
 */
export const materialize = (name: string, shape: readonly number[], f: (...i: Expr[]) => Expr, dtype: DType): ComputeTensor => {
  const r = reduceAxis(1, `${name}.one`)
  return compute(name, shape, (...i) => sum(add(f(...i), mul(cast(dtype, r.var), fl(dtype, 0))), [r]), dtype)
}

/** atan on floats: |x| > 1 through π/2 - atan(1/|x|), two half-angle steps, then the odd series. */
const atanStages = (ctx: OpComputeCtx, x: ComputeTensor | ReturnType<typeof inp>, pre?: (v: Expr) => Expr, last = true): readonly ComputeTensor[] => {
  const shape = shapeOf(ctx.outputs[0])
  const dtype: DType = last ? ctx.outputs[0].dtype : "float64"
  const wide: DType = "float64"
  const src = (i: Expr[]) => {
    const v = cast(wide, bread(x, i))
    return pre ? pre(v) : v
  }
  const half = (u: Expr) => div(u, add(fl(wide, 1), sqrt(add(fl(wide, 1), mul(u, u)))))
  const u0 = materialize(ctx.name("atanu"), shape, (...i) => {
    const t = call("fabs", src(i))
    return select(gt(t, fl(wide, 1)), div(fl(wide, 1), t), t)
  }, wide)
  const u1 = materialize(ctx.name("atanh1"), shape, (...i) => half(bread(u0, i)), wide)
  const u2 = materialize(ctx.name("atanh2"), shape, (...i) => half(bread(u1, i)), wide)
  const out = compute(ctx.name(last ? undefined : "atan"), shape, (...i) => {
    const u = bread(u2, i)
    const z = mul(u, u)
    // u ≤ tan(π/16): the series to u^19 is exact to ~1e-15
    let p: Expr = fl(wide, 1 / 19)
    for (let k = 8; k >= 0; k--) p = add(mul(p, z), fl(wide, (k % 2 ? -1 : 1) / (2 * k + 1)))
    let r = mul(fl(wide, 4), mul(u, p))
    const v = src(i)
    r = select(gt(call("fabs", v), fl(wide, 1)), sub(fl(wide, Math.PI / 2), r), r)
    return cast(dtype, signed(v, r))
  }, dtype)
  return [u0, u1, u2, out]
}

const floatOnly = (ctx: OpComputeCtx) => (isFloatDtype(inp(ctx, 0).dtype) ? undefined : none(`${ctx.node.op} of ${inp(ctx, 0).dtype}`))

const atan: OpCompute = (ctx) => (floatOnly(ctx), atanStages(ctx, inp(ctx, 0)))
/** asin x = atan(x / √(1 - x²)) (±1 → ±π/2, |x| > 1 → NaN). */
const asinStages = (ctx: OpComputeCtx, last: boolean) => atanStages(ctx, inp(ctx, 0), (v) => div(v, sqrt(sub(fl("float64", 1), mul(v, v)))), last)
const asin: OpCompute = (ctx) => (floatOnly(ctx), asinStages(ctx, true))
const acos: OpCompute = (ctx) => {
  floatOnly(ctx)
  const st = asinStages(ctx, false)
  const a = st[st.length - 1]
  const dtype = ctx.outputs[0].dtype
  return [...st.slice(0, -1), a, compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => cast(dtype, sub(fl("float64", Math.PI / 2), cast("float64", bread(a, i)))), dtype)]
}

const attrF = (ctx: OpComputeCtx, k: string, d: number) => num(ctx.attrs[k], d)

export const UNARY_MATH: Record<string, OpCompute> = {
  Sin: floatUnary((x) => call("sin", x)),
  Cos: floatUnary((x) => call("cos", x)),
  Tan: floatUnary((x) => div(call("sin", x), call("cos", x))),
  Atan: atan,
  Asin: asin,
  Acos: acos,
  Sinh: floatUnary((x) => mul(fl(x.dtype, 0.5), sub(exp(x), exp(neg(x))))),
  Cosh: floatUnary((x) => mul(fl(x.dtype, 0.5), add(exp(x), exp(neg(x))))),
  Asinh: floatUnary((x) => {
    const t = call("fabs", x)
    return signed(x, log(add(t, sqrt(add(mul(t, t), one(x))))))
  }),
  Acosh: floatUnary((x) => log(add(x, sqrt(sub(mul(x, x), one(x)))))),
  Atanh: floatUnary((x) => mul(fl(x.dtype, 0.5), log(div(add(one(x), x), sub(one(x), x))))),
  Sign: unary((x) => select(gt(x, zero(x)), one(x), select(lt(x, zero(x)), fl(x.dtype, -1), x))),
  Round: floatUnary((x) => call("round", x)),
  Softsign: floatUnary((x) => div(x, add(one(x), call("fabs", x)))),
  Softplus: floatUnary(softplus),
  Selu: floatUnary((x, ctx) => {
    const alpha = attrF(ctx, "alpha", 1.67326319217681884765625)
    const gamma = attrF(ctx, "gamma", 1.05070102214813232421875)
    return select(gt(x, zero(x)), mul(fl(x.dtype, gamma), x), mul(fl(x.dtype, gamma * alpha), sub(exp(x), one(x))))
  }),
  Celu: floatUnary((x, ctx) => {
    const alpha = attrF(ctx, "alpha", 1)
    return add(max(zero(x), x), min(zero(x), mul(fl(x.dtype, alpha), sub(exp(div(x, fl(x.dtype, alpha))), one(x)))))
  }),
  Mish: floatUnary((x) => mul(x, call("tanh", softplus(x)))),
  ThresholdedRelu: floatUnary((x, ctx) => select(gt(x, fl(x.dtype, attrF(ctx, "alpha", 1))), x, zero(x))),
  Shrink: floatUnary((x, ctx) => {
    const bias = attrF(ctx, "bias", 0)
    const lambd = attrF(ctx, "lambd", 0.5)
    return select(lt(x, fl(x.dtype, -lambd)), sub(x, fl(x.dtype, -bias)), select(gt(x, fl(x.dtype, lambd)), sub(x, fl(x.dtype, bias)), zero(x)))
  }),
  Swish: floatUnary((x, ctx) => mul(x, sigmoid(mul(fl(x.dtype, attrF(ctx, "alpha", 1)), x)))),
  IsNaN: unary((x) => (isFloatDtype(x.dtype) ? bin("ne", x, x) : c(0, "bool"))),
  IsInf: unary((x, ctx) => {
    if (!isFloatDtype(x.dtype)) return c(0, "bool")
    const pos = attrF(ctx, "detect_positive", 1) !== 0
    const negv = attrF(ctx, "detect_negative", 1) !== 0
    const p = pos ? eq(x, fl(x.dtype, Infinity)) : c(0, "bool")
    const n = negv ? eq(x, fl(x.dtype, -Infinity)) : c(0, "bool")
    return or(p, n)
  }),
  Not: unary((x) => call("not", x)),
}

const truth = (x: Expr): Expr => (x.dtype === "bool" ? x : bin("ne", x, c(0, x.dtype)))

/**
 * `f` over the terms as a balanced tree (((a+b)+c) for three; ((a+b)+(c+d)) for four): the
 * expression is log2(n) deep, so a Sum of 50,000 inputs does not nest 50,000 deep (every pass over
 * expressions recurses on their depth).
 */
const balanced = (terms: readonly Expr[], f: (a: Expr, b: Expr) => Expr): Expr => {
  let level = terms
  while (level.length > 1) {
    const next: Expr[] = []
    for (let k = 0; k + 1 < level.length; k += 2) next.push(f(level[k], level[k + 1]))
    if (level.length % 2) next.push(level[level.length - 1])
    level = next
  }
  return level[0]
}

/** Max / Min / Sum / Mean of one or more inputs, broadcast. */
const variadic =
  (f: (a: Expr, b: Expr) => Expr, mean = false): OpCompute =>
  (ctx) => {
    const xs = ctx.inputs.filter((t) => t !== undefined)
    if (xs.length === 0) return none("no inputs")
    const dtype = ctx.outputs[0].dtype
    return [
      compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => {
        const e = balanced(xs.map((t) => bread(t, i)), f)
        return mean ? div(e, fl(dtype, xs.length)) : e
      }, dtype),
    ]
  }

/** Integer Mod: fmod=1 truncates (C), fmod=0 floors (the divisor's sign). Float fmod keeps its kernel. */
const mod: OpCompute = (ctx) => {
  const a = inp(ctx, 0)
  if (isFloatDtype(a.dtype)) return none("Mod of floats (C fmod is not exact as a - trunc(a/b)·b)")
  const fmod = attrF(ctx, "fmod", 0) !== 0
  return binary((x, y) => (fmod ? sub(x, mul(div(x, y), y)) : floormod(x, y)))(ctx)
}

const where: OpCompute = (ctx) => {
  const [cnd, x, y] = [0, 1, 2].map((k) => inp(ctx, k))
  const dtype = ctx.outputs[0].dtype
  return [compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => select(truth(bread(cnd, i)), bread(x, i), bread(y, i)), dtype)]
}

const INF = Infinity

/** ONNX Cast: floats round (fround), integers truncate toward zero and wrap (NaN/Inf → 0), bool is x ≠ 0. */
export const castExpr = (x: Expr, to: DType): Expr => {
  if (x.dtype === to) return x
  if (to === "bool") return truth(x)
  if (to === "float16" || to === "bfloat16") return none(`Cast to ${to}`)
  if (to === "float32" || to === "float64") return cast(to, x)
  const fromFloat = isFloatDtype(x.dtype)
  if (to === "int64" || to === "uint64") {
    // (from a float: truncated and wrapped modulo 2^64, NaN/±Inf → 0; a negative integer wrapped
    // into uint64 — as the reference; the targets' 64-bit casts do all of it (c's tessera_f2i,
    // wasm's f2i64, js's $f2i64 / $f2u64); where the target holds one as a double, lowering keeps
    // such a Cast on the reference kernels)
    return cast(to, x)
  }
  if (fromFloat) {
    // the JS store (ToInt32) and the narrowing casts wrap finite values; NaN/±Inf become 0
    return cast(to, select(lt(call("fabs", x), fl(x.dtype, INF)), x, zero(x)))
  }
  return cast(to, x)
}

const castOp: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const to = ctx.outputs[0].dtype
  const shape = shapeOf(ctx.outputs[0])
  return [compute(ctx.name(), shape, (...i) => castExpr(bread(x, i), to), to)]
}

const cmp = (f: (a: Expr, b: Expr) => Expr): OpCompute => binary((a, b) => f(a, b))

const UNSIGNED_BITS: Partial<Record<DType, number>> = { uint8: 8, uint16: 16, uint32: 32, uint64: 64 }

/** BitwiseNot as arithmetic: −x − 1 for signed types and uint64 (which wraps: 2^64 − 1 − x), (2^bits − 1) − x for the narrower unsigned ones. */
const bitwiseNot: OpCompute = (ctx) => {
  const d = inp(ctx, 0).dtype
  const bits = d === "uint64" ? undefined : UNSIGNED_BITS[d]
  return unary((x) => (bits ? sub(c(2 ** bits - 1, d), x) : sub(call("neg", x), c(1, d))))(ctx)
}

/**
 * BitShift of unsigned integers as arithmetic: right is ⌊x / 2^y⌋, left is x·2^y modulo 2^bits
 * (both exact in a double: scaling by 2^y only moves the exponent, and the kept low bits are at
 * most the 53 significant bits x had); a shift by the width or more gives 0.
 */
const bitShift: OpCompute = (ctx) => {
  const d = inp(ctx, 0).dtype
  const bits = UNSIGNED_BITS[d]
  const left = (ctx.attrs.direction as string | undefined) !== "RIGHT"
  if (!bits) return none(`BitShift of ${d}`)
  // (its arithmetic is in doubles: exact for uint64 values to 2^53 only, and uint64 groups now compile)
  if (d === "uint64") return none("BitShift of uint64 (computed in doubles here; exact on the reference kernel)")
  return binary((x, y) => {
    const p = call("pow", cast("float64", c(2, d)), cast("float64", y))
    const xf = cast("float64", x)
    const v = left ? floormod(mul(xf, p), c(2 ** bits, "float64")) : call("floor", div(xf, p))
    return select(ge(y, c(bits, d)), c(0, d), cast(d, v))
  })(ctx)
}

const WIDTH: Partial<Record<DType, number>> = { int8: 8, uint8: 8, int16: 16, uint16: 16, int32: 32, uint32: 32 }

/**
 * BitwiseAnd / Or / Xor as arithmetic on the bits of the two's-complement values (types up to 32
 * bits): Σ_b op(bit_b(x), bit_b(y))·2^b, stored with the type's wrap.
 */
const bitwise =
  (op: (a: Expr, b: Expr) => Expr): OpCompute =>
  (ctx) => {
    const d = inp(ctx, 0).dtype
    const bits = WIDTH[d] ?? none(`bitwise op on ${d}`)
    const W: DType = "float64"
    const unsigned = (x: Expr) => {
      const xf = cast(W, x)
      return d.startsWith("u") ? xf : select(lt(xf, c(0, W)), add(xf, c(2 ** bits, W)), xf)
    }
    return binary((x, y) => {
      const [ux, uy] = [unsigned(x), unsigned(y)]
      let acc: Expr = c(0, W)
      for (let b = 0; b < bits; b++) {
        const bit = (u: Expr) => floormod(call("floor", div(u, c(2 ** b, W))), c(2, W))
        acc = add(acc, mul(op(bit(ux), bit(uy)), c(2 ** b, W)))
      }
      return cast(d, acc)
    })(ctx)
  }

export const BINARY_MATH: Record<string, OpCompute> = {
  Equal: cmp(eq),
  Less: cmp(lt),
  Greater: cmp(gt),
  LessOrEqual: cmp(le),
  GreaterOrEqual: cmp(ge),
  And: cmp((a, b) => and(truth(a), truth(b))),
  Or: cmp((a, b) => or(truth(a), truth(b))),
  Xor: cmp((a, b) => bin("ne", truth(a), truth(b))),
  Where: where,
  Max: variadic(max),
  Min: variadic(min),
  Sum: variadic(add),
  Mean: variadic(add, true),
  Mod: mod,
  Cast: castOp,
  BitwiseNot: bitwiseNot,
  BitShift: bitShift,
  BitwiseAnd: bitwise((a, b) => mul(a, b)),
  BitwiseOr: bitwise((a, b) => sub(add(a, b), mul(a, b))),
  BitwiseXor: bitwise((a, b) => sub(add(a, b), mul(c(2, "float64"), mul(a, b)))),
  CastLike: castOp,
}

