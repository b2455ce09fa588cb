// Winograd convolution F(4×4, 3×3) (or F(2×2, 3×3)) in the blocked layout (Lavin & Gray 2016; TVM's
// conv2d_winograd): a 3×3, stride-1 convolution computed per 4×4 output tile as
//   Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A
// where d is the 6×6 input tile and g the 3×3 kernel. The kernel transform U = G g Gᵀ is done
// once, at compile time (rewrite.WinogradConv folds it into a constant); what is left per input
// is the input transform V = Bᵀ d B, 36 independent matrix products over the channels
// (M = Σ_ic V·U, the bulk of the work: 36 multiplies per 16 outputs and channel pair instead of
// 144), and the output transform Aᵀ M A. Op: ConvWinogradNCHWc(x NCHW[ib]c, U [6, 6, O/ob, I,
// ob], bias?) → NCHW[ob]c.
import { A, attrs } from "../attrs.js"
import { allocate, type TypedArray } from "../dtype.js"
import { deferred, elementOf, kernelSource, packBlockInto, pendingRecipe } from "../deferred.js"
import { check, defineOp, fail, type AnyOpDef } from "../op.js"
import { tensor, type Tensor } from "../tensor.js"
import { req } from "./util.js"

/** Output tile (m) and input tile (m + 2) of F(4×4, 3×3), the default. */
export const WINOGRAD_M = 4
export const WINOGRAD_ALPHA = WINOGRAD_M + 2

/** The transforms of F(m×m, 3×3): Bᵀ (α×α), G (α×3), Aᵀ (m×α), α = m + 2. */
export interface WinogradMatrices {
  readonly BT: readonly (readonly number[])[]
  readonly G: readonly (readonly number[])[]
  readonly AT: readonly (readonly number[])[]
}

/**
 * F(4×4, 3×3) on the interpolation points 0, ±1, ±2, ∞ (Lavin & Gray), and F(2×2, 3×3) on 0, ±1,
 * ∞: 4 multiplies per output instead of 9 with a kernel 16/9 of the direct one's, for images with
 * too few 4×4 tiles to reuse F(4×4)'s 4× larger kernel.
 */
export const WINOGRAD: Readonly<Record<2 | 4, WinogradMatrices>> = {
  4: {
    BT: [
      [4, 0, -5, 0, 1, 0],
      [0, -4, -4, 1, 1, 0],
      [0, 4, -4, -1, 1, 0],
      [0, -2, -1, 2, 1, 0],
      [0, 2, -1, -2, 1, 0],
      [0, 4, 0, -5, 0, 1],
    ],
    G: [
      [1 / 4, 0, 0],
      [-1 / 6, -1 / 6, -1 / 6],
      [-1 / 6, 1 / 6, -1 / 6],
      [1 / 24, 1 / 12, 1 / 6],
      [1 / 24, -1 / 12, 1 / 6],
      [0, 0, 1],
    ],
    AT: [
      [1, 1, 1, 1, 1, 0],
      [0, 1, -1, 2, -2, 0],
      [0, 1, 1, 4, 4, 0],
      [0, 1, -1, 8, -8, 1],
    ],
  },
  2: {
    BT: [
      [1, 0, -1, 0],
      [0, 1, 1, 0],
      [0, -1, 1, 0],
      [0, 1, 0, -1],
    ],
    G: [
      [1, 0, 0],
      [1 / 2, 1 / 2, 1 / 2],
      [1 / 2, -1 / 2, 1 / 2],
      [0, 0, 1],
    ],
    AT: [
      [1, 1, 1, 0],
      [0, 1, -1, -1],
    ],
  },
}

/** The matrices of the transform whose input tile is α (U's leading dims): 6 → F(4×4), 4 → F(2×2). */
export const winogradFor = (alpha: number): WinogradMatrices => {
  const m = alpha - 2
  if (m !== 2 && m !== 4) return fail(`Winograd weights of tile ${alpha}×${alpha}: only F(2×2, 3×3) and F(4×4, 3×3) (tiles 4 and 6) are supported`)
  return WINOGRAD[m]
}

/** F(4×4, 3×3)'s matrices by their old names. */
export const WINOGRAD_BT = WINOGRAD[4].BT
export const WINOGRAD_G = WINOGRAD[4].G
export const WINOGRAD_AT = WINOGRAD[4].AT

/**
 * U = G g Gᵀ for every (output, input) channel pair of a packed kernel OIHW[ib]i[ob]o
 * ([O/ob, I/ib, 3, 3, ib, ob]), laid out [6, 6, O/ob, I, ob] (the output lane innermost, as the
 * blocked conv's weights). Computed in float64, stored in the kernel's dtype. Deferred
 * (deferred.ts): computed when first read, or by the artifact straight into its constants.
 */
export const winogradKernel = (w: Tensor, m: 2 | 4 = WINOGRAD_M): Tensor => {
  const [OB, IB, KH, KW, ib, ob] = w.shape
  check(KH === 3 && KW === 3, `the Winograd kernel transform needs a 3×3 kernel, got ${KH}×${KW}`)
  const I = IB * ib
  const a = m + 2
  const G = Float64Array.from(WINOGRAD[m].G.flat())
  // U[e, n, oo, ic, o] of one element, the kernel's sums in the kernel's order
  const element = (j: number): number => {
    const [o, ic, oo, n, e] = [j % ob, Math.floor(j / ob) % I, Math.floor(j / (ob * I)) % OB, Math.floor(j / (ob * I * OB)) % a, Math.floor(j / (ob * I * OB * a))]
    const g = (r: number, c: number) => elementOf(w, ((((oo * IB + Math.floor(ic / ib)) * 3 + r) * 3 + c) * ib + (ic % ib)) * ob + o)
    const gg = [0, 1, 2].map((c) => G[e * 3] * g(0, c) + G[e * 3 + 1] * g(1, c) + G[e * 3 + 2] * g(2, c))
    return gg[0] * G[n * 3] + gg[1] * G[n * 3 + 1] + gg[2] * G[n * 3 + 2]
  }
  // a unit: one row e of planes (e, 0…a-1), all of whose values one G g row gives
  const unit = a * OB * I * ob
  return deferred(w.dtype, [a, a, OB, I, ob], { kind: "winograd", source: w, m }, { fillRange: (start, out) => winogradInto(w, a, G, start / unit, out), unit, element })
}

/** winogradKernel's values of rows e0… (out.length / (a·plane) of them: planes (e, 0…a-1), e from e0) into `out`. */
const winogradInto = (w: Tensor, a: number, G: Float64Array, e0: number, out: TypedArray): void => {
  const [OB, IB, , , ib, ob] = w.shape
  const I = IB * ib
  // a pending pack (deferred.ts) is read through, a block at a time into `block` (its dtype's
  // array, so each value rounds as the packed array stores it): the packed kernel is never written
  const pack = pendingRecipe(w)
  const through = pack?.kind === "packed-kernel" && pack.ib === ib && pack.ob === ob ? { ...kernelSource(pack.source), shape: pack.source.shape } : undefined
  const block = allocate(w.dtype, through ? 9 * ib * ob : 0)
  const src = through ? block : w.data
  // Lane-wise over whole runs, each a plain loop (a per-pair 3×3 → a×a product wrote a² values a
  // plane apart, through a buffer and a closure: ~25 ns a value before the JIT settled). A packed
  // block (oo, ii) holds its 9 taps as 9 runs of L = ib·ob lanes (i, o), o innermost; U's plane
  // (e, n) holds output block oo's lanes (ic, o) as one run of I·ob, block ii's L of them at ii·L.
  // So G g is 3 runs of L a row, and (G g) Gᵀ a run of L into each plane, block by block: G g of
  // one block stays in cache (a·3·L doubles; of a whole output block's row, 1.2 MB of fresh memory
  // a call on ResNet-50's 512-channel layers).
  const L = ib * ob
  const run = I * ob
  const plane = OB * run
  const e1 = e0 + out.length / (a * plane)
  // G g of one block (oo, ii): [e, c] rows of L lanes
  const gg = new Float64Array(a * 3 * L)
  for (let oo = 0; oo < OB; oo++)
    for (let ii = 0; ii < IB; ii++) {
      if (through) packBlockInto(through.src, through.scale, through.shape, ib, ob, oo, ii, block, 0)
      const from = through ? 0 : (oo * IB + ii) * 9 * L
      for (let e = e0; e < e1; e++) {
        const g0 = G[e * 3]
        const g1 = G[e * 3 + 1]
        const g2 = G[e * 3 + 2]
        // (G g)[e, c] = G[e, 0]·g[0, c] + G[e, 1]·g[1, c] + G[e, 2]·g[2, c], tap (r, c) the run r·3 + c
        for (let c = 0; c < 3; c++) {
          const r0 = from + c * L
          const r1 = r0 + 3 * L
          const r2 = r0 + 6 * L
          const d = (e * 3 + c) * L
          for (let j = 0; j < L; j++) gg[d + j] = g0 * src[r0 + j] + g1 * src[r1 + j] + g2 * src[r2 + j]
        }
      }
      // U[e, n] = (G g)[e, 0]·G[n, 0] + (G g)[e, 1]·G[n, 1] + (G g)[e, 2]·G[n, 2], the block's L lanes
      for (let e = e0; e < e1; e++) {
        const h0 = e * 3 * L
        const h1 = h0 + L
        const h2 = h1 + L
        for (let n = 0; n < a; n++) {
          const q0 = G[n * 3]
          const q1 = G[n * 3 + 1]
          const q2 = G[n * 3 + 2]
          const dst = ((e - e0) * a + n) * plane + oo * run + ii * L
          for (let j = 0; j < L; j++) out[dst + j] = gg[h0 + j] * q0 + gg[h1 + j] * q1 + gg[h2 + j] * q2
        }
      }
    }
}

const winogradAttrs = attrs({
  in_block: A.int(),
  out_block: A.int(),
  /** Explicit zero padding [top, left, bottom, right]. */
  pads: A.ints([0, 0, 0, 0]),
})

/** The output's spatial size: the padded input less the kernel's 2. */
const outSize = (H: number, W: number, pads: readonly number[]): [number, number] => [H + pads[0] + pads[2] - 2, W + pads[1] + pads[3] - 2]

/**
 * The op's meaning, in float64: per 4×4 output tile, the input transform of the padded 6×6 tile,
 * the product with U summed over the input channels, and the output transform (tiles past the
 * image's edge computed and cut off).
 */
const winogradReference = (x: Tensor, u: Tensor, bias: Tensor | undefined, pads: readonly number[]): Tensor => {
  const [N, ICB, H, W, ib] = x.shape
  const [a, , OCB, I, ob] = u.shape
  const m = a - 2
  const { BT, AT } = winogradFor(a)
  const [OH, OW] = outSize(H, W, pads)
  const out = allocate(x.dtype, N * OCB * OH * OW * ob)
  const d = new Float64Array(a * a)
  const t = new Float64Array(a * a)
  const V = new Float64Array(a * a * I)
  const M = new Float64Array(a * a)
  const tmp = new Float64Array(m * a)
  const pixel = (n: number, ic: number, y: number, xx: number) =>
    y < 0 || y >= H || xx < 0 || xx >= W ? 0 : Number(x.data[(((n * ICB + Math.floor(ic / ib)) * H + y) * W + xx) * ib + (ic % ib)])
  for (let n = 0; n < N; n++)
    for (let th = 0; th < Math.ceil(OH / m); th++)
      for (let tw = 0; tw < Math.ceil(OW / m); tw++) {
        // V = Bᵀ d B per input channel
        for (let ic = 0; ic < I; ic++) {
          for (let r = 0; r < a; r++) for (let s = 0; s < a; s++) d[r * a + s] = pixel(n, ic, th * m + r - pads[0], tw * m + s - pads[1])
          for (let e = 0; e < a; e++) for (let s = 0; s < a; s++) {
            let acc = 0
            for (let r = 0; r < a; r++) acc += BT[e][r] * d[r * a + s]
            t[e * a + s] = acc
          }
          for (let e = 0; e < a; e++) for (let v = 0; v < a; v++) {
            let acc = 0
            for (let s = 0; s < a; s++) acc += t[e * a + s] * BT[v][s]
            V[(e * a + v) * I + ic] = acc
          }
        }
        for (let oc = 0; oc < OCB * ob; oc++) {
          const [oo, o] = [Math.floor(oc / ob), oc % ob]
          for (let ev = 0; ev < a * a; ev++) {
            let acc = 0
            for (let ic = 0; ic < I; ic++) acc += V[ev * I + ic] * Number(u.data[((ev * OCB + oo) * I + ic) * ob + o])
            M[ev] = acc
          }
          // Y = Aᵀ M A
          for (let i = 0; i < m; i++) for (let v = 0; v < a; v++) {
            let acc = 0
            for (let e = 0; e < a; e++) acc += AT[i][e] * M[e * a + v]
            tmp[i * a + v] = acc
          }
          const b = bias ? Number(bias.data[oc]) : 0
          for (let i = 0; i < m; i++) for (let j = 0; j < m; j++) {
            const [y, xx] = [th * m + i, tw * m + j]
            if (y >= OH || xx >= OW) continue
            let acc = 0
            for (let v = 0; v < a; v++) acc += tmp[i * a + v] * AT[j][v]
            out[(((n * OCB + oo) * OH + y) * OW + xx) * ob + o] = acc + b
          }
        }
      }
  return tensor(x.dtype, [N, OCB, OH, OW, ob], out)
}

export const winogradOps = {
  ConvWinogradNCHWc: defineOp({
    attrs: winogradAttrs,
    inputs: [2, 3],
    outputs: [1, 1],
    kind: "out-elementwise-fusable",
    infer: (ctx) => {
      const [x, u] = ctx.inputs
      if (!x || !u) return fail("inputs 0 and 1 are required")
      if (x.shape.length !== 5) return fail(`input 0 must be NCHW{c}c (rank 5), got rank ${x.shape.length}`)
      if (u.shape.length !== 5 || (u.shape[0] !== 4 && u.shape[0] !== 6) || u.shape[1] !== u.shape[0])
        return fail(`input 1 must be Winograd weights [α, α, O/ob, I, ob] with α 4 or 6, got [${u.shape.join(", ")}]`)
      if (ctx.attrs.pads.length !== 4 || ctx.attrs.pads.some((p) => p < 0)) return fail(`pads must be 4 non-negative numbers, got [${ctx.attrs.pads.join(", ")}]`)
      const [N, CB, H, W, ib] = x.shape
      if (typeof CB === "number" && typeof ib === "number" && typeof u.shape[3] === "number" && CB * ib !== u.shape[3])
        return fail(`input channels ${CB}×${ib} do not match the weights' ${u.shape[3]}`)
      if (typeof H !== "number" || typeof W !== "number") return fail("the spatial dims must be static")
      const [OH, OW] = outSize(H, W, ctx.attrs.pads)
      if (OH < 1 || OW < 1) return fail(`the output would be ${OH}×${OW}`)
      return [{ dtype: x.dtype, shape: [N, u.shape[2], OH, OW, u.shape[4]] }]
    },
    kernel: (ctx) => [winogradReference(req(ctx.inputs, 0), req(ctx.inputs, 1), ctx.inputs[2], ctx.attrs.pads)],
  }),
} satisfies Record<string, AnyOpDef>
