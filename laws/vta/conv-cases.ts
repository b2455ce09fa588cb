// Random int8 conv2d layers and schedules for the VTA conv laws (laws/vta/conv2d.law.ts on the
// simulator, laws/vta/tir.law.ts on the TIR passes), their seeded tensors and the TE's output.
//
// Each kernel / stride / padding takes its own path through the schedule (the strided unpadded 1×1
// loads only the rows its windows read), and a wrong input row shows only where a tile holds
// several rows and the output keeps the accumulator's information — so the laws run every geometry
// in turn, with multi-row tiles, at shifts where most outputs are neither saturated nor 0 / -1.
import * as fc from "fast-check"
import { fromArray } from "../../src/ast/graph/tensor.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import type { VtaDerived } from "../../src/ast/vta/config.js"
import { conv2dTE, outSize, type VtaConv2d, type VtaConv2dSchedule } from "../../src/lowering/vta/conv2d.js"
import { seededInt8 } from "./programs.js"

/** A layer's kernel size, stride and padding. */
export interface Geometry {
  readonly k: 1 | 3
  readonly stride: 1 | 2
  readonly pad: 0 | 1
  readonly name: string
}
export const GEOMETRIES: readonly Geometry[] = ([1, 3] as const).flatMap((k) => ([1, 2] as const).flatMap((stride) => ([0, 1] as const).map((pad) => ({ k, stride, pad, name: `${k}×${k} kernel, stride ${stride}, padding ${pad}` }))))

/** Shifts around the accumulator's spread (~2^14 for one 16-lane block of int8 products), so that most outputs are neither saturated nor 0 / -1 (past ~2^17 every output floors to 0 or -1 and clips to the same value: a wrong input row would not show). */
export const informativeShift = fc.integer({ min: 5, max: 12 })

/** Heights and widths: of one geometry, at least two output rows and columns (so that a tile can hold several rows: the row-skip's DRAM row step shows only there). */
const arbHW = (maxHW: number, geometry?: Geometry) => {
  const min = geometry ? Math.max(2, geometry.k - 2 * geometry.pad + geometry.stride) : 2
  return fc.integer({ min, max: Math.max(maxHW, min + 1) })
}

export interface ConvCase {
  readonly x: VtaConv2d
  readonly seed: number
  readonly s: VtaConv2dSchedule
}

/** Random layers of up to `maxC` channel blocks and `maxHW` rows / columns and their schedules (of one geometry, at the shifts given, where those are). */
export const arbConvCase = (maxC: number, maxHW: number, geometry?: Geometry, shift?: fc.Arbitrary<number>): fc.Arbitrary<ConvCase> => fc
  .record({
    ci: fc.integer({ min: 1, max: maxC }),
    co: fc.integer({ min: 1, max: maxC }),
    h: arbHW(maxHW, geometry),
    w: arbHW(maxHW, geometry),
    k: geometry ? fc.constant(geometry.k) : fc.constantFrom(1, 3),
    stride: geometry ? fc.constant(geometry.stride) : fc.constantFrom(1, 2),
    pad: geometry ? fc.constant(geometry.pad) : fc.constantFrom(0, 1),
    // past 15 a shift takes several SHRs (one SHR's amount is a signed 5-bit operand)
    shift: shift ?? fc.oneof(fc.integer({ min: 0, max: 10 }), fc.integer({ min: 11, max: 31 })),
    bias: fc.boolean(),
    clipLo: fc.option(fc.integer({ min: -128, max: 0 }), { nil: undefined }),
    seed: fc.nat(),
  })
  .filter((r) => r.h + 2 * r.pad >= r.k && r.w + 2 * r.pad >= r.k)
  .chain((r) => {
    const x: VtaConv2d = { ci: r.ci, co: r.co, h: r.h, w: r.w, kh: r.k, kw: r.k, stride: r.stride, pad: r.pad, shift: r.shift, ...(r.bias ? { bias: true } : {}), ...(r.clipLo === undefined ? {} : { clipLo: r.clipLo }) }
    const { oh } = outSize(x)
    const divs = (n: number) => Array.from({ length: n }, (_, k) => k + 1).filter((m) => n % m === 0)
    return fc.record({
      x: fc.constant(x),
      seed: fc.constant(r.seed),
      // the whole height as one tile half the time (multi-row tiles), any tile height else
      s: fc.record({ tileOh: fc.oneof(fc.constant(oh), fc.integer({ min: 1, max: oh })), tileCo: fc.constantFrom(...divs(r.co)), tileCi: fc.constantFrom(...divs(r.ci)), order: fc.constantFrom("co-oh" as const, "oh-co" as const), vthreads: fc.integer({ min: 1, max: 4 }), epilogueChunk: fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }) }),
    })
  })

/** The layer's seeded data, kernel and (with `bias`) int32 biases, in the packed layouts, and the same as named inputs. */
export const convTensors = (d: VtaDerived, x: VtaConv2d, seed: number) => {
  const data = seededInt8(seed, x.ci * x.h * x.w * d.batch * d.blockIn)
  const kernel = seededInt8(seed + 7, x.co * x.ci * x.kh * x.kw * d.blockOut * d.blockIn)
  // int32 biases of up to ±8k: past the accumulator's typical range here, so the add moves the output at any shift
  const bytes = seededInt8(seed + 13, 2 * x.co * d.blockOut, -128, 127)
  const bias = x.bias ? Int32Array.from({ length: x.co * d.blockOut }, (_, i) => bytes[2 * i] * 64 + bytes[2 * i + 1]) : undefined
  const inputs = new Map<string, ArrayLike<number>>([["data", data], ["kernel", kernel], ...(bias ? [["bias", bias] as const] : [])])
  return { data, kernel, bias, inputs }
}

/** The layer's TE and its seeded tensors as the TE's feeds. */
export const teFeeds = (d: VtaDerived, x: VtaConv2d, seed: number) => {
  const te = conv2dTE(d, x)
  const { data, kernel, bias } = convTensors(d, x, seed)
  const feeds = new Map([["data", fromArray("int8", te.data.shape, Array.from(data))], ["kernel", fromArray("int8", te.kernel.shape, Array.from(kernel))]])
  if (te.bias && bias) feeds.set("bias", fromArray("int32", te.bias.shape, Array.from(bias)))
  return { te, feeds }
}

/** The TE's output (evaluateTE) on the layer's seeded tensors: the reference. */
export const teOut = (d: VtaDerived, x: VtaConv2d, seed: number): number[] => {
  const { te, feeds } = teFeeds(d, x, seed)
  return Array.from(evaluateTE([te.out], feeds)[0].data)
}
