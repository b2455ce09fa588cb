// The int8 depthwise template's pieces for the VNNI window form (op-library-int8-depthwise.ts's
// depthwiseWindow: a kernel row's taps of 16 pixels one vpdpbusd over the u8 padded rows), and its
// schedule where the sums are rows of whole vectors ([n, o, oh, width / 16, 16], depthwiseWindowGrid's
// `rows`): the epilogue (the requantization, NCHW bytes) a tile of `tile_oh` output rows at a time,
// its columns the vector loop; at the tile, the tile's sums (a row's vectors unrolled inside the
// kernel rows, the [16 × 4] window tensorized onto vnniDotWindow), read by the epilogue where they
// are — where the grid form computed a channel's sums over rows of a width that made them whole
// vectors, zeroed and wrote that grid (16 KB a 56² channel) and compacted it to the output's pixels
// before the epilogue read it.
import * as S from "../../ast/schedule/schedule.js"
import { c, collect, sub, substitute, type Reduce } from "../../ast/te/expr.js"
import { vnniDotWindow } from "../../ast/te/intrinsic.js"
import { simplify } from "../../ast/te/simplify.js"
import { dataLeaves, divisors, narrowedStage, parallelize, parallelOuter } from "./common.js"
import type { Knob } from "./template.js"

/**
 * The plane the product reads (its first compute input, by the compute's order of reads): the
 * stride's phases of the padded input (6-D), or the padded input itself (4-D, a stride of 1).
 */
export const planeOf = (anchor: S.Stage): string | undefined => anchor.op.inputs.find((t) => t.kind === "compute")?.name

/** Whether the product is the window form's rows: sums [n, o, oh, width / 16, 16] over a u8 plane of rows [n, c, phases, Q] (the channels-in-lanes dot's plane is 5-D). */
export const isRowsForm = (anchor: S.Stage): boolean => {
  const plane = anchor.op.inputs.find((t) => t.kind === "compute")
  return anchor.op.shape.length === 5 && plane?.dtype === "uint8" && plane.shape.length === 4
}

/** The vector loops of a stage's axis `j`, split where longer than a vector loop (at the largest divisor that is). */
export const vectorizeInner = (s: S.Schedule, stage: string, j: string): S.Schedule => {
  const ext = s.stages.get(stage)!.axes.get(j)!.extent
  if (ext <= S.MAX_VECTORIZED) return S.vectorize(s, stage, j)
  const sp = S.split(s, stage, j, { factor: Math.max(...divisors(ext, S.MAX_VECTORIZED)) })
  return S.vectorize(sp.schedule, stage, sp.inner)
}

/** A stage's rows vectorized (its innermost axis). */
export const vectorizeRows = (s: S.Schedule, stage: string): S.Schedule => {
  const st = s.stages.get(stage)!
  return vectorizeInner(s, stage, st.leaf[st.leaf.length - 1])
}

/**
 * The window form's stride and dilation along a row: how far the plane read moves with the pixel
 * (the product's last data axis: the grid's pixel, or a row's lane) and with the tap (the
 * reduction's last axis).
 */
export const windowSteps = (anchor: S.Stage): [number, number] => {
  const body = anchor.op.body as Reduce
  const plane = planeOf(anchor)
  const reads = collect(body.source, (e) => e.kind === "read" && e.source === plane)
  const idx = reads[0]?.kind === "read" ? reads[0].indices[reads[0].indices.length - 1] : c(0)
  const vars = [anchor.op.axes[anchor.op.axes.length - 1].var.name, ...anchor.op.axes.slice(0, -1).map((a) => a.var.name), ...body.axes.map((a) => a.var.name)]
  const last = vars[vars.length - 1]
  const at = (on: string) => simplify(substitute(idx, new Map(vars.map((v) => [v, c(v === on ? 1 : 0)]))))
  const step = (on: string) => {
    const d = simplify(sub(at(on), at("")))
    return d.kind === "const" ? d.value : 0
  }
  return [step(vars[0]), step(last)]
}

/**
 * The window form's plane a channel at a time: split into its rows (the width of its row of column
 * flags), each vectorized, the flags computed at the channel too (not a parallel loop of their own).
 */
export const dotPlane = (s0: S.Schedule, plane: string): S.Schedule => {
  const st = s0.stages.get(plane)!
  const cols = st.op.inputs.find((t) => t.kind === "compute" && t.shape.length === 1)
  const leaves = dataLeaves(st)
  const [ch, f] = [leaves[1], leaves[leaves.length - 1]]
  if (!cols) return vectorizeRows(s0, plane)
  const sp = S.split(s0, plane, f, { factor: cols.shape[0] })
  let s = vectorizeInner(sp.schedule, plane, sp.inner)
  // (the plane whole first, `plane`: root: the flags too — its parallel loop fuses the channels)
  if (st.attach.kind !== "root" && s.stages.get(cols.name)?.attach.kind !== "inline") s = S.computeAt(s, cols.name, plane, ch)
  return s
}

/** The rows form's knobs: the grid form's but its tile (the epilogue a channel's rows, vectorized along them). */
export const rowsKnobs = (kh: number, epilogueKnob: boolean): Knob[] => [
  ...(kh > 1 ? [{ kind: "choice", name: "unroll_kh", candidates: [true, false], extent: kh } as const] : []),
  { kind: "choice", name: "dot", candidates: ["vnni", "loops"] },
  { kind: "choice", name: "plane", candidates: ["root", "channel"] },
  ...(epilogueKnob ? [{ kind: "choice", name: "epilogue", candidates: ["fused", "int32"], absent: "fused" } as const] : []),
]

/**
 * The rows form's schedule: `out` [n, o, oh, ow] parallel over its channels, its rows' columns the
 * vector loop; at the channel, the requantized int32 values (`epilogue`: int32, its rows' columns
 * the vector loop) and before them the channel's sums, [rows, kernel rows, a row's vectors
 * (unrolled), 16 × 4 window (tensorized onto vnniDotWindow, `dot`: vnni; or vectorized over the 16
 * pixels, the 4 taps unrolled)], read where they are; the plane a channel's before the sums
 * (`plane`: channel) or whole first. (A few rows' sums at a tile of rows would need the plane at the
 * channel of a stage that reads it only through them: computeAt takes a stage's own readers.)
 */
export const rowsProduct = (s0: S.Schedule, anchor: S.Stage, out: string, config: Record<string, unknown>): S.Schedule => {
  const local = anchor.name
  const plane = planeOf(anchor)
  const [stride, dilation] = windowSteps(anchor)
  const [n, m, oh, ow] = dataLeaves(s0.stages.get(out)!)
  let s = vectorizeInner(parallelOuter(s0, out, [n, m]), out, ow)
  const leaves = s.stages.get(out)!.leaf
  const channel = leaves[leaves.indexOf(oh) - 1]
  // the requantized values in int32 at the channel, where the epilogue narrows them (a loop storing
  // 8-bit values takes gcc's 16-byte vectors for every int32 and float step where it is short)
  const wide = config.epilogue === "int32" ? narrowedStage(s, out) : undefined
  let reader: [string, string] = [out, channel]
  if (wide) {
    s = S.computeAt(s, wide, out, channel)
    const [, wo, , ww] = dataLeaves(s.stages.get(wide)!)
    s = vectorizeInner(s, wide, ww)
    reader = [wide, wo]
  }
  // the channel's sums, a row's vectors inside the kernel rows (their sums in registers across them)
  s = S.computeAt(s, local, reader[0], reader[1])
  const ls = s.stages.get(local)!
  const [ln, lm, lh, lv, ll] = dataLeaves(ls)
  const [rkh, rr] = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
  s = S.reorder(s, local, [ln, lm, lh, rkh, lv, ll, rr])
  if (s.stages.get(local)!.axes.get(lv)!.extent > 1) s = S.unroll(s, local, lv)
  if (config.unroll_kh && s.stages.get(local)!.axes.get(rkh)!.extent > 1) s = S.unroll(s, local, rkh)
  s = config.dot === "vnni" ? S.tensorize(s, local, ll, vnniDotWindow(stride, dilation)) : S.unroll(S.vectorize(s, local, ll), local, rr)
  if (plane) {
    if (config.plane === "channel") s = S.computeAt(s, plane, local, lm)
    s = dotPlane(s, plane)
  }
  return parallelize(s, true, [out, local])
}
