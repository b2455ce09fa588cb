// Col2Im: the inverse of im2col, N-d. Each column of the input is one block position; its rows
// (channel × block offset) are summed back into the image, overlaps adding up.
import { A, attrs } from "../attrs.js"
import { allocate } from "../dtype.js"
import { check, defineOp, unsupported, type AnyOpDef, type Dim } from "../op.js"
import { sizeOf, tensor } from "../tensor.js"
import { arity, inputType, req } from "./util.js"
import { padsOf, stepsOf, type WindowAttrs } from "./nn-common.js"
import { intValues } from "./tensor-common.js"

const Col2Im = defineOp({
  attrs: attrs({ dilations: A.optInts(), pads: A.optInts(), strides: A.optInts() }),
  inputs: arity.three,
  outputs: arity.one,
  kind: "opaque",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    check(x.shape.length === 3, () => `Col2Im input must be 3-D [N, C·block, L], got rank ${x.shape.length}`)
    const img = ctx.values[1] ? intValues(ctx.values[1], "image_shape") : undefined
    const block = ctx.values[2] ? intValues(ctx.values[2], "block_shape") : undefined
    const rankT = inputType(ctx, 1).shape[0]
    const rank = img ? img.length : typeof rankT === "number" ? rankT : unsupported("image_shape has an unknown length")
    const cb = x.shape[1]
    const c: Dim = block && typeof cb === "number" ? cb / sizeOf(block) : `${ctx.node}.out0.d1`
    const spatial: Dim[] = img ?? Array.from({ length: rank }, (_, i) => `${ctx.node}.out0.d${i + 2}`)
    return [{ dtype: x.dtype, shape: [x.shape[0], c, ...spatial] }]
  },
  kernel: ({ inputs, attrs: a }) => {
    const x = req(inputs, 0, "input")
    const img = intValues(req(inputs, 1, "image_shape"), "image_shape")
    const block = intValues(req(inputs, 2, "block_shape"), "block_shape")
    const rank = img.length
    check(block.length === rank, () => `block_shape has ${block.length} dims, image_shape ${rank}`)
    check(x.shape.length === 3, () => `Col2Im input must be 3-D [N, C·block, L], got rank ${x.shape.length}`)
    const wa: WindowAttrs = { auto_pad: "NOTSET", kernel_shape: undefined, dilations: a.dilations, pads: a.pads, strides: a.strides }
    const { strides, dilations } = stepsOf(wa, rank)
    const { begin, end } = padsOf(a.pads, rank)
    const blocks = img.map((d, i) => Math.floor((d + begin[i] + end[i] - ((block[i] - 1) * dilations[i] + 1)) / strides[i]) + 1)
    const [batch, cb, L] = x.shape
    const kSize = sizeOf(block)
    check(cb % kSize === 0, () => `input dim 1 (${cb}) is not a multiple of the block size ${kSize}`)
    check(L === sizeOf(blocks), () => `input has ${L} blocks, the image holds [${blocks.join(", ")}]`)
    const channels = cb / kSize
    const outSize = sizeOf(img)
    const y = new Float64Array(batch * channels * outSize)
    const xd = x.data as ArrayLike<number>
    const kc = new Array<number>(rank)
    const lc = new Array<number>(rank)
    for (let kk = 0; kk < kSize; kk++) {
      for (let d = rank - 1, r = kk; d >= 0; d--) {
        kc[d] = r % block[d]
        r = Math.floor(r / block[d])
      }
      for (let l = 0; l < L; l++) {
        let o = 0
        let inside = true
        for (let d = rank - 1, r = l; d >= 0; d--) {
          lc[d] = r % blocks[d]
          r = Math.floor(r / blocks[d])
        }
        for (let d = 0; d < rank && inside; d++) {
          const c = lc[d] * strides[d] - begin[d] + kc[d] * dilations[d]
          inside = c >= 0 && c < img[d]
          o = o * img[d] + c
        }
        if (!inside) continue
        for (let n = 0; n < batch; n++)
          for (let c = 0; c < channels; c++) y[(n * channels + c) * outSize + o] += xd[((n * channels + c) * kSize + kk) * L + l]
      }
    }
    const out = allocate(x.dtype, y.length)
    out.set(y)
    return [tensor(x.dtype, [batch, channels, ...img], out)]
  },
})

export const col2imOps = { Col2Im } satisfies Record<string, AnyOpDef>
