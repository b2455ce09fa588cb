// Multi-level tiling of a matrix product (MatMul, batched MatMul, Gemm's product): the output in
// column panels × row tiles, each tile's sums in registers across the whole reduction, the
// epilogue computed from the registers. The register tile is sized from the target record, not
// fit by hand: enough independent accumulators to keep the FMA pipes busy (pipes × latency), as
// many as the vector registers hold beside the operands, the shape that loads the fewest operands
// per FMA. Column panels outside row tiles by default: a panel of B (K × tile columns) stays in
// cache while every row tile passes over it (rows outside re-read all of B once per row tile).
// Over a weight packed in column panels of the tile's width (MatMulPacked, rewrite.AlterLayout's
// layout rewrite of a constant B) the column tile is the panel: its rows are one contiguous stream.
import * as S from "../../ast/schedule/schedule.js"
import { collect, type Read } from "../../ast/te/expr.js"
import type { ComputeTensor } from "../../ast/te/tensor.js"
import { matmulRegisterTile, MAX_TILE_ROWS } from "../../ast/register-tile.js"
import { anchorStage, dataLeaves, divisors, parallelize, parallelOuter, tileStages } from "./common.js"
import { reductionTemplate } from "./reduction.js"
import type { Template } from "./template.js"

export { matmulRegisterTile } from "../../ast/register-tile.js"

/**
 * The panel width of a product over a packed weight (MatMulPacked's compute, tagged matmul_packed:
 * column j reads panel j / w at lane j % w): the w of its floormod read, undefined for any other.
 */
export const packedPanelWidth = (op: ComputeTensor): number | undefined => {
  if (op.tag !== "matmul_packed") return undefined
  const lane = collect(op.body, (e) => e.kind === "read").flatMap((r) => {
    const last = (r as Read).indices.at(-1)
    return last?.kind === "bin" && last.op === "floormod" && last.b.kind === "const" ? [last.b.value] : []
  })
  return lane[0]
}

/**
 * The anchor's row and column extents (its last two data axes), when it has two, more than one row,
 * and a tile to compute it at, and its packed weight's panel width where it reads one. One row (a
 * matrix-vector product) streams its weights once whatever the tile: the reduction template's wide
 * column tiles are made for it.
 */
const rowsCols = (base: S.Schedule): { readonly rows: number; readonly cols: number; readonly panel?: number } | undefined => {
  const st = anchorStage(base)
  if (!st || !tileStages(base, st)) return undefined
  const data = dataLeaves(st)
  if (data.length < 2) return undefined
  const rows = st.axes.get(data[data.length - 2])!.extent
  const panel = packedPanelWidth(st.op)
  return rows > 1 ? { rows, cols: st.axes.get(data[data.length - 1])!.extent, ...(panel ? { panel } : {}) } : undefined
}

const colCandidates = (cols: number): number[] =>
  [...new Set([...divisors(cols, S.MAX_VECTORIZED), ...Array.from({ length: S.MAX_VECTORIZED / 4 }, (_, k) => 4 * (k + 1)).filter((w) => w <= cols)])].sort((a, b) => a - b)

export const matmulTemplate: Template = {
  name: "matmul",
  tunable: true,
  space: (outputs, base) => {
    const rc = rowsCols(base)
    if (!rc) return reductionTemplate.space(outputs, base)
    const rows = Array.from({ length: Math.min(MAX_TILE_ROWS, rc.rows) }, (_, k) => k + 1)
    return [
      { kind: "split", name: "tile_rows", extent: rc.rows, candidates: rows },
      // the divisors, and every multiple of 4 (whole vectors at 4, 8 or 16 lanes; a last tile narrower runs as a tail loop)
      // (over a packed weight, its panel: a tile of another width reads lanes of two panels, as gathers)
      { kind: "split", name: "tile_cols", extent: rc.cols, candidates: rc.panel ? [rc.panel] : colCandidates(rc.cols) },
      { kind: "choice", name: "cols_outer", candidates: [true, false] },
      { kind: "choice", name: "vectorize", candidates: [true, false] },
    ]
  },
  defaults: (knobs, target) => {
    const rowsKnob = knobs.find((k) => k.name === "tile_rows")
    const colsKnob = knobs.find((k) => k.name === "tile_cols")
    if (rowsKnob?.kind !== "split" || colsKnob?.kind !== "split") return reductionTemplate.defaults(knobs, target)
    // (a single column candidate: a packed weight's panel, or one column; the tile is that wide)
    const tile = matmulRegisterTile(target, rowsKnob.extent, colsKnob.extent, colsKnob.candidates.length === 1 ? Number(colsKnob.candidates[0]) : undefined)
    return { tile_rows: tile.rows, tile_cols: tile.cols, cols_outer: true, vectorize: target.vectorLanes > 1 }
  },
  apply: (outputs, base, config) => {
    const st = anchorStage(base)
    const tiled = st && config.tile_rows !== undefined ? tileStages(base, st) : undefined
    if (!st || !tiled) return reductionTemplate.apply(outputs, base, config)
    let s = tiled.schedule
    const { out, local } = tiled
    const data = dataLeaves(s.stages.get(out)!)
    const [rowAxis, colAxis] = data.slice(-2)
    const tr = Number(config.tile_rows)
    const tc = Number(config.tile_cols)
    const extent = (a: string) => tiled.schedule.stages.get(out)!.axes.get(a)!.extent
    const sc = S.split(s, out, colAxis, { factor: tc })
    const sr = S.split(sc.schedule, out, rowAxis, { factor: tr })
    const tiles = config.cols_outer ? [sc.outer, sr.outer] : [sr.outer, sc.outer]
    const outer = [...data.slice(0, -2), ...tiles]
    s = S.reorder(sr.schedule, out, [...outer, sr.inner, sc.inner])
    // parallel: the loops outside the tile the product is computed at (that one must stay a
    // leaf); a tile loop that does not divide its axis only when nothing else is parallel — fused
    // into the parallel loop, its guard would reach every tile, where a serial one keeps it to
    // the last (LoopPartition)
    const divides = config.cols_outer ? extent(colAxis) % tc === 0 : extent(rowAxis) % tr === 0
    const batch = data.slice(0, -2)
    const batchParallel = batch.some((a) => extent(a) > 1)
    s = parallelOuter(s, out, divides || !batchParallel ? outer.slice(0, -1) : batch)
    if (config.vectorize && tc > 1) s = S.vectorize(s, out, sc.inner)
    // the product inside the tile: its reduction outside the tile's rows and columns (the sums
    // stay in registers), the rows unrolled, the columns vectorized
    s = S.computeAt(s, local, out, tiles[1])
    const ls = s.stages.get(local)!
    const red = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
    const ldata = dataLeaves(ls)
    s = S.reorder(s, local, [...red, ...ldata])
    // (the primitive checks the axis's whole extent, though the tile covers tile_cols of it: an axis
    // past its limit is split at the tile's width first, its outer part one iteration at the tile)
    const lastCol = ldata[ldata.length - 1]
    if (config.vectorize && tc > 1 && ls.axes.get(lastCol)!.extent <= S.MAX_VECTORIZED) s = S.vectorize(s, local, lastCol)
    else if (config.vectorize && tc > 1 && tc <= S.MAX_VECTORIZED) {
      const cs = S.split(s, local, lastCol, { factor: tc })
      s = S.vectorize(cs.schedule, local, cs.inner)
    }
    if (tr > 1) s = S.unroll(s, local, ldata[ldata.length - 2])
    return parallelize(s, !!config.vectorize, out)
  },
}
