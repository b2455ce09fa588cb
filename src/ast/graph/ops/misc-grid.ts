// Spatial sampling: GridSample (N-d; nearest, linear, cubic; zeros, border and reflection
// padding) and AffineGrid (the sampling grid of an affine transform), after PyTorch's
// grid_sample / affine_grid as ONNX's reference implements them.
import { A, attrs } from "../attrs.js"
import { allocate, converter, isFloat } from "../dtype.js"
import { check, defineOp, type AnyOpDef, type Dim } from "../op.js"
import { sizeOf, tensor, toNumbers } from "../tensor.js"
import { inputType, req } from "./util.js"
import { symDim } from "./tensor-common.js"

type Padding = "zeros" | "border" | "reflection"

/** Reflects x into [lo, hi] by the near border until it lies inside. */
const reflect = (x: number, lo: number, hi: number): number => {
  const rng = hi - lo
  if (x < lo) {
    const dx = lo - x
    const n = Math.trunc(dx / rng)
    const r = dx - n * rng
    return n % 2 === 0 ? lo + r : hi - r
  }
  if (x > hi) {
    const dx = x - hi
    const n = Math.trunc(dx / rng)
    const r = dx - n * rng
    return n % 2 === 0 ? hi - r : lo + r
  }
  return x
}

/** Keys' cubic convolution weights (A = -0.75) for the four taps around a point `t` past the left one. */
const cubicWeights = (t: number, w: Float64Array): void => {
  const a = -0.75
  const x = Math.abs(t)
  w[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a
  w[1] = ((a + 2) * x - (a + 3)) * x * x + 1
  w[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1
  w[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a
}

/** Round half to even (nearbyint), as the expected outputs do for every rank. */
const rint = (x: number): number => {
  const r = Math.round(x)
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r
}

const GridSample = defineOp({
  attrs: attrs({ mode: A.str("linear"), padding_mode: A.str("zeros"), align_corners: A.int(0) }),
  inputs: [2, 2],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const g = inputType(ctx, 1)
    check(x.shape.length >= 3, () => `X must have rank 3 or more, got ${x.shape.length}`)
    check(g.shape.length === x.shape.length, () => `grid rank ${g.shape.length} differs from X rank ${x.shape.length}`)
    return [{ dtype: x.dtype, shape: [x.shape[0], x.shape[1], ...g.shape.slice(1, -1)] }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const grid = req(ctx.inputs, 1, "grid")
    const r = x.shape.length - 2
    check(r >= 1, () => `X must have rank 3 or more, got ${x.shape.length}`)
    check(grid.shape.length === r + 2 && grid.shape[r + 1] === r, () => `grid shape [${grid.shape.join(", ")}] does not fit X rank ${r + 2}`)
    const [N, C] = x.shape
    check(grid.shape[0] === N, () => `grid batch ${grid.shape[0]} differs from X batch ${N}`)
    const mode = ({ bilinear: "linear", bicubic: "cubic" } as Record<string, string>)[ctx.attrs.mode] ?? ctx.attrs.mode
    check(mode === "nearest" || mode === "linear" || mode === "cubic", () => `mode '${ctx.attrs.mode}' is not one of nearest, linear, cubic`)
    const pad = ctx.attrs.padding_mode as Padding
    check(pad === "zeros" || pad === "border" || pad === "reflection", () => `padding_mode '${pad}' is not one of zeros, border, reflection`)
    const align = ctx.attrs.align_corners !== 0
    const dims = x.shape.slice(2)
    const outSp = grid.shape.slice(1, -1)
    const P = sizeOf(outSp)
    const S = sizeOf(dims)
    const lo = dims.map(() => (align ? 0 : -0.5))
    const hi = dims.map((d) => (align ? d - 1 : d - 0.5))
    const K = mode === "nearest" ? 1 : mode === "linear" ? 2 : 4
    // per dim: K taps (flat offset along the dim's stride, or -1 for a zero), and weights
    const strides = dims.map((_, i) => sizeOf(dims.slice(i + 1)))
    const idx = dims.map(() => new Int32Array(K))
    const wts = dims.map(() => new Float64Array(K))
    const pixel = (i: number, dim: number): number => {
      if (pad === "zeros") return i >= 0 && i < dims[dim] ? i : -1
      if (pad === "border") return Math.min(Math.max(i, 0), dims[dim] - 1)
      return Math.trunc(reflect(i, lo[dim], hi[dim]))
    }
    const out = new Float64Array(N * C * P)
    const g = grid.data
    const xd = x.data
    const counter = new Int32Array(r)
    const total = K ** r
    for (let n = 0; n < N; n++)
      for (let p = 0; p < P; p++) {
        for (let dim = 0; dim < r; dim++) {
          // the grid lists coordinates innermost dim first
          const nv = g[(n * P + p) * r + (r - 1 - dim)]
          const d = dims[dim]
          let v = align ? ((nv + 1) / 2) * (d - 1) : ((nv + 1) * d - 1) / 2
          if (mode === "nearest") v = rint(v)
          if (v < lo[dim] || v > hi[dim]) {
            if (pad === "border") v = Math.min(Math.max(v, 0), d - 1)
            else if (pad === "reflection") v = reflect(v, lo[dim], hi[dim])
          }
          if (mode === "nearest") {
            idx[dim][0] = pixel(Math.trunc(v), dim)
            wts[dim][0] = 1
          } else {
            const x0 = Math.floor(v)
            const t = v - x0
            if (mode === "linear") {
              wts[dim][0] = 1 - t
              wts[dim][1] = t
              idx[dim][0] = pixel(x0, dim)
              idx[dim][1] = pixel(x0 + 1, dim)
            } else {
              cubicWeights(t, wts[dim])
              for (let k = 0; k < 4; k++) idx[dim][k] = pixel(x0 - 1 + k, dim)
            }
          }
        }
        for (let c = 0; c < C; c++) {
          const base = (n * C + c) * S
          let sum = 0
          counter.fill(0)
          for (let q = 0; q < total; q++) {
            let off = base
            let w = 1
            for (let dim = 0; dim < r; dim++) {
              const i = idx[dim][counter[dim]]
              if (i < 0) {
                w = 0
                break
              }
              off += i * strides[dim]
              w *= wts[dim][counter[dim]]
            }
            if (w !== 0) sum += w * xd[off]
            for (let dim = r - 1; dim >= 0; dim--) {
              if (++counter[dim] < K) break
              counter[dim] = 0
            }
          }
          out[(n * C + c) * P + p] = sum
        }
      }
    const data = allocate(x.dtype, out.length)
    if (isFloat(x.dtype)) data.set(out)
    else {
      const conv = converter(x.dtype)
      out.forEach((v, i) => (data[i] = conv(v)))
    }
    return [tensor(x.dtype, [N, C, ...outSp], data)]
  },
})

// ---------------------------------------------------------------------------------------------
// AffineGrid: theta [N, 2, 3] with size [N, C, H, W] → grid [N, H, W, 2]; theta [N, 3, 4] with
// size [N, C, D, H, W] → [N, D, H, W, 3]. Base coordinates are pixel centres in [-1, 1] (or the
// corners with align_corners), the innermost spatial dim first.

const AffineGrid = defineOp({
  attrs: attrs({ align_corners: A.int(0) }),
  inputs: [2, 2],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => {
    const theta = inputType(ctx, 0)
    const sz = ctx.values[1]
    if (sz) {
      const s = toNumbers(sz)
      return [{ dtype: theta.dtype, shape: [s[0], ...s.slice(2), s.length - 2] }]
    }
    const n = inputType(ctx, 1).shape[0]
    check(typeof n === "number", "the size input's length is not static")
    const r = (n as number) - 2
    const shape: Dim[] = [theta.shape[0], ...Array.from({ length: r }, (_, i) => symDim(ctx, 0, i + 1)), r]
    return [{ dtype: theta.dtype, shape }]
  },
  kernel: (ctx) => {
    const theta = req(ctx.inputs, 0, "theta")
    const s = toNumbers(req(ctx.inputs, 1, "size"))
    const r = s.length - 2
    check(r === 2 || r === 3, () => `size must have 4 or 5 values, got ${s.length}`)
    check(theta.shape.length === 3 && theta.shape[1] === r && theta.shape[2] === r + 1, () => `theta must be [N, ${r}, ${r + 1}], got [${theta.shape.join(", ")}]`)
    const N = s[0]
    check(theta.shape[0] === N, () => `theta batch ${theta.shape[0]} differs from size batch ${N}`)
    const sp = s.slice(2)
    const align = ctx.attrs.align_corners !== 0
    const base = (i: number, d: number) => (align ? (d === 1 ? -1 : -1 + (2 * i) / (d - 1)) : (2 * i + 1) / d - 1)
    const P = sizeOf(sp)
    const out = new Float64Array(N * P * r)
    const th = theta.data
    const coord = new Float64Array(r)
    for (let n = 0; n < N; n++)
      for (let p = 0; p < P; p++) {
        // coordinates of point p, innermost dim first: (x, y[, z])
        let rem = p
        for (let dim = r - 1; dim >= 0; dim--) {
          coord[r - 1 - dim] = base(rem % sp[dim], sp[dim])
          rem = Math.floor(rem / sp[dim])
        }
        for (let row = 0; row < r; row++) {
          const t = (n * r + row) * (r + 1)
          let v = th[t + r]
          for (let k = 0; k < r; k++) v += th[t + k] * coord[k]
          out[(n * P + p) * r + row] = v
        }
      }
    const data = allocate(theta.dtype, out.length)
    data.set(out)
    return [tensor(theta.dtype, [N, ...sp, r], data)]
  },
})

export const miscGridOps = { GridSample, AffineGrid } satisfies Record<string, AnyOpDef>
