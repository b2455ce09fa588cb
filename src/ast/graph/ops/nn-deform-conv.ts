// DeformConv (2-D): a convolution whose sampling points move by learned offsets, read
// bilinearly (corners outside the image read 0), each tap scaled by an optional mask; after
// ONNX's reference implementation.
import { A, attrs } from "../attrs.js"
import { allocate, isFloat } from "../dtype.js"
import { check, defineOp, unsupported, type AnyOpDef } from "../op.js"
import { tensor } from "../tensor.js"
import { arity, inputType, req } from "./util.js"
import { padsOf, stepsOf, type WindowAttrs } from "./nn-common.js"

/** x[h, w] of one plane read bilinearly; corners outside the plane read as 0. */
const bilinear = (x: ArrayLike<number>, off: number, H: number, W: number, h: number, w: number): number => {
  const h0 = Math.floor(h)
  const w0 = Math.floor(w)
  const fh = h - h0
  const fw = w - w0
  let v = 0
  for (let dy = 0; dy < 2; dy++) {
    const yy = h0 + dy
    if (yy < 0 || yy >= H) continue
    const wy = dy ? fh : 1 - fh
    for (let dx = 0; dx < 2; dx++) {
      const xx = w0 + dx
      if (xx < 0 || xx >= W) continue
      v += wy * (dx ? fw : 1 - fw) * x[off + yy * W + xx]
    }
  }
  return v
}

const DeformConv = defineOp({
  attrs: attrs({
    dilations: A.optInts(),
    group: A.int(1),
    kernel_shape: A.optInts(),
    offset_group: A.int(1),
    pads: A.optInts(),
    strides: A.optInts(),
  }),
  inputs: arity.range(3, 5),
  outputs: arity.one,
  kind: "opaque",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const w = inputType(ctx, 1)
    const off = inputType(ctx, 2)
    check(isFloat(x.dtype), () => `DeformConv input must be float, got ${x.dtype}`)
    check(off.shape.length === x.shape.length, "offset must have the rank of X")
    return [{ dtype: x.dtype, shape: [x.shape[0], w.shape[0], ...off.shape.slice(2)] }]
  },
  kernel: ({ inputs, attrs: a }) => {
    const x = req(inputs, 0, "X")
    const w = req(inputs, 1, "W")
    const offset = req(inputs, 2, "offset")
    const b = inputs[3]
    const mask = inputs[4]
    if (x.shape.length !== 4) return unsupported(`DeformConv over ${x.shape.length - 2} spatial dims is not supported (2-D only)`)
    const [N, C, H, W] = x.shape
    const [M, cg, KH, KW] = w.shape
    const { group, offset_group: og } = a
    check(C === cg * group && M % group === 0, () => `W [${w.shape.join(", ")}] does not fit ${C} channels in ${group} groups`)
    check(C % og === 0, () => `offset_group ${og} must divide ${C} channels`)
    const wa: WindowAttrs = { auto_pad: "NOTSET", kernel_shape: undefined, dilations: a.dilations, pads: a.pads, strides: a.strides }
    const { strides, dilations } = stepsOf(wa, 2)
    const { begin } = padsOf(a.pads, 2)
    const [OH, OW] = offset.shape.slice(2)
    const kk = KH * KW
    check(offset.shape[1] === og * kk * 2, () => `offset has ${offset.shape[1]} channels, needs ${og * kk * 2}`)
    if (mask) check(mask.shape[1] === og * kk, () => `mask has ${mask.shape[1]} channels, needs ${og * kk}`)
    const xd = x.data as ArrayLike<number>
    const wd = w.data as ArrayLike<number>
    const od = offset.data as ArrayLike<number>
    const md = mask ? (mask.data as ArrayLike<number>) : undefined
    const mg = M / group
    const cPerOg = C / og
    const plane = OH * OW
    // sampled columns per (image, channel): [kernel position, output pixel]
    const cols = new Float64Array(C * kk * plane)
    const y = new Float64Array(N * M * plane)
    for (let n = 0; n < N; n++) {
      for (let c = 0; c < C; c++) {
        const g = Math.floor(c / cPerOg)
        for (let i = 0; i < KH; i++)
          for (let j = 0; j < KW; j++) {
            const k = i * KW + j
            const oh0 = ((n * og + g) * kk + k) * 2 * plane
            const mOff = ((n * og + g) * kk + k) * plane
            for (let oy = 0; oy < OH; oy++)
              for (let ox = 0; ox < OW; ox++) {
                const p = oy * OW + ox
                const h = oy * strides[0] - begin[0] + i * dilations[0] + od[oh0 + p]
                const ww = ox * strides[1] - begin[1] + j * dilations[1] + od[oh0 + plane + p]
                const v = bilinear(xd, (n * C + c) * H * W, H, W, h, ww)
                cols[(c * kk + k) * plane + p] = md ? v * md[mOff + p] : v
              }
          }
      }
      for (let m = 0; m < M; m++) {
        const g = Math.floor(m / mg)
        const yOff = (n * M + m) * plane
        if (b) y.fill(b.data[m] as number, yOff, yOff + plane)
        for (let c = 0; c < cg; c++)
          for (let k = 0; k < kk; k++) {
            const wv = wd[(m * cg + c) * kk + k]
            const col = ((g * cg + c) * kk + k) * plane
            for (let p = 0; p < plane; p++) y[yOff + p] += wv * cols[col + p]
          }
      }
    }
    const out = allocate(x.dtype, y.length)
    out.set(y)
    return [tensor(x.dtype, [N, M, OH, OW], out)]
  },
})

export const deformConvOps = { DeformConv } satisfies Record<string, AnyOpDef>
