// Shared pieces of the convolution and pooling ops: the window geometry (output size and pads
// from strides, dilations, pads, auto_pad and ceil_mode), its symbolic-dim form for type
// inference, and the attribute codec fields they share.
import { A } from "../attrs.js"
import { check, fail, type Dim, type InferCtx, type ValueType } from "../op.js"

export const AUTO_PADS = ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"] as const
export type AutoPad = (typeof AUTO_PADS)[number]

/** Attribute fields common to Conv, ConvTranspose and the pools. */
export const windowAttrs = {
  auto_pad: A.oneOf(AUTO_PADS, "NOTSET"),
  dilations: A.optInts(),
  kernel_shape: A.optInts(),
  pads: A.optInts(),
  strides: A.optInts(),
}

export interface WindowAttrs {
  readonly auto_pad: AutoPad
  readonly dilations: readonly number[] | undefined
  readonly kernel_shape: readonly number[] | undefined
  readonly pads: readonly number[] | undefined
  readonly strides: readonly number[] | undefined
}

/** A sliding window over `rank` spatial dims: output[o] reads input[o·stride − padBegin + k·dilation]. */
export interface Window {
  readonly input: readonly number[]
  readonly kernel: readonly number[]
  readonly strides: readonly number[]
  readonly dilations: readonly number[]
  readonly padBegin: readonly number[]
  readonly padEnd: readonly number[]
  readonly output: readonly number[]
}

const perDim = (v: readonly number[] | undefined, rank: number, dflt: number, what: string): number[] => {
  if (v === undefined || v.length === 0) return new Array<number>(rank).fill(dflt)
  check(v.length === rank, () => `${what} has ${v.length} values for ${rank} spatial dims`)
  return [...v]
}

/** Strides and dilations, checked positive. */
export const stepsOf = (a: WindowAttrs, rank: number): { strides: number[]; dilations: number[] } => {
  const strides = perDim(a.strides, rank, 1, "strides")
  const dilations = perDim(a.dilations, rank, 1, "dilations")
  check(strides.every((s) => s >= 1), () => `strides [${strides.join(", ")}] must be positive`)
  check(dilations.every((s) => s >= 1), () => `dilations [${dilations.join(", ")}] must be positive`)
  return { strides, dilations }
}

/** Explicit pads [b1.., e1..] split into begin and end, checked non-negative. */
export const padsOf = (pads: readonly number[] | undefined, rank: number): { begin: number[]; end: number[] } => {
  if (pads === undefined || pads.length === 0) return { begin: new Array<number>(rank).fill(0), end: new Array<number>(rank).fill(0) }
  check(pads.length === 2 * rank, () => `pads has ${pads.length} values for ${rank} spatial dims (needs ${2 * rank})`)
  check(pads.every((p) => p >= 0), () => `pads [${pads.join(", ")}] must be non-negative`)
  return { begin: pads.slice(0, rank), end: pads.slice(rank) }
}

/**
 * The window of Conv and the pools over static spatial dims. `ceil` is the pools' ceil_mode:
 * output sizes round up, but a window may not start in the end padding.
 */
export const windowOf = (input: readonly number[], kernel: readonly number[], a: WindowAttrs, ceil = false): Window => {
  const rank = input.length
  check(kernel.length === rank, () => `kernel has ${kernel.length} dims for ${rank} spatial dims`)
  check(kernel.every((k) => k >= 1), () => `kernel shape [${kernel.join(", ")}] must be positive`)
  const { strides, dilations } = stepsOf(a, rank)
  const output: number[] = []
  let { begin, end } = padsOf(a.auto_pad === "NOTSET" ? a.pads : undefined, rank)
  begin = [...begin]
  end = [...end]
  for (let i = 0; i < rank; i++) {
    const span = (kernel[i] - 1) * dilations[i] + 1
    const s = strides[i]
    if (a.auto_pad === "SAME_UPPER" || a.auto_pad === "SAME_LOWER") {
      const out = Math.ceil(input[i] / s)
      const total = Math.max(0, (out - 1) * s + span - input[i])
      const small = Math.floor(total / 2)
      begin[i] = a.auto_pad === "SAME_UPPER" ? small : total - small
      end[i] = total - begin[i]
      output.push(out)
    } else {
      const room = input[i] + begin[i] + end[i] - span
      check(room >= 0, () => `window of span ${span} does not fit input dim ${input[i]} with pads ${begin[i]}+${end[i]}`)
      let out = (ceil ? Math.ceil(room / s) : Math.floor(room / s)) + 1
      if (ceil && (out - 1) * s >= input[i] + begin[i]) out--
      output.push(out)
    }
  }
  return { input, kernel, strides, dilations, padBegin: begin, padEnd: end, output }
}

/** Output spatial dims for type inference: each static input dim gives a number, a symbolic one a name. */
export const windowDims = <A>(
  ctx: InferCtx<A>,
  input: readonly Dim[],
  kernel: readonly number[],
  a: WindowAttrs,
  ceil = false,
): Dim[] => {
  const rank = input.length
  const { strides, dilations } = stepsOf(a, rank)
  const pads = a.auto_pad === "NOTSET" ? padsOf(a.pads, rank) : undefined
  return input.map((d, i) => {
    if (typeof d !== "number") return `${ctx.node}.out0.d${i + 2}`
    const one: WindowAttrs = {
      auto_pad: a.auto_pad,
      kernel_shape: undefined,
      strides: [strides[i]],
      dilations: [dilations[i]],
      pads: pads ? [pads.begin[i], pads.end[i]] : undefined,
    }
    return windowOf([d], [kernel[i]], one, ceil).output[0]
  })
}

/** The kernel's spatial shape: the attribute when given, else the weight's trailing dims. */
export const kernelOf = (a: WindowAttrs, weight: readonly Dim[] | undefined, what = "weight"): number[] => {
  if (a.kernel_shape && a.kernel_shape.length > 0) return [...a.kernel_shape]
  if (!weight) return fail(`kernel_shape is required`)
  const k = weight.slice(2)
  return k.map((d) => (typeof d === "number" ? d : fail(`${what} dim '${d}' is symbolic and kernel_shape is not given`)))
}

/** Checks that `t` has a batch and a channel dim, at least one spatial dim. */
export const spatialRank = (t: ValueType | { shape: readonly Dim[] }, what = "X"): number => {
  check(t.shape.length >= 3, () => `${what} must have rank >= 3 (N, C, spatial...), got rank ${t.shape.length}`)
  return t.shape.length - 2
}

/** 1-, 2- and 3-D windows as 3-D ones (leading dims of size 1), so one loop nest serves all. */
export const as3d = (w: Window): Window => {
  const pad = 3 - w.input.length
  const lead = (v: readonly number[], x: number) => [...new Array<number>(pad).fill(x), ...v]
  return {
    input: lead(w.input, 1),
    kernel: lead(w.kernel, 1),
    strides: lead(w.strides, 1),
    dilations: lead(w.dilations, 1),
    padBegin: lead(w.padBegin, 0),
    padEnd: lead(w.padEnd, 0),
    output: lead(w.output, 1),
  }
}
