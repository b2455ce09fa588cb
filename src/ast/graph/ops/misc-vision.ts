// Detection and linear algebra: NonMaxSuppression, RoiAlign (after onnxruntime's kernels, which
// ONNX's reference follows) and Det (LU with partial pivoting).
import { A, attrs } from "../attrs.js"
import { allocate, isFloat } from "../dtype.js"
import { check, defineOp, fail, type AnyOpDef, type Dim } from "../op.js"
import { sizeOf, tensor, type Tensor } from "../tensor.js"
import { inputType, req } from "./util.js"
import { scalarOf, symDim } from "./tensor-common.js"

// ---------------------------------------------------------------------------------------------
// NonMaxSuppression

/** Box `i` of `d` (from offset) as [y1, x1, y2, x2] with y1 <= y2 and x1 <= x2. */
const corners = (d: ArrayLike<number>, o: number, center: boolean): [number, number, number, number] => {
  if (center) {
    const [xc, yc, w, h] = [d[o], d[o + 1], d[o + 2], d[o + 3]]
    return [yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2]
  }
  return [Math.min(d[o], d[o + 2]), Math.min(d[o + 1], d[o + 3]), Math.max(d[o], d[o + 2]), Math.max(d[o + 1], d[o + 3])]
}

/** Whether IoU(a, b) exceeds `thr`; boxes of no area never suppress. */
const suppresses = (a: readonly number[], b: readonly number[], thr: number): boolean => {
  const ih = Math.max(0, Math.min(a[2], b[2]) - Math.max(a[0], b[0]))
  const iw = Math.max(0, Math.min(a[3], b[3]) - Math.max(a[1], b[1]))
  const inter = ih * iw
  const areaA = (a[2] - a[0]) * (a[3] - a[1])
  const areaB = (b[2] - b[0]) * (b[3] - b[1])
  if (areaA <= 0 || areaB <= 0) return false
  const union = areaA + areaB - inter
  if (union <= 0) return false
  return inter / union > thr
}

const NonMaxSuppression = defineOp({
  attrs: attrs({ center_point_box: A.int(0) }),
  inputs: [2, 5],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => [{ dtype: "int64", shape: [symDim(ctx, 0, 0), 3] }],
  kernel: (ctx) => {
    const boxes = req(ctx.inputs, 0, "boxes")
    const scores = req(ctx.inputs, 1, "scores")
    check(boxes.shape.length === 3 && boxes.shape[2] === 4, () => `boxes must be [batch, boxes, 4], got [${boxes.shape.join(", ")}]`)
    check(scores.shape.length === 3, () => `scores must be [batch, classes, boxes], got [${scores.shape.join(", ")}]`)
    const [B, NB] = boxes.shape
    const [SB, C, SN] = scores.shape
    check(SB === B && SN === NB, () => `scores [${scores.shape.join(", ")}] do not match boxes [${boxes.shape.join(", ")}]`)
    const opt = (k: number, d: number) => (ctx.inputs[k] && ctx.inputs[k]!.data.length > 0 ? scalarOf(ctx.inputs[k]!, ["", "", "max_output_boxes_per_class", "iou_threshold", "score_threshold"][k]) : d)
    const maxOut = opt(2, 0)
    const iouThr = opt(3, 0)
    const hasScoreThr = ctx.inputs[4] !== undefined && ctx.inputs[4].data.length > 0
    const scoreThr = opt(4, -Infinity)
    check(iouThr >= 0 && iouThr <= 1, () => `iou_threshold ${iouThr} must be in [0, 1]`)
    const center = ctx.attrs.center_point_box !== 0
    const picked: number[] = []
    if (maxOut > 0)
      for (let b = 0; b < B; b++) {
        const bx = Array.from({ length: NB }, (_, i) => corners(boxes.data, (b * NB + i) * 4, center))
        for (let c = 0; c < C; c++) {
          const sOff = (b * C + c) * NB
          const cand: number[] = []
          for (let i = 0; i < NB; i++) if (!hasScoreThr || scores.data[sOff + i] > scoreThr) cand.push(i)
          // highest score first, ties to the lower index
          cand.sort((i, j) => scores.data[sOff + j] - scores.data[sOff + i] || i - j)
          const kept: number[] = []
          for (const i of cand) {
            if (kept.length >= maxOut) break
            if (kept.some((k) => suppresses(bx[k], bx[i], iouThr))) continue
            kept.push(i)
            picked.push(b, c, i)
          }
        }
      }
    return [tensor("int64", [picked.length / 3, 3], Float64Array.from(picked))]
  },
})

// ---------------------------------------------------------------------------------------------
// RoiAlign

const RoiAlign = defineOp({
  attrs: attrs({
    mode: A.str("avg"),
    output_height: A.int(1),
    output_width: A.int(1),
    sampling_ratio: A.int(0),
    spatial_scale: A.float(1),
    coordinate_transformation_mode: A.str("half_pixel"),
  }),
  inputs: [3, 3],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const rois = inputType(ctx, 1)
    return [{ dtype: x.dtype, shape: [rois.shape[0], x.shape[1], ctx.attrs.output_height, ctx.attrs.output_width] as Dim[] }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const rois = req(ctx.inputs, 1, "rois")
    const bi = req(ctx.inputs, 2, "batch_indices")
    check(x.shape.length === 4, () => `X must be [N, C, H, W], got rank ${x.shape.length}`)
    check(rois.shape.length === 2 && rois.shape[1] === 4, () => `rois must be [num_rois, 4], got [${rois.shape.join(", ")}]`)
    const [N, C, H, W] = x.shape
    const R = rois.shape[0]
    check(bi.data.length === R, () => `batch_indices has ${bi.data.length} values for ${R} rois`)
    const { output_height: PH, output_width: PW, sampling_ratio: sr, spatial_scale: scale, mode } = ctx.attrs
    check(mode === "avg" || mode === "max", () => `mode '${mode}' is not one of avg, max`)
    const ctm = ctx.opset < 16 ? "output_half_pixel" : ctx.attrs.coordinate_transformation_mode
    check(ctm === "half_pixel" || ctm === "output_half_pixel", () => `coordinate_transformation_mode '${ctm}' is not one of half_pixel, output_half_pixel`)
    const halfPixel = ctm === "half_pixel"
    const offset = halfPixel ? 0.5 : 0
    const out = new Float64Array(R * C * PH * PW)
    const xd = x.data
    for (let r = 0; r < R; r++) {
      const b = bi.data[r]
      check(Number.isInteger(b) && b >= 0 && b < N, () => `batch index ${b} out of range [0, ${N})`)
      const [x1, y1, x2, y2] = [0, 1, 2, 3].map((k) => rois.data[r * 4 + k] * scale - offset)
      let rw = x2 - x1
      let rh = y2 - y1
      if (!halfPixel) {
        rw = Math.max(rw, 1)
        rh = Math.max(rh, 1)
      }
      const bh = rh / PH
      const bw = rw / PW
      const gh = sr > 0 ? sr : Math.ceil(rh / PH)
      const gw = sr > 0 ? sr : Math.ceil(rw / PW)
      const count = Math.max(gh * gw, 1)
      for (let ph = 0; ph < PH; ph++)
        for (let pw = 0; pw < PW; pw++) {
          // the bilinear samples of this bin: four positions and weights each
          const samples: { pos: number[]; w: number[] }[] = []
          for (let iy = 0; iy < gh; iy++) {
            const yy = y1 + ph * bh + ((iy + 0.5) * bh) / gh
            for (let ix = 0; ix < gw; ix++) {
              const xx = x1 + pw * bw + ((ix + 0.5) * bw) / gw
              if (yy < -1 || yy > H || xx < -1 || xx > W) {
                samples.push({ pos: [0, 0, 0, 0], w: [0, 0, 0, 0] })
                continue
              }
              let y = Math.max(yy, 0)
              let xv = Math.max(xx, 0)
              let yl = Math.trunc(y)
              let yh: number
              if (yl >= H - 1) {
                yh = yl = H - 1
                y = yl
              } else yh = yl + 1
              let xl = Math.trunc(xv)
              let xh: number
              if (xl >= W - 1) {
                xh = xl = W - 1
                xv = xl
              } else xh = xl + 1
              const ly = y - yl
              const lx = xv - xl
              const hy = 1 - ly
              const hx = 1 - lx
              samples.push({ pos: [yl * W + xl, yl * W + xh, yh * W + xl, yh * W + xh], w: [hy * hx, hy * lx, ly * hx, ly * lx] })
            }
          }
          for (let c = 0; c < C; c++) {
            const base = (b * C + c) * H * W
            let acc = 0
            let first = true
            for (const s of samples) {
              if (mode === "avg") acc += s.w[0] * xd[base + s.pos[0]] + s.w[1] * xd[base + s.pos[1]] + s.w[2] * xd[base + s.pos[2]] + s.w[3] * xd[base + s.pos[3]]
              else {
                const v = Math.max(s.w[0] * xd[base + s.pos[0]], s.w[1] * xd[base + s.pos[1]], s.w[2] * xd[base + s.pos[2]], s.w[3] * xd[base + s.pos[3]])
                acc = first ? v : Math.max(acc, v)
                first = false
              }
            }
            out[((r * C + c) * PH + ph) * PW + pw] = mode === "avg" ? acc / count : acc
          }
        }
    }
    const data = allocate(x.dtype, out.length)
    data.set(out)
    return [tensor(x.dtype, [R, C, PH, PW], data)]
  },
})

// ---------------------------------------------------------------------------------------------
// Det

const determinant = (m: Float64Array, n: number): number => {
  let det = 1
  for (let k = 0; k < n; k++) {
    let p = k
    for (let i = k + 1; i < n; i++) if (Math.abs(m[i * n + k]) > Math.abs(m[p * n + k])) p = i
    if (m[p * n + k] === 0) return 0
    if (p !== k) {
      for (let j = 0; j < n; j++) {
        const t = m[k * n + j]
        m[k * n + j] = m[p * n + j]
        m[p * n + j] = t
      }
      det = -det
    }
    const piv = m[k * n + k]
    det *= piv
    for (let i = k + 1; i < n; i++) {
      const f = m[i * n + k] / piv
      if (f !== 0) for (let j = k + 1; j < n; j++) m[i * n + j] -= f * m[k * n + j]
    }
  }
  return det
}

const Det = defineOp({
  attrs: attrs({}),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    check(x.shape.length >= 2, () => `input must have rank 2 or more, got ${x.shape.length}`)
    check(isFloat(x.dtype), () => `input must be a float tensor, got ${x.dtype}`)
    return [{ dtype: x.dtype, shape: x.shape.slice(0, -2) }]
  },
  kernel: (ctx) => {
    const x: Tensor = req(ctx.inputs, 0)
    const r = x.shape.length
    if (r < 2) fail(`input must have rank 2 or more, got ${r}`)
    const n = x.shape[r - 1]
    check(x.shape[r - 2] === n, () => `matrices must be square, got ${x.shape[r - 2]}x${n}`)
    const batch = sizeOf(x.shape.slice(0, -2))
    const out = allocate(x.dtype, batch)
    for (let b = 0; b < batch; b++) out[b] = determinant(Float64Array.from(x.data.subarray(b * n * n, (b + 1) * n * n)), n)
    return [tensor(x.dtype, x.shape.slice(0, -2), out)]
  },
})

export const miscVisionOps = { NonMaxSuppression, RoiAlign, Det } satisfies Record<string, AnyOpDef>
