// What a config of a tiled GPU nest (the generated tiling's mt_* knobs, or AutoTVM's template's
// tile_*) asks of a block, from its knob values and the anchor's index expressions alone, before
// anything is applied or lowered: threads (the product of the thread factors) and shared bytes
// (each shared input's tile: bound inference relaxes a shared stage over the block's thread and
// vthread loops, so a data axis spans its block tile v·t·i, and the fetch sits at the last outer
// reduction loop, so a reduce axis spans its inner factor; an input dim spans the hull of its
// indices' intervals over those spans, within the tensor). Both are products over several knobs, which no bound on
// one knob's candidates can express without dropping configs that fit; Template.refuse checks
// them against the record (TVM's VerifyGPUCode refuses the same after lowering).
import type * as S from "../../../ast/schedule/schedule.js"
import { collect, type Expr } from "../../../ast/te/expr.js"
import { intervalOf } from "../../../ast/te/simplify.js"
import type { Config } from "../template.js"
import type { GpuLimits } from "./limits.js"
import { parseTriple } from "./multi-level-tiling.js"
import { BYTES } from "./verify.js"

export interface BlockFootprint {
  readonly threads: number
  readonly sharedBytes: number
}

/** The knobs of a tiling's data axes and reduce axes in `config`: AutoTVM's template's (over f, y, x; n one a block) or the generated tiling's. */
const tilesOf = (st: S.Stage, config: Config): { data: [number, number, number][]; red: number[] } => {
  const nred = st.op.body.kind === "reduce" ? st.op.body.axes.length : 0
  if (config.cuda_sketch === "autotvm")
    return { data: [[1, 1, 1], ...["tile_f", "tile_y", "tile_x"].map((k) => parseTriple(config[k] ?? "1.1.1"))], red: ["tile_rc", "tile_ry", "tile_rx"].map((k) => Number(config[k] ?? 1)) }
  return { data: st.op.axes.map((_, i) => parseTriple(config[`mt_s${i}`] ?? "1.1.1")), red: Array.from({ length: nred }, (_, j) => Number(config[`mt_r${j}`] ?? 1)) }
}

/** Threads and shared bytes a block of the tiled anchor's kernel uses under `config`. */
export const blockFootprint = (base: S.Schedule, anchor: string, config: Config): BlockFootprint => {
  const st = base.stages.get(anchor)!
  const { data, red } = tilesOf(st, config)
  const span = new Map<string, { min: number; max: number }>()
  st.op.axes.forEach((a, i) => span.set(a.var.name, { min: 0, max: data[i][0] * data[i][1] * data[i][2] - 1 }))
  if (st.op.body.kind === "reduce") st.op.body.axes.forEach((a, j) => span.set(a.var.name, { min: 0, max: red[j] - 1 }))
  const source = st.op.body.kind === "reduce" ? st.op.body.source : st.op.body
  const reads = collect(source as Expr, (x) => x.kind === "read") as Extract<Expr, { kind: "read" }>[]
  let sharedBytes = 0
  for (const input of new Map(st.op.inputs.map((t) => [t.name, t])).values()) {
    const mine = reads.filter((r) => r.source === input.name)
    if (mine.length === 0) continue
    // (a region no wider than the tensor: bound inference clips a padded read's halo where it spans the whole dim)
    const elements = input.shape.reduce((n, dim, d) => {
      const iv = mine.map((r) => intervalOf(r.indices[d], span))
      return n * Math.min(dim, Math.max(...iv.map((v) => v.max)) - Math.min(...iv.map((v) => v.min)) + 1)
    }, 1)
    sharedBytes += elements * (BYTES[mine[0].dtype] ?? 4)
  }
  return { threads: data.reduce((n, t) => n * t[1], 1), sharedBytes }
}

/** Why a config's block breaks the record's threads or shared bytes per block (undefined: it fits). */
export const footprintRefusal = (f: BlockFootprint, l: GpuLimits): string | undefined =>
  f.threads > l.maxThreads
    ? `maxThreadsPerBlock: ${f.threads} threads a block, over the record's ${l.maxThreads}`
    : f.sharedBytes > l.sharedBytes
      ? `sharedMemoryPerBlock: ${f.sharedBytes} bytes of shared tiles a block, over the record's ${l.sharedBytes}`
      : undefined
