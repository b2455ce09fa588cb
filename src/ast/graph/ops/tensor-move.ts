// Ops that move data into a new layout: Transpose, Expand, Tile, Concat, Split, DepthToSpace and
// SpaceToDepth.
import { A, attrs } from "../attrs.js"
import { allocate } from "../dtype.js"
import { check, defineOp, fail, unsupported, type AnyOpDef, type Dim } from "../op.js"
import { broadcastIndex, broadcastShapes, reshapeView, sizeOf, stridesOf, tensor, type Tensor } from "../tensor.js"
import { broadcastDims, inputType, req } from "./util.js"
import { aroundAxis, axisIn, constInts, indexMaps, intValues, remap, staticLength, strided, symDim, transpose } from "./tensor-common.js"

// ---------------------------------------------------------------------------------------------
// Transpose, Expand, Tile

const permOf = (perm: readonly number[] | undefined, rank: number): number[] => {
  if (!perm) return Array.from({ length: rank }, (_, i) => rank - 1 - i)
  check(perm.length === rank && [...perm].sort((a, b) => a - b).every((p, i) => p === i), () => `perm [${perm.join(", ")}] is not a permutation of ${rank} axes`)
  return [...perm]
}

const Transpose = defineOp({
  attrs: attrs({ perm: A.optInts() }),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    return [{ dtype: x.dtype, shape: permOf(ctx.attrs.perm, x.shape.length).map((p) => x.shape[p]) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    return [transpose(x, permOf(ctx.attrs.perm, x.shape.length))]
  },
})

const Expand = defineOp({
  attrs: attrs({}),
  inputs: [2, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const shape = constInts(ctx, 1, "shape")
    if (shape) return [{ dtype: x.dtype, shape: broadcastDims(x.shape, shape) }]
    const n = staticLength(ctx.inputs[1]) ?? unsupported("the shape input's length is not static, so the output rank is unknown")
    const rank = Math.max(n, x.shape.length)
    const off = rank - x.shape.length
    // an input dim other than 1 survives broadcasting; a 1 becomes whatever the shape says
    return [{ dtype: x.dtype, shape: Array.from({ length: rank }, (_, i) => (i >= off && x.shape[i - off] !== 1 ? x.shape[i - off] : symDim(ctx, 0, i))) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const shape = intValues(req(ctx.inputs, 1, "shape"), "shape")
    const out = broadcastShapes(x.shape, shape) ?? fail(`input [${x.shape.join(", ")}] does not broadcast to [${shape.join(", ")}]`)
    const idx = broadcastIndex(x.shape, out)
    const data = allocate(x.dtype, idx.length)
    for (let i = 0; i < idx.length; i++) data[i] = x.data[idx[i]]
    return [tensor(x.dtype, out, data)]
  },
})

/** Tile's repeats per axis: input 1 (opset 6+), or Tile-1's (tiles, axis) scalar pair. */
const tileRepeats = (rank: number, inputs: readonly (Tensor | undefined)[], opset: number): number[] => {
  const r = intValues(req(inputs, 1, "repeats"), "repeats")
  if (opset < 6 && inputs[2]) {
    const axis = axisIn(intValues(inputs[2], "axis")[0], rank)
    return Array.from({ length: rank }, (_, i) => (i === axis ? r[0] : 1))
  }
  check(r.length === rank, () => `repeats has ${r.length} entries for rank ${rank}`)
  check(r.every((v) => v >= 0), () => `repeats [${r.join(", ")}] has a negative entry`)
  return r
}

const Tile = defineOp({
  attrs: attrs({}),
  inputs: [2, 3],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const known = ctx.values[1] && (ctx.opset >= 6 || !ctx.inputs[2] || ctx.values[2])
    if (known) {
      const reps = tileRepeats(x.shape.length, ctx.values, ctx.opset)
      return [{ dtype: x.dtype, shape: x.shape.map((d, i) => (typeof d === "number" ? d * reps[i] : reps[i] === 1 ? d : reps[i] === 0 ? 0 : symDim(ctx, 0, i))) }]
    }
    return [{ dtype: x.dtype, shape: x.shape.map((d, i) => (d === 0 ? 0 : symDim(ctx, 0, i))) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const reps = tileRepeats(x.shape.length, ctx.inputs, ctx.opset)
    const out = x.shape.map((d, i) => d * reps[i])
    const maps = indexMaps(out, (i, c) => c % x.shape[i])
    return [remap(x, out, maps)]
  },
})

// ---------------------------------------------------------------------------------------------
// Concat, Split

/** Concat's axis: required from opset 4, 1 by default before. */
const concatAxis = (ctx: { opset: number; attrs: { axis?: number } }, rank: number): number =>
  axisIn(ctx.attrs.axis ?? (ctx.opset < 4 ? 1 : fail("attribute 'axis' is required")), rank)

const Concat = defineOp({
  attrs: attrs({ axis: A.optInt() }),
  inputs: [1, Infinity],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const ts = ctx.inputs.map((t, k) => t ?? fail(`input ${k} is required`))
    const rank = ts[0].shape.length
    const axis = concatAxis(ctx, rank)
    const shape: Dim[] = []
    for (let d = 0; d < rank; d++) {
      const dims = ts.map((t) => {
        check(t.shape.length === rank, () => `inputs have ranks ${ts.map((u) => u.shape.length).join(", ")}`)
        return t.shape[d]
      })
      if (d === axis) {
        shape.push(dims.every((x) => typeof x === "number") ? (dims as number[]).reduce((a, b) => a + b, 0) : symDim(ctx, 0, d))
        continue
      }
      const nums = dims.filter((x): x is number => typeof x === "number")
      check(nums.every((x) => x === nums[0]), () => `inputs differ in dim ${d}: ${dims.join(", ")}`)
      shape.push(nums.length ? nums[0] : dims[0])
    }
    return [{ dtype: ts[0].dtype, shape }]
  },
  kernel: (ctx) => {
    const ts = ctx.inputs.map((t, k) => t ?? fail(`input ${k} is required`))
    const first = ts[0]
    const rank = first.shape.length
    const axis = concatAxis(ctx, rank)
    for (const t of ts) {
      check(t.dtype === first.dtype, () => `inputs have dtypes ${ts.map((u) => u.dtype).join(", ")}`)
      check(t.shape.length === rank && t.shape.every((d, i) => i === axis || d === first.shape[i]), () => `input shapes ${ts.map((u) => `[${u.shape.join(", ")}]`).join(", ")} do not concatenate on axis ${axis}`)
    }
    const shape = [...first.shape]
    shape[axis] = ts.reduce((s, t) => s + t.shape[axis], 0)
    const { outer, inner } = aroundAxis(shape, axis)
    const out = allocate(first.dtype, sizeOf(shape))
    const row = shape[axis] * inner
    let off = 0
    for (const t of ts) {
      const len = t.shape[axis] * inner
      for (let o = 0; o < outer; o++) out.set(t.data.subarray(o * len, (o + 1) * len), o * row + off)
      off += len
    }
    return [tensor(first.dtype, shape, out)]
  },
})

/** Split's sizes: from the attribute or input, from num_outputs (last chunk smaller), or equal parts. */
const splitSizes = (dim: number, given: readonly number[] | undefined, numOutputs: number | undefined, outputs: number): number[] => {
  if (given) {
    check(given.length === outputs, () => `split [${given.join(", ")}] has ${given.length} entries for ${outputs} outputs`)
    check(given.every((s) => s >= 0), () => `split [${given.join(", ")}] has a negative size`)
    check(given.reduce((a, b) => a + b, 0) === dim, () => `split [${given.join(", ")}] does not sum to the axis size ${dim}`)
    return [...given]
  }
  const n = numOutputs ?? outputs
  check(numOutputs === undefined || numOutputs === outputs, () => `num_outputs ${numOutputs} but ${outputs} outputs declared`)
  check(n >= 1, "needs at least one output")
  const chunk = Math.ceil(dim / n)
  const last = dim - chunk * (n - 1)
  check(last >= 0, () => `axis size ${dim} does not split into ${n} chunks of ${chunk}`)
  return Array.from({ length: n }, (_, i) => (i === n - 1 ? last : chunk))
}

/** The split sizes given explicitly: attribute (before opset 13), or input 1 (empty means absent). */
const givenSplit = (attr: readonly number[] | undefined, input: Tensor | undefined): number[] | undefined => {
  if (attr && attr.length) return [...attr]
  if (input && input.data.length) return intValues(input, "split")
  return undefined
}

const Split = defineOp({
  attrs: attrs({ axis: A.int(0), split: A.optInts(), num_outputs: A.optInt() }),
  inputs: [1, 2],
  outputs: [1, Infinity],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const axis = axisIn(ctx.attrs.axis, x.shape.length)
    const dim = x.shape[axis]
    const splitUnknown = !ctx.attrs.split?.length && ctx.inputs[1] !== undefined && !ctx.values[1] && staticLength(ctx.inputs[1]) !== 0
    const given = givenSplit(ctx.attrs.split, ctx.values[1])
    const sizes: Dim[] =
      splitUnknown || (given === undefined && typeof dim !== "number")
        ? Array.from({ length: ctx.outputs }, (_, j) => symDim(ctx, j, axis))
        : given && typeof dim !== "number"
          ? given
          : splitSizes(dim as number, given, ctx.attrs.num_outputs, ctx.outputs)
    return sizes.map((s) => ({ dtype: x.dtype, shape: x.shape.map((d, i) => (i === axis ? s : d)) }))
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const axis = axisIn(ctx.attrs.axis, x.shape.length)
    const sizes = splitSizes(x.shape[axis], givenSplit(ctx.attrs.split, ctx.inputs[1]), ctx.attrs.num_outputs, ctx.outputs)
    const { outer, inner } = aroundAxis(x.shape, axis)
    const row = x.shape[axis] * inner
    let off = 0
    return sizes.map((s) => {
      const shape = x.shape.map((d, i) => (i === axis ? s : d))
      const len = s * inner
      const out = allocate(x.dtype, outer * len)
      for (let o = 0; o < outer; o++) out.set(x.data.subarray(o * row + off, o * row + off + len), o * len)
      off += len
      return tensor(x.dtype, shape, out)
    })
  },
})

// ---------------------------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth

const blockDims = (x: readonly Dim[], bs: number, toSpace: boolean, sym: (d: number) => string): Dim[] => {
  check(x.length === 4, () => `input must have rank 4, got [${x.join(", ")}]`)
  check(Number.isInteger(bs) && bs >= 1, () => `blocksize ${bs} must be a positive integer`)
  const [n, c, h, w] = x
  const num = (d: Dim, f: (v: number) => number, k: number): Dim => (typeof d === "number" ? f(d) : sym(k))
  if (toSpace) {
    check(typeof c !== "number" || c % (bs * bs) === 0, () => `channels ${c} are not a multiple of blocksize² ${bs * bs}`)
    return [n, num(c, (v) => v / (bs * bs), 1), num(h, (v) => v * bs, 2), num(w, (v) => v * bs, 3)]
  }
  check(typeof h !== "number" || h % bs === 0, () => `height ${h} is not a multiple of blocksize ${bs}`)
  check(typeof w !== "number" || w % bs === 0, () => `width ${w} is not a multiple of blocksize ${bs}`)
  return [n, num(c, (v) => v * bs * bs, 1), num(h, (v) => v / bs, 2), num(w, (v) => v / bs, 3)]
}

/** Reads `x` as the 6-D `view` and transposes it by `perm` into `out` (rank 4). */
const viewTranspose = (x: Tensor, view: readonly number[], perm: readonly number[], out: readonly number[]): Tensor => {
  const s = stridesOf(view)
  const t = strided(
    x,
    perm.map((p) => view[p]),
    0,
    perm.map((p) => s[p]),
  )
  return reshapeView(t, out)
}

const DepthToSpace = defineOp({
  attrs: attrs({ blocksize: A.int(), mode: A.oneOf(["DCR", "CRD"], "DCR") }),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    return [{ dtype: x.dtype, shape: blockDims(x.shape, ctx.attrs.blocksize, true, (d) => symDim(ctx, 0, d)) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const bs = ctx.attrs.blocksize
    const out = blockDims(x.shape, bs, true, () => "?") as number[]
    const [n, c, h, w] = x.shape
    const cc = c / (bs * bs)
    return [
      ctx.attrs.mode === "DCR"
        ? viewTranspose(x, [n, bs, bs, cc, h, w], [0, 3, 4, 1, 5, 2], out)
        : viewTranspose(x, [n, cc, bs, bs, h, w], [0, 1, 4, 2, 5, 3], out),
    ]
  },
})

const SpaceToDepth = defineOp({
  attrs: attrs({ blocksize: A.int() }),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    return [{ dtype: x.dtype, shape: blockDims(x.shape, ctx.attrs.blocksize, false, (d) => symDim(ctx, 0, d)) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const bs = ctx.attrs.blocksize
    const out = blockDims(x.shape, bs, false, () => "?") as number[]
    const [n, c, h, w] = x.shape
    return [viewTranspose(x, [n, c, h / bs, bs, w / bs, bs], [0, 3, 5, 1, 2, 4], out)]
  },
})

export const tensorMoveOps = {
  Transpose,
  Expand,
  Tile,
  Concat,
  Split,
  DepthToSpace,
  SpaceToDepth,
} satisfies Record<string, AnyOpDef>
