// The compute of ConvWinogradNCHWc (src/ast/graph/ops/winograd.ts) as TE stages (F(4×4) shown;
// F(2×2) has 4×4 input tiles and 2×2 output tiles):
//   pad  [N, CB, HP, WP, ib]            the zero-padded input, covering every 6×6 tile
//   T, V [6, 6, P, CB, ib]              Bᵀ d, then (Bᵀ d) B, of each tile p (of P = N·⌈OH/4⌉·⌈OW/4⌉) and channel
//   M    [6, 6, P, OCB, ob]             Σ_ic V[e, n, p, ic] · U[e, n, ocb, ic, ob]: 36 batched products
//   Y    [N, OCB, OH, OW, ob]           Aᵀ M A of the output pixel's tile, at its place in the tile
// The transforms' coefficients are constants of the compute: V[e, n] and Y[i, j] are chains of
// selects on (e, n) / (i, j), each leaf the explicit sum over the non-zero coefficients. Once a
// schedule unrolls those loops the selects fold away and each store is one short sum; without
// unrolling the chain is still the right answer.
import { add, and, c, eq, floordiv, floormod, ge, lt, mul, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, reduceAxis, sum, type ComputeTensor } from "../ast/te/tensor.js"
import { winogradFor } from "../ast/graph/ops/winograd.js"
import { fl, inp, shapeOf, type OpCompute } from "./op-library-common.js"

/** select(v == 0, leaf(0), select(v == 1, leaf(1), … leaf(n - 1))). */
const chain = (v: Expr, n: number, leaf: (k: number) => Expr): Expr => {
  let e = leaf(n - 1)
  for (let k = n - 2; k >= 0; k--) e = select(eq(v, c(k)), leaf(k), e)
  return e
}

/** Σ coef·term over the non-zero coefficients (a coefficient of 1 multiplies nothing). */
const weighted = (dtype: ComputeTensor["dtype"], terms: readonly (readonly [number, Expr])[]): Expr => {
  let e: Expr | undefined
  for (const [k, t] of terms) {
    if (k === 0) continue
    const term = k === 1 ? t : mul(fl(dtype, k), t)
    e = e ? add(e, term) : term
  }
  return e ?? fl(dtype, 0)
}

export const convWinogradNCHWc: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const u = inp(ctx, 1)
  const bias = ctx.inputs[2]
  const [N, CB, H, W, ib] = x.shape
  const [alpha, , OCB, IC, ob] = u.shape
  const m = alpha - 2
  const { BT, AT } = winogradFor(alpha)
  const out = shapeOf(ctx.outputs[0])
  const [, , OH, OW] = out
  const pads = (ctx.attrs.pads as number[] | undefined) ?? [0, 0, 0, 0]
  const dtype = ctx.outputs[0].dtype
  const nH = Math.ceil(OH / m)
  const nW = Math.ceil(OW / m)
  const P = N * nH * nW
  // the padded input: every tile's 6×6 window inside it (tiles past the image read zeros)
  const pad = compute(ctx.name("wino_pad"), [N, CB, nH * m + 2, nW * m + 2, ib], (n, cb, y, xx, ci) => {
    const iy = sub(y, c(pads[0]))
    const ix = sub(xx, c(pads[1]))
    const inside = and(and(ge(iy, c(0)), lt(iy, c(H))), and(ge(ix, c(0)), lt(ix, c(W))))
    return select(inside, at(x, n, cb, iy, ix, ci), fl(dtype, 0))
  }, x.dtype)
  // V = Bᵀ d B in two products: T[e, s] = Σ_r Bᵀ[e][r] d[r][s], then V[e, n] = Σ_s T[e][s] Bᵀ[n][s]
  // (the input transform's arithmetic and code about halved against the one sum over r and s)
  const T = compute(ctx.name("wino_T"), [alpha, alpha, P, CB, ib], (e, s, p, cb, ci) => {
    const img = floordiv(p, c(nH * nW))
    const th = floormod(floordiv(p, c(nW)), c(nH))
    const tw = floormod(p, c(nW))
    return chain(e, alpha, (ee) => {
      const terms: [number, Expr][] = []
      for (let r = 0; r < alpha; r++) terms.push([BT[ee][r], at(pad, img, cb, add(mul(th, c(m)), c(r)), add(mul(tw, c(m)), s), ci)])
      return weighted(dtype, terms)
    })
  }, dtype)
  const V = compute(ctx.name("wino_V"), [alpha, alpha, P, CB, ib], (e, nu, p, cb, ci) =>
    chain(nu, alpha, (nn) => {
      const terms: [number, Expr][] = []
      for (let s = 0; s < alpha; s++) terms.push([BT[nn][s], at(T, e, c(s), p, cb, ci)])
      return weighted(dtype, terms)
    }), dtype)
  // M[e, n, p, ocb, o] = Σ_ic V[e, n, p, ic] · U[e, n, ocb, ic, o]
  const ic = reduceAxis(IC, `${ctx.name()}.ic`)
  const M = compute(ctx.name("wino_M"), [alpha, alpha, P, OCB, ob], (e, nu, p, oc, oi) =>
    sum(mul(at(V, e, nu, p, floordiv(ic.var, c(ib)), floormod(ic.var, c(ib))), at(u, e, nu, oc, ic.var, oi)), [ic]), dtype, "conv2d_winograd_product")
  // Y[i, j] = Σ_e Σ_n Aᵀ[i][e] M[e][n] Aᵀ[j][n], (i, j) the pixel's place in its tile
  const Y = compute(ctx.name(bias ? "wino_Y" : undefined), out, (n, oc, h, w, oi) => {
    const p = add(add(mul(n, c(nH * nW)), mul(floordiv(h, c(m)), c(nW))), floordiv(w, c(m)))
    return chain(floormod(h, c(m)), m, (i) =>
      chain(floormod(w, c(m)), m, (j) => {
        const terms: [number, Expr][] = []
        for (let e = 0; e < alpha; e++) for (let nn = 0; nn < alpha; nn++) terms.push([AT[i][e] * AT[j][nn], at(M, c(e), c(nn), p, oc, oi)])
        return weighted(dtype, terms)
      }),
    )
  }, dtype)
  if (!bias) return [pad, V, M, Y]
  return [pad, V, M, Y, compute(ctx.name(), out, (n, oc, y, xx, oi) => add(at(Y, n, oc, y, xx, oi), at(bias, add(mul(oc, c(ob)), oi))), dtype)]
}
