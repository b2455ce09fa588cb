// AutoTVM's hand-written CUDA conv2d template (topi cuda conv2d_direct, "schedule_direct_cuda"), the
// baseline the generated tiling is measured against, as a template of the same kind: the output
// channels, rows and columns each split in four (blockIdx.z/y/x, vthread, threadIdx.z/y/x, inner),
// the input channels and kernel rows and columns in two; the output tile in registers at the
// thread loop, the padded input and the weights fetched into shared memory at the last outer
// reduction loop by the block's threads (the fused copy split over threadIdx.x, y and z by the
// thread tile's sizes: one fetch a step covers every vthread's outputs, and
// lowering.InjectVirtualThread interleaves the vthreads' updates in the innermost loop, each its
// section of the register tile; each axis's vthreads bounded by vthreadCaps, so that no draw runs
// past the record's maxVthreads); `auto_unroll_max_step` and `unroll_explicit` as pragmas on the kernel's
// outermost loop (unroll_explicit: the register tile's loops unrolled here, up to the step; else
// left to the emitter's #pragma unroll).
import * as S from "../../../ast/schedule/schedule.js"
import { divisors } from "../common.js"
import type { Config, Knob } from "../template.js"
import { vthreadCaps, type GpuLimits } from "./limits.js"
import { parseTriple, prepare, splitFourLevels } from "./multi-level-tiling.js"

/** The knobs' condition: the template chosen over the generated tiling. */
export const AUTOTVM = { knob: "cuda_sketch", value: "autotvm" } as const

/** AutoTVM's knob values of auto_unroll_max_step. */
export const AUTO_UNROLL_STEPS = [0, 512, 1500] as const

/** Whether a stage is a 2-d convolution the template takes: four data axes (n, f, y, x), three reduce axes (rc, ry, rx). */
export const isConv2d = (st: S.Stage): boolean => st.op.body.kind === "reduce" && st.op.axes.length === 4 && st.op.body.axes.length === 3

/** Every "v.t.i" of an extent (the block part the rest), threads at most the block limit, vthreads at most `vcap` (vthreadCaps: any draw's product within the record's maxVthreads). */
const splits4 = (extent: number, l: GpuLimits, vcap: number): string[] => {
  const out: string[] = []
  for (const i of divisors(extent, extent)) for (const t of divisors(extent / i, l.maxThreads)) for (const v of divisors(extent / i / t, vcap)) out.push(`${v}.${t}.${i}`)
  return out
}

export const conv2dDirectKnobs = (base: S.Schedule, anchor: string, l: GpuLimits): Knob[] => {
  const st = base.stages.get(anchor)!
  const [, f, y, x] = st.op.axes.map((a) => a.dom.extent)
  const red = st.op.body.kind === "reduce" ? st.op.body.axes.map((a) => a.dom.extent) : []
  const when = AUTOTVM
  const [vf, vy, vx] = vthreadCaps([f, y, x], l.maxVthreads)
  return [
    { kind: "choice", name: "tile_f", extent: f, levels: 3, candidates: splits4(f, l, vf), when },
    { kind: "choice", name: "tile_y", extent: y, levels: 3, candidates: splits4(y, l, vy), when },
    { kind: "choice", name: "tile_x", extent: x, levels: 3, candidates: splits4(x, l, vx), when },
    ...["tile_rc", "tile_ry", "tile_rx"].map((name, j): Knob => ({ kind: "choice", name, extent: red[j], candidates: divisors(red[j], red[j]), when })),
    { kind: "choice", name: "auto_unroll_max_step", candidates: [...AUTO_UNROLL_STEPS], when },
    { kind: "choice", name: "unroll_explicit", candidates: [0, 1], when },
  ]
}

const THREADS = ["threadIdx.z", "threadIdx.y", "threadIdx.x"] as const
const BLOCKS = ["blockIdx.z", "blockIdx.y", "blockIdx.x"] as const

/** The template's schedule of a config. */
export const applyConv2dDirect = (base: S.Schedule, anchor: string, config: Config): S.Schedule => {
  const p = prepare(base, anchor)
  let s = p.schedule
  const out = p.out
  const [n, ...fyx] = s.stages.get(out)!.leaf
  const tiles = ["tile_f", "tile_y", "tile_x"].map((k) => parseTriple(config[k] ?? "1.1.1"))
  const split = splitFourLevels(s, out, fyx, tiles)
  s = split.schedule
  const lv = split.levels
  s = S.reorder(s, out, [n, ...lv[0], ...lv[1], ...lv[2], ...lv[3]])
  // (n fused into the channels' block: blockIdx.z)
  const bf = S.fuse(s, out, n, lv[0][0])
  s = bf.schedule
  const blocks = [bf.fused, lv[0][1], lv[0][2]]
  blocks.forEach((a, k) => (s = S.bind(s, out, a, BLOCKS[k])))
  lv[1].forEach((a) => (s = S.bind(s, out, a, "vthread")))
  lv[2].forEach((a, k) => (s = S.bind(s, out, a, THREADS[k])))
  const step = Number(config.auto_unroll_max_step ?? 0)
  const explicit = Number(config.unroll_explicit ?? 0)
  s = S.pragma(S.pragma(s, out, bf.fused, "auto_unroll_max_step", String(step)), out, bf.fused, "unroll_explicit", String(explicit))
  const rstage = p.local ?? out
  if (p.local) s = S.computeAt(s, p.local, out, lv[2][2])
  const rst = s.stages.get(rstage)!
  const rred = rst.leaf.filter((a) => rst.axes.get(a)!.type === "reduce")
  const rdata = rst.leaf.filter((a) => rst.axes.get(a)!.type === "data")
  const ro: string[] = []
  const ri: string[] = []
  ;["tile_rc", "tile_ry", "tile_rx"].forEach((k, j) => {
    const sp = S.split(s, rstage, rred[j], { factor: Number(config[k] ?? 1) })
    s = sp.schedule
    ro.push(sp.outer)
    ri.push(sp.inner)
  })
  s = S.reorder(s, rstage, p.local ? [...ro, ...ri, ...rdata] : [...ro, ...ri])
  if (explicit && p.local) {
    let product = 1
    for (const a of [...s.stages.get(rstage)!.leaf].reverse()) {
      const ax = s.stages.get(rstage)!.axes.get(a)!
      if (product * ax.extent > step) break
      product *= ax.extent
      if (ax.extent > 1) s = S.unroll(s, rstage, a)
    }
  }
  // the cooperative fetches: the copy fused, split over the thread tile's z, y and x sizes
  const tsizes = tiles.map((t) => t[1])
  for (const sh of p.shared) {
    s = S.computeAt(s, sh, rstage, ro[ro.length - 1])
    const leaf = s.stages.get(sh)!.leaf
    let cur = leaf[0]
    for (const next of leaf.slice(1)) {
      const fz = S.fuse(s, sh, cur, next)
      s = fz.schedule
      cur = fz.fused
    }
    // (by factors, x innermost: neighbouring threads fetch neighbouring elements; AutoTVM splits
    // by nparts, a contiguous stretch a thread, which here would be sized from the whole tensor,
    // not the tile, as a split's factor is fixed when it is made)
    const tx = S.split(s, sh, cur, { factor: tsizes[2] })
    const ty = S.split(tx.schedule, sh, tx.outer, { factor: tsizes[1] })
    const tz = S.split(ty.schedule, sh, ty.outer, { factor: tsizes[0] })
    s = S.bind(S.bind(S.bind(tz.schedule, sh, tz.inner, "threadIdx.z"), sh, ty.inner, "threadIdx.y"), sh, tx.inner, "threadIdx.x")
  }
  return s
}
