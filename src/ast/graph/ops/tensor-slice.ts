// Windows onto a tensor: Slice, Pad (constant / reflect / edge / wrap), CenterCropPad, Compress,
// ReverseSequence and Trilu.
import { A, attrs } from "../attrs.js"
import { allocate, converter } from "../dtype.js"
import { check, defineOp, fail, type AnyOpDef, type Dim } from "../op.js"
import { sizeOf, stridesOf, tensor, type Tensor } from "../tensor.js"
import { inputType, req } from "./util.js"
import { aroundAxis, axisIn, constInts, indexMaps, intValues, remap, scalarOf, staticLength, strided, symDim, uniqueAxes } from "./tensor-common.js"

// ---------------------------------------------------------------------------------------------
// Slice

interface SliceArgs {
  readonly starts: readonly number[]
  readonly ends: readonly number[]
  readonly axes: readonly number[] | undefined
  readonly steps: readonly number[] | undefined
}

interface SliceAttrs {
  readonly starts?: readonly number[]
  readonly ends?: readonly number[]
  readonly axes?: readonly number[]
}

/** Starts/ends/axes from the attributes (before opset 10) or inputs 1..4; undefined when a needed value is unknown. */
const sliceArgs = (a: SliceAttrs, values: readonly (Tensor | undefined)[], present: (k: number) => boolean): SliceArgs | undefined => {
  if (a.starts || a.ends) {
    check(a.starts !== undefined && a.ends !== undefined, "attributes 'starts' and 'ends' go together")
    return { starts: a.starts!, ends: a.ends!, axes: a.axes, steps: undefined }
  }
  const known = (k: number) => !present(k) || values[k] !== undefined
  if (!present(1) || !present(2)) return fail("needs starts and ends (inputs 1 and 2, or attributes before opset 10)")
  if (![1, 2, 3, 4].every(known)) return undefined
  const ints = (k: number, what: string) => (values[k] ? intValues(values[k]!, what) : undefined)
  return { starts: ints(1, "starts")!, ends: ints(2, "ends")!, axes: ints(3, "axes"), steps: ints(4, "steps") }
}

/** First index and length of a slice of a `dim`-long axis, with ONNX's clamping. */
export const sliceRange = (dim: number, start: number, end: number, step: number): { first: number; len: number } => {
  check(step !== 0, "slice step 0 is not allowed")
  let s = start < 0 ? start + dim : start
  let e = end < 0 ? end + dim : end
  if (step > 0) {
    s = Math.min(Math.max(s, 0), dim)
    e = Math.min(Math.max(e, 0), dim)
  } else {
    s = Math.min(Math.max(s, 0), dim - 1)
    e = Math.min(Math.max(e, -1), dim - 1)
  }
  return { first: s, len: Math.max(0, Math.ceil((e - s) / step)) }
}

/** Starts/ends at least this large in magnitude mean "to the end" whatever the dim (INT32/INT64 max). */
const HUGE = 2 ** 31 - 1

/** Per input axis: [first, step, len]; axes not sliced keep everything. */
const slicePlan = (shape: readonly Dim[], args: SliceArgs): ({ first: number; step: number; len: Dim } | undefined)[] => {
  const n = args.starts.length
  check(args.ends.length === n, () => `starts has ${n} entries, ends ${args.ends.length}`)
  const axes = uniqueAxes(args.axes ?? Array.from({ length: n }, (_, i) => i), shape.length)
  check(axes.length === n, () => `axes has ${axes.length} entries for ${n} starts`)
  const steps = args.steps ?? new Array<number>(n).fill(1)
  check(steps.length === n, () => `steps has ${steps.length} entries for ${n} starts`)
  const plan: ({ first: number; step: number; len: Dim } | undefined)[] = shape.map(() => undefined)
  axes.forEach((a, i) => {
    const dim = shape[a]
    if (typeof dim !== "number") {
      check(steps[i] !== 0, "slice step 0 is not allowed")
      // a symbolic dim survives a slice that keeps all of it ([0 or -∞ : +∞ : 1]); else unknown
      const whole = steps[i] === 1 && (args.starts[i] === 0 || args.starts[i] <= -HUGE) && args.ends[i] >= HUGE
      plan[a] = { first: 0, step: steps[i], len: whole ? dim : "" }
      return
    }
    const { first, len } = sliceRange(dim, args.starts[i], args.ends[i], steps[i])
    plan[a] = { first, step: steps[i], len }
  })
  return plan
}

const Slice = defineOp({
  attrs: attrs({ starts: A.optInts(), ends: A.optInts(), axes: A.optInts() }),
  inputs: [1, 5],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const args = sliceArgs(ctx.attrs, ctx.values, (k) => ctx.inputs[k] !== undefined)
    if (args) {
      const plan = slicePlan(x.shape, args)
      return [{ dtype: x.dtype, shape: x.shape.map((d, i) => (plan[i] === undefined ? d : plan[i]!.len === "" ? symDim(ctx, 0, i) : plan[i]!.len)) }]
    }
    // values unknown: the sliced axes (when known) become symbolic
    let axes: number[] | undefined = ctx.inputs[3] ? constInts(ctx, 3, "axes") : undefined
    if (!ctx.inputs[3]) {
      const n = staticLength(ctx.inputs[1])
      if (n !== undefined) axes = Array.from({ length: n }, (_, i) => i)
    }
    const sliced = axes ? new Set(axes.map((a) => axisIn(a, x.shape.length))) : undefined
    return [{ dtype: x.dtype, shape: x.shape.map((d, i) => (sliced && !sliced.has(i) ? d : symDim(ctx, 0, i))) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const args = sliceArgs(ctx.attrs, ctx.inputs, (k) => ctx.inputs[k] !== undefined)!
    const plan = slicePlan(x.shape, args)
    const s = stridesOf(x.shape)
    let offset = 0
    const shape: number[] = []
    const strides: number[] = []
    x.shape.forEach((d, i) => {
      const p = plan[i]
      if (!p) {
        shape.push(d)
        strides.push(s[i])
        return
      }
      offset += p.first * s[i]
      shape.push(p.len as number)
      strides.push(p.step * s[i])
    })
    return [strided(x, shape, sizeOf(shape) ? offset : 0, strides)]
  },
})

// ---------------------------------------------------------------------------------------------
// Pad

type PadMode = "constant" | "reflect" | "edge" | "wrap"

/** The input coordinate that output coordinate `c` reads (-1: the constant), for begin padding `b`. */
const padSource = (mode: PadMode, c: number, b: number, dim: number): number => {
  const i = c - b
  if (i >= 0 && i < dim) return i
  switch (mode) {
    case "constant":
      return -1
    case "edge":
      return i < 0 ? 0 : dim - 1
    case "wrap":
      return ((i % dim) + dim) % dim
    case "reflect": {
      if (dim === 1) return 0
      const p = 2 * (dim - 1)
      const m = ((i % p) + p) % p
      return m < dim ? m : p - m
    }
  }
}

/** Begin and end padding for every axis (pads listed for `axes`, all axes by default). */
const padsPerAxis = (rank: number, pads: readonly number[], axes: readonly number[] | undefined): [number, number][] => {
  const ax = axes ? uniqueAxes(axes, rank) : Array.from({ length: rank }, (_, i) => i)
  check(pads.length === 2 * ax.length, () => `pads has ${pads.length} entries for ${ax.length} axes (needs ${2 * ax.length})`)
  const out: [number, number][] = Array.from({ length: rank }, () => [0, 0])
  ax.forEach((a, i) => (out[a] = [pads[i], pads[i + ax.length]]))
  return out
}

const padAttrs = attrs({
  mode: A.oneOf(["constant", "reflect", "edge", "wrap"], "constant"),
  pads: A.optInts(),
  paddings: A.optInts(),
  value: A.float(0),
})

/** Pads from the attribute (before opset 11) or input 1; axes from input 3. Undefined when unknown. */
const padArgs = (
  a: { pads?: readonly number[]; paddings?: readonly number[] },
  rank: number,
  values: readonly (Tensor | undefined)[],
  present: (k: number) => boolean,
): [number, number][] | undefined => {
  const attr = a.pads ?? a.paddings
  if (attr) return padsPerAxis(rank, attr, undefined)
  check(present(1), "needs pads (input 1, or the 'pads' attribute before opset 11)")
  if (!values[1] || (present(3) && !values[3])) return undefined
  return padsPerAxis(rank, intValues(values[1], "pads"), values[3] ? intValues(values[3], "axes") : undefined)
}

const Pad = defineOp({
  attrs: padAttrs,
  inputs: [1, 4],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const pads = padArgs(ctx.attrs, x.shape.length, ctx.values, (k) => ctx.inputs[k] !== undefined)
    if (pads) return [{ dtype: x.dtype, shape: x.shape.map((d, i) => (typeof d === "number" ? d + pads[i][0] + pads[i][1] : pads[i][0] === 0 && pads[i][1] === 0 ? d : symDim(ctx, 0, i))) }]
    const axes = ctx.inputs[3] ? constInts(ctx, 3, "axes") : undefined
    const padded = axes ? new Set(axes.map((a) => axisIn(a, x.shape.length))) : undefined
    return [{ dtype: x.dtype, shape: x.shape.map((d, i) => (padded && !padded.has(i) ? d : symDim(ctx, 0, i))) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const mode = ctx.attrs.mode
    const pads = padArgs(ctx.attrs, x.shape.length, ctx.inputs, (k) => ctx.inputs[k] !== undefined)!
    const cv = ctx.inputs[2]
    const fill = cv && cv.data.length ? scalarOf(cv, "constant_value") : converter(x.dtype)(ctx.attrs.pads || ctx.attrs.paddings ? ctx.attrs.value : 0)
    const out = x.shape.map((d, i) => d + pads[i][0] + pads[i][1])
    out.forEach((d, i) => check(d >= 0, () => `pads [${pads[i].join(", ")}] leave axis ${i} of size ${x.shape[i]} with ${d} elements`))
    out.forEach((n, i) => {
      if (mode !== "constant" && x.shape[i] === 0 && n > 0) fail(`mode '${mode}' cannot pad axis ${i}, which is empty`)
    })
    const maps = indexMaps(out, (i, c) => padSource(mode, c, pads[i][0], x.shape[i]))
    return [remap(x, out, maps, fill)]
  },
})

// ---------------------------------------------------------------------------------------------
// CenterCropPad

const cropPadPlan = (rank: number, shape: readonly number[], axes: readonly number[] | undefined): (number | undefined)[] => {
  const ax = uniqueAxes(axes ?? Array.from({ length: rank }, (_, i) => i), rank)
  check(shape.length === ax.length, () => `shape has ${shape.length} entries for ${ax.length} axes`)
  const target: (number | undefined)[] = new Array(rank).fill(undefined)
  ax.forEach((a, i) => {
    check(shape[i] >= 0, () => `shape [${shape.join(", ")}] has a negative dim`)
    target[a] = shape[i]
  })
  return target
}

const CenterCropPad = defineOp({
  attrs: attrs({ axes: A.optInts() }),
  inputs: [2, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const shape = constInts(ctx, 1, "shape")
    if (shape) {
      const t = cropPadPlan(x.shape.length, shape, ctx.attrs.axes)
      return [{ dtype: x.dtype, shape: x.shape.map((d, i) => t[i] ?? d) }]
    }
    const ax = ctx.attrs.axes ? new Set(uniqueAxes(ctx.attrs.axes, x.shape.length)) : undefined
    return [{ dtype: x.dtype, shape: x.shape.map((d, i) => (ax && !ax.has(i) ? d : symDim(ctx, 0, i))) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const t = cropPadPlan(x.shape.length, intValues(req(ctx.inputs, 1, "shape"), "shape"), ctx.attrs.axes)
    const out = x.shape.map((d, i) => t[i] ?? d)
    // crop: start at floor((dim - n) / 2); pad: put the input at floor((n - dim) / 2)
    const shifts = out.map((n, i) => (n <= x.shape[i] ? Math.floor((x.shape[i] - n) / 2) : -Math.floor((n - x.shape[i]) / 2)))
    const maps = indexMaps(out, (i, c) => {
      const s = c + shifts[i]
      return s >= 0 && s < x.shape[i] ? s : -1
    })
    return [remap(x, out, maps, 0)]
  },
})

// ---------------------------------------------------------------------------------------------
// Compress, ReverseSequence, Trilu

const Compress = defineOp({
  attrs: attrs({ axis: A.optInt() }),
  inputs: [2, 2],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    const cond = ctx.values[1]
    const count = cond ? (Array.from(cond.data as ArrayLike<number>).filter((v) => v !== 0).length as Dim) : symDim(ctx, 0, ctx.attrs.axis === undefined ? 0 : axisIn(ctx.attrs.axis, x.shape.length))
    if (ctx.attrs.axis === undefined) return [{ dtype: x.dtype, shape: [count] }]
    const axis = axisIn(ctx.attrs.axis, x.shape.length)
    return [{ dtype: x.dtype, shape: x.shape.map((d, i) => (i === axis ? count : d)) }]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const cond = req(ctx.inputs, 1, "condition")
    check(cond.shape.length === 1, () => `condition must be 1-D, got [${cond.shape.join(", ")}]`)
    const flat = ctx.attrs.axis === undefined
    const axis = flat ? 0 : axisIn(ctx.attrs.axis!, x.shape.length)
    const shape = flat ? [x.data.length] : x.shape
    const { outer, dim, inner } = aroundAxis(shape, axis)
    const keep: number[] = []
    for (let i = 0; i < cond.data.length; i++)
      if (cond.data[i] !== 0) {
        check(i < dim, () => `condition selects index ${i} beyond axis size ${dim}`)
        keep.push(i)
      }
    const out = allocate(x.dtype, outer * keep.length * inner)
    let o = 0
    for (let a = 0; a < outer; a++)
      for (const k of keep) {
        const src = (a * dim + k) * inner
        out.set(x.data.subarray(src, src + inner), o)
        o += inner
      }
    return [tensor(x.dtype, shape.map((d, i) => (i === axis ? keep.length : d)), out)]
  },
})

const ReverseSequence = defineOp({
  attrs: attrs({ batch_axis: A.int(1), time_axis: A.int(0) }),
  inputs: [2, 2],
  outputs: [1, 1],
  kind: "opaque",
  infer: (ctx) => [inputType(ctx, 0)],
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    const lens = intValues(req(ctx.inputs, 1, "sequence_lens"), "sequence_lens")
    const rank = x.shape.length
    check(rank >= 2, () => `input must have rank 2 or more, got [${x.shape.join(", ")}]`)
    const ba = axisIn(ctx.attrs.batch_axis, rank, "batch_axis")
    const ta = axisIn(ctx.attrs.time_axis, rank, "time_axis")
    check(ba !== ta && ba <= 1 && ta <= 1, () => `batch_axis ${ba} and time_axis ${ta} must be 0 and 1`)
    const B = x.shape[ba]
    const T = x.shape[ta]
    check(lens.length === B, () => `sequence_lens has ${lens.length} entries for batch size ${B}`)
    lens.forEach((l) => check(l >= 0 && l <= T, () => `sequence length ${l} out of range [0, ${T}]`))
    const s = stridesOf(x.shape)
    const sb = s[ba]
    const st = s[ta]
    const out = allocate(x.dtype, x.data.length)
    for (let i = 0; i < x.data.length; i++) {
      const b = Math.floor(i / sb) % B
      const t = Math.floor(i / st) % T
      const l = lens[b]
      out[i] = t < l ? x.data[i + (l - 1 - 2 * t) * st] : x.data[i]
    }
    return [tensor(x.dtype, x.shape, out)]
  },
})

const Trilu = defineOp({
  attrs: attrs({ upper: A.int(1) }),
  inputs: [1, 2],
  outputs: [1, 1],
  kind: "injective",
  infer: (ctx) => {
    const x = inputType(ctx, 0)
    check(x.shape.length >= 2, () => `input must have rank 2 or more, got [${x.shape.join(", ")}]`)
    return [x]
  },
  kernel: (ctx) => {
    const x = req(ctx.inputs, 0)
    check(x.shape.length >= 2, () => `input must have rank 2 or more, got [${x.shape.join(", ")}]`)
    const k = ctx.inputs[1] ? scalarOf(ctx.inputs[1], "k") : 0
    const [N, M] = x.shape.slice(-2)
    const out = allocate(x.dtype, x.data.length)
    const upper = ctx.attrs.upper !== 0
    for (let base = 0; base < x.data.length; base += N * M)
      for (let i = 0; i < N; i++)
        for (let j = 0; j < M; j++) {
          const keep = upper ? j - i >= k : j - i <= k
          if (keep) out[base + i * M + j] = x.data[base + i * M + j]
        }
    return [tensor(x.dtype, x.shape, out)]
  },
})

export const tensorSliceOps = {
  Slice,
  Pad,
  CenterCropPad,
  Compress,
  ReverseSequence,
  Trilu,
} satisfies Record<string, AnyOpDef>
