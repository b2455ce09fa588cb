// Shape-changing data movement: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Tile,
// Concat, Split, DepthToSpace, SpaceToDepth, and the shape queries Shape and Size.
import { A, attrs } from "../attrs.js"
import { allocate } from "../dtype.js"
import { check, defineOp, fail, unsupported, type AnyOpDef, type Dim } from "../op.js"
import { broadcastIndex, broadcastShapes, fromArray, reshapeView, scalar, sizeOf, stridesOf, tensor, type Tensor } from "../tensor.js"
import { broadcastDims, inputType, req } from "./util.js"
import {
  aroundAxis,
  axisIn,
  constInts,
  dimProduct,
  intValues,
  remap,
  staticLength,
  strided,
  symDim,
  symShape,
  transpose,
  uniqueAxes,
} from "./tensor-common.js"

// ---------------------------------------------------------------------------------------------
// Reshape

/**
 * Reshape's output dims from the input dims and the target: 0 copies the input dim (unless
 * allowzero), one -1 takes what is left. Works on symbolic dims: a -1 that symbolic dims leave
 * undetermined is `unknown`.
 */
const reshapeDims = (inShape: readonly Dim[], target: readonly number[], allowzero: boolean, unknown: string): Dim[] => {
  check(target.every((t) => Number.isInteger(t) && t >= -1), () => `shape [${target.join(", ")}] has a dim below -1`)
  const minus = target.filter((t) => t === -1).length
  check(minus <= 1, () => `shape [${target.join(", ")}] has more than one -1`)
  if (allowzero) check(!(minus && target.includes(0)), () => `shape [${target.join(", ")}] has both 0 and -1 with allowzero=1`)
  const out: Dim[] = target.map((t, i) => {
    if (t !== 0 || allowzero) return t
    check(i < inShape.length, () => `shape [${target.join(", ")}] copies dim ${i} (0) but the input has rank ${inShape.length}`)
    return inShape[i]
  })
  if (minus) {
    const k = out.indexOf(-1)
    out[k] = inferredDim(inShape, out.filter((_, i) => i !== k), target, unknown)
  } else {
    const total = dimProduct(inShape, unknown)
    const known = dimProduct(out, unknown)
    if (typeof total === "number" && typeof known === "number")
      check(total === known, () => `cannot reshape [${inShape.join(", ")}] (${total} elements) into [${out.join(", ")}]`)
  }
  return out
}

/**
 * The dim a -1 stands for: the input's element count over the other output dims. Symbolic dims
 * cancel where they appear on both sides ([N, 3, 4] → [N, -1] gives 12), so batch-symbolic
 * flattens stay static.
 */
const inferredDim = (inShape: readonly Dim[], others: readonly Dim[], target: readonly number[], unknown: string): Dim => {
  if (inShape.includes(0) && !others.includes(0)) return 0
  const syms = new Map<string, number>()
  let num = 1
  for (const d of inShape)
    if (typeof d === "number") num *= d
    else syms.set(d, (syms.get(d) ?? 0) + 1)
  let den = 1
  for (const d of others) {
    if (typeof d === "number") den *= d
    else {
      const c = syms.get(d) ?? 0
      if (c === 0) return unknown
      syms.set(d, c - 1)
    }
  }
  const left = [...syms].filter(([, c]) => c > 0)
  check(den !== 0, () => `cannot infer the -1 in shape [${target.join(", ")}]: the other dims have 0 elements`)
  if (left.length === 0) {
    check(num % den === 0, () => `cannot reshape [${inShape.join(", ")}] (${num} elements) into [${target.join(", ")}]`)
    return num / den
  }
  return left.length === 1 && left[0][1] === 1 && num === den ? left[0][0] : unknown
}

const reshapeTarget = (ctx: { opset: number; attrs: { shape?: readonly number[] } }, value: Tensor | undefined): number[] | undefined =>
  ctx.attrs.shape ? [...ctx.attrs.shape] : value ? intValues(value, "shape") : undefined

const Reshape = defineOp({
  attrs: attrs({ allowzero: A.int(0), shape: A.optInts() }),
  inputs: [1, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const target = reshapeTarget(ctx, ctx.values[1])
    if (target) return [{ dtype: x.dtype, shape: reshapeDims(x.shape, target, ctx.attrs.allowzero === 1, symDim(ctx, 0, 0)) }]
    check(ctx.inputs[1] !== undefined, "needs a shape (input 1, or the 'shape' attribute before opset 5)")
    const rank = staticLength(ctx.inputs[1])
    if (rank === undefined) return unsupported("the shape input's length is not static, so the output rank is unknown")
    return [{ dtype: x.dtype, shape: symShape(ctx, 0, rank) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const target = reshapeTarget(ctx, ctx.inputs[1]) ?? fail("needs a shape (input 1, or the 'shape' attribute before opset 5)")
    return [reshapeView(x, reshapeDims(x.shape, target, ctx.attrs.allowzero === 1, "?") as number[])]
  },
})

// ---------------------------------------------------------------------------------------------
// Flatten, Squeeze, Unsqueeze

const flattenAxis = (axis: number, rank: number): number => {
  const a = axis < 0 ? axis + rank : axis
  check(a >= 0 && a <= rank, () => `axis ${axis} out of range [-${rank}, ${rank}]`)
  return a
}

const Flatten = defineOp({
  attrs: attrs({ axis: A.int(1) }),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const a = flattenAxis(ctx.attrs.axis, x.shape.length)
    return [{ dtype: x.dtype, shape: [dimProduct(x.shape.slice(0, a), symDim(ctx, 0, 0)), dimProduct(x.shape.slice(a), symDim(ctx, 0, 1))] }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const a = flattenAxis(ctx.attrs.axis, x.shape.length)
    return [reshapeView(x, [sizeOf(x.shape.slice(0, a)), sizeOf(x.shape.slice(a))])]
  },
})

/** Axes from the attribute (older opsets) or input 1 (opset 13+); undefined when not given. */
const axesArg = (attr: readonly number[] | undefined, input: Tensor | undefined): number[] | undefined =>
  attr ? [...attr] : input ? intValues(input, "axes") : undefined

const squeezeDims = (shape: readonly Dim[], axes: readonly number[] | undefined): Dim[] => {
  if (axes === undefined) {
    if (shape.some((d) => typeof d !== "number")) return unsupported(`squeezing every 1-dim of [${shape.join(", ")}] with symbolic dims gives an unknown rank`)
    return shape.filter((d) => d !== 1)
  }
  const ax = uniqueAxes(axes, shape.length)
  for (const a of ax) check(typeof shape[a] !== "number" || shape[a] === 1, () => `cannot squeeze axis ${a} of size ${shape[a]}`)
  return shape.filter((_, i) => !ax.includes(i))
}

const Squeeze = defineOp({
  attrs: attrs({ axes: A.optInts() }),
  inputs: [1, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const axes = axesArg(ctx.attrs.axes, ctx.values[1])
    if (axes === undefined && ctx.inputs[1]) {
      const n = staticLength(ctx.inputs[1]) ?? unsupported("the axes input's length is not static, so the output rank is unknown")
      return [{ dtype: x.dtype, shape: symShape(ctx, 0, x.shape.length - n) }]
    }
    return [{ dtype: x.dtype, shape: squeezeDims(x.shape, axes) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    return [reshapeView(x, squeezeDims(x.shape, axesArg(ctx.attrs.axes, ctx.inputs[1])) as number[])]
  },
})

const unsqueezeDims = (shape: readonly Dim[], axes: readonly number[]): Dim[] => {
  const rank = shape.length + axes.length
  const ax = uniqueAxes(axes, rank)
  const out: Dim[] = []
  let k = 0
  for (let i = 0; i < rank; i++) out.push(ax.includes(i) ? 1 : shape[k++])
  return out
}

const Unsqueeze = defineOp({
  attrs: attrs({ axes: A.optInts() }),
  inputs: [1, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const axes = axesArg(ctx.attrs.axes, ctx.values[1])
    if (axes) return [{ dtype: x.dtype, shape: unsqueezeDims(x.shape, axes) }]
    check(ctx.inputs[1] !== undefined, "needs axes (input 1, or the 'axes' attribute before opset 13)")
    const n = staticLength(ctx.inputs[1]) ?? unsupported("the axes input's length is not static, so the output rank is unknown")
    return [{ dtype: x.dtype, shape: symShape(ctx, 0, x.shape.length + n) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const axes = axesArg(ctx.attrs.axes, ctx.inputs[1]) ?? fail("needs axes (input 1, or the 'axes' attribute before opset 13)")
    return [reshapeView(x, unsqueezeDims(x.shape, axes) as number[])]
  },
})

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
      return [{ dtype: x.dtype, shape: x.shape.map((d, i) => (typeof d === "number" ? d * reps[i] : symDim(ctx, 0, i))) }]
    }
    return [{ dtype: x.dtype, shape: x.shape.map((d, i) => (d === 0 ? 0 : symDim(ctx, 0, i))) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const reps = tileRepeats(x.shape.length, ctx.inputs, ctx.opset)
    const out = x.shape.map((d, i) => d * reps[i])
    const maps = out.map((n, i) => Int32Array.from({ length: n }, (_, c) => c % x.shape[i]))
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

// ---------------------------------------------------------------------------------------------
// Shape, Size

/** Shape's [start, end) window, clamped to [0, rank]. */
const shapeWindow = (rank: number, start: number, end: number | undefined): [number, number] => {
  const clamp = (v: number) => Math.min(Math.max(v < 0 ? v + rank : v, 0), rank)
  const s = clamp(start)
  const e = clamp(end ?? rank)
  return [s, Math.max(e, s)]
}

const Shape = defineOp({
  attrs: attrs({ start: A.int(0), end: A.optInt() }),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const [s, e] = shapeWindow(inputType(ctx, 0).shape.length, ctx.attrs.start, ctx.attrs.end)
    return [{ dtype: "int64", shape: [e - s] }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const [s, e] = shapeWindow(x.shape.length, ctx.attrs.start, ctx.attrs.end)
    return [fromArray("int64", [e - s], x.shape.slice(s, e))]
  },
})

const Size = defineOp({
  attrs: attrs({}),
  inputs: [1, 1],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    inputType(ctx, 0)
    return [{ dtype: "int64", shape: [] }]
  },
  kernel: (ctx) => [scalar("int64", sizeOf(req(ctx.inputs, 0).shape))],
})

export const tensorShapeOps = {
  Reshape,
  Flatten,
  Squeeze,
  Unsqueeze,
  Transpose,
  Expand,
  Tile,
  Concat,
  Split,
  DepthToSpace,
  SpaceToDepth,
  Shape,
  Size,
} satisfies Record<string, AnyOpDef>
