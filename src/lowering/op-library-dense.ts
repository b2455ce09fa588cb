// The dense products: MatMul (batched, broadcast, 1-D operands), Gemm (either side transposed,
// alpha, beta and C), DensePack (TVM's dense_pack: the weights in column panels) and MatMulPacked
// (a product of many rows over a constant weight in column panels of its tile's width). Each tags its
// product, the stage its template is built around.
import { add, c, floordiv, floormod, mul } from "../ast/te/expr.js"
import { at, compute, reduceAxis, sum } from "../ast/te/tensor.js"
import { bread, fl, inp, none, num, shapeOf, type OpCompute } from "./op-library-common.js"

const matmulLike: OpCompute = (ctx) => {
  const a = inp(ctx, 0)
  const b = inp(ctx, 1)
  // a 1-D operand is a row (A) or a column (B) whose unit dim leaves the output
  const a1 = a.shape.length === 1
  const b1 = b.shape.length === 1
  if (a1 && b1) return none("MatMul of two 1-D operands (a scalar output)")
  const K = a.shape[a.shape.length - 1]
  const out = shapeOf(ctx.outputs[0])
  const k = reduceAxis(K, `${ctx.name()}.rk`)
  return [
    compute(ctx.name(), out, (...idx) => {
      const batch = idx.slice(0, idx.length - (a1 || b1 ? 1 : 2))
      const i = a1 ? undefined : idx[batch.length]
      const j = b1 ? undefined : idx[idx.length - 1]
      const ab = a.shape.slice(0, -2).map((d, q) => (d === 1 ? c(0) : batch[q + batch.length - (a.shape.length - 2)]))
      const bb = b.shape.slice(0, -2).map((d, q) => (d === 1 ? c(0) : batch[q + batch.length - (b.shape.length - 2)]))
      return sum(mul(a1 ? at(a, k.var) : at(a, ...ab, i!, k.var), b1 ? at(b, k.var) : at(b, ...bb, k.var, j!)), [k])
    }, ctx.outputs[0].dtype, "matmul"),
  ]
}

const gemm: OpCompute = (ctx) => {
  const a = inp(ctx, 0)
  const b = inp(ctx, 1)
  const cc = ctx.inputs[2]
  const transA = num(ctx.attrs.transA, 0)
  const transB = num(ctx.attrs.transB, 0)
  const alpha = num(ctx.attrs.alpha, 1)
  const beta = num(ctx.attrs.beta, 1)
  const [M, N] = shapeOf(ctx.outputs[0])
  const K = transA ? a.shape[0] : a.shape[1]
  const dtype = ctx.outputs[0].dtype
  const k = reduceAxis(K, `${ctx.name()}.rk`)
  const prod = compute(ctx.name(cc ? "mm" : undefined), [M, N], (i, j) => {
    const s = sum(mul(transA ? at(a, k.var, i) : at(a, i, k.var), transB ? at(b, j, k.var) : at(b, k.var, j)), [k])
    return s
  }, dtype, "dense")
  if (!cc && alpha === 1) return [prod]
  return [
    prod,
    compute(ctx.name(), [M, N], (i, j) => {
      let e = alpha === 1 ? at(prod, i, j) : mul(at(prod, i, j), fl(dtype, alpha))
      if (cc) e = add(e, beta === 1 ? bread(cc, [i, j]) : mul(bread(cc, [i, j]), fl(dtype, beta)))
      return e
    }, dtype),
  ]
}

/**
 * DensePack (TVM's dense_pack): the product into column panels [M, P, b], each panel's weights
 * [K, b] contiguous, then the output [M, n] read back from the panels with C added.
 */
const densePack: OpCompute = (ctx) => {
  const a = inp(ctx, 0)
  const w = inp(ctx, 1)
  const cc = ctx.inputs[2]
  const [P, K, b] = w.shape
  const [M, N] = shapeOf(ctx.outputs[0])
  const dtype = ctx.outputs[0].dtype
  const k = reduceAxis(K, `${ctx.name()}.rk`)
  const panels = compute(ctx.name("panels"), [M, P, b], (i, p, l) => sum(mul(at(a, i, k.var), at(w, p, k.var, l)), [k]), dtype, "dense_pack")
  return [
    panels,
    compute(ctx.name(), [M, N], (i, j) => {
      const e = at(panels, i, floordiv(j, c(b)), floormod(j, c(b)))
      return cc ? add(e, bread(cc, [i, j])) : e
    }, dtype),
  ]
}

/**
 * MatMulPacked (the layout rewrite of a constant B): A [..., M, K] · B in column panels [P, K, w]
 * → [..., M, n], column j read at panel j / w, lane j % w — with the column tile the panel (the
 * matmul rule's only one here), the indices simplify to the tile loop and its lane, and a tile
 * reads one contiguous panel row per step of the reduction.
 */
const matmulPacked: OpCompute = (ctx) => {
  const a = inp(ctx, 0)
  const w = inp(ctx, 1)
  const [, K, b] = w.shape
  const out = shapeOf(ctx.outputs[0])
  const k = reduceAxis(K, `${ctx.name()}.rk`)
  return [
    compute(ctx.name(), out, (...idx) => {
      const [i, j] = idx.slice(-2)
      return sum(mul(at(a, ...idx.slice(0, -2), i, k.var), at(w, floordiv(j, c(b)), k.var, floormod(j, c(b)))), [k])
    }, ctx.outputs[0].dtype, "matmul_packed"),
  ]
}

export const DENSE: Readonly<Record<string, OpCompute>> = {
  MatMul: matmulLike,
  Gemm: gemm,
  DensePack: densePack,
  MatMulPacked: matmulPacked,
}
