// Multi-level tiling of a matrix product (MatMul, batched MatMul, Gemm's product): the output in
// column panels × row tiles, each tile's sums in registers across the whole reduction, the
// epilogue computed from the registers. The register tile is sized from the target record, not
// fit by hand: enough independent accumulators to keep the FMA pipes busy (pipes × latency), as
// many as the vector registers hold beside the operands, the shape that loads the fewest operands
// per FMA. Column panels outside row tiles by default: a panel of B (K × tile columns) stays in
// cache while every row tile passes over it (rows outside re-read all of B once per row tile).
import * as S from "../../ast/schedule/schedule.js"
import { anchorStage, dataLeaves, divisors, largest, parallelize, parallelOuter, tileStages } from "./common.js"
import { reductionTemplate } from "./reduction.js"
import type { ScheduleTarget, Template } from "./template.js"

/** Rows of a register tile at most (an unrolled loop of broadcasts). */
const MAX_ROWS = 8

/** Vectors across a register tile's columns at most. */
const MAX_VECTORS = 4

/** Extra rows a non-dividing row tile may compute (guarded), as a share of the rows. */
const MAX_ROW_WASTE = 0.05

/**
 * Extra columns a non-dividing column tile may cover, as a share of the columns: its last tile
 * runs as a separate, narrower loop (LoopPartition), so whole vectors still fill the rest — an
 * attention score matrix's 197 columns take 12 tiles of 16 and a tail of 5, not tiles of one.
 */
const MAX_COL_WASTE = 0.125

/**
 * The register tile for these rows and columns: `rows` × `cols`. Columns: a multiple of the lanes
 * (up to four vectors and the vectorizer's 64) whose tiles cover the columns with at most 12.5%
 * to spare, else the widest divisor within one vector. Rows: up to 8, their tiles covering the
 * rows with at most 5% to spare (guarded). Accumulators: rows × vectors, at least pipes × latency
 * where the registers allow, at most the registers less one per column vector (the B row) and
 * one for the broadcast A element; among those the fewest loads per FMA ((rows + vectors) /
 * (rows × vectors)), then the least extra work, then the wider columns.
 */
export const matmulRegisterTile = (target: ScheduleTarget, rows: number, cols: number): { readonly rows: number; readonly cols: number } => {
  const lanes = Math.max(1, target.vectorLanes)
  const registers = target.vectorRegisters ?? 16
  const need = (target.fmaUnits ?? 2) * (target.fmaLatency ?? 4)
  const colWaste = (w: number) => (Math.ceil(cols / w) * w - cols) / cols
  const full = Array.from({ length: MAX_VECTORS }, (_, k) => (k + 1) * lanes).filter((w) => w <= Math.min(S.MAX_VECTORIZED, cols) && colWaste(w) <= MAX_COL_WASTE)
  const widths = full.length ? full : [largest(divisors(cols, lanes), lanes)]
  let best: { rows: number; cols: number; score: number[] } | undefined
  for (const width of widths) {
    const vectors = Math.ceil(width / lanes)
    for (let r = 1; r <= Math.min(MAX_ROWS, rows); r++) {
      const rowWaste = (Math.ceil(rows / r) * r - rows) / rows
      const acc = r * vectors
      if (rowWaste > MAX_ROW_WASTE || acc + vectors + 1 > registers) continue
      // saturating the pipes first; then fewer loads per FMA; then less extra work, wider columns
      const score = [Math.min(acc, need), -(r + vectors) / acc, -((1 + rowWaste) * (1 + colWaste(width)) - 1), width]
      if (!best || lexGreater(score, best.score)) best = { rows: r, cols: width, score }
    }
  }
  return best ? { rows: best.rows, cols: best.cols } : { rows: 1, cols: widths[0] }
}

const lexGreater = (a: readonly number[], b: readonly number[]): boolean => {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] > b[i]
  return false
}

/**
 * The anchor's row and column extents (its last two data axes), when it has two, more than one row,
 * and a tile to compute it at. One row (a matrix-vector product) streams its weights once whatever
 * the tile: the reduction template's wide column tiles are made for it.
 */
const rowsCols = (base: S.Schedule): { readonly rows: number; readonly cols: number } | undefined => {
  const st = anchorStage(base)
  if (!st || !tileStages(base, st)) return undefined
  const data = dataLeaves(st)
  if (data.length < 2) return undefined
  const rows = st.axes.get(data[data.length - 2])!.extent
  return rows > 1 ? { rows, cols: st.axes.get(data[data.length - 1])!.extent } : undefined
}

const colCandidates = (cols: number): number[] =>
  [...new Set([...divisors(cols, S.MAX_VECTORIZED), ...Array.from({ length: S.MAX_VECTORIZED / 4 }, (_, k) => 4 * (k + 1)).filter((w) => w <= cols)])].sort((a, b) => a - b)

export const matmulTemplate: Template = {
  name: "matmul",
  tunable: true,
  space: (outputs, base) => {
    const rc = rowsCols(base)
    if (!rc) return reductionTemplate.space(outputs, base)
    const rows = Array.from({ length: Math.min(MAX_ROWS, rc.rows) }, (_, k) => k + 1)
    return [
      { kind: "split", name: "tile_rows", extent: rc.rows, candidates: rows },
      // the divisors, and every multiple of 4 (whole vectors at 4, 8 or 16 lanes; a last tile narrower runs as a tail loop)
      { kind: "split", name: "tile_cols", extent: rc.cols, candidates: colCandidates(rc.cols) },
      { kind: "choice", name: "cols_outer", candidates: [true, false] },
      { kind: "choice", name: "vectorize", candidates: [true, false] },
    ]
  },
  defaults: (knobs, target) => {
    const rowsKnob = knobs.find((k) => k.name === "tile_rows")
    const colsKnob = knobs.find((k) => k.name === "tile_cols")
    if (rowsKnob?.kind !== "split" || colsKnob?.kind !== "split") return reductionTemplate.defaults(knobs, target)
    const tile = matmulRegisterTile(target, rowsKnob.extent, colsKnob.extent)
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
    // (the primitive checks the axis's whole extent, though the tile covers tile_cols of it; past
    // its limit gcc vectorizes the loop by itself)
    if (config.vectorize && tc > 1 && ls.axes.get(ldata[ldata.length - 1])!.extent <= S.MAX_VECTORIZED) s = S.vectorize(s, local, ldata[ldata.length - 1])
    if (tr > 1) s = S.unroll(s, local, ldata[ldata.length - 2])
    return parallelize(s, !!config.vectorize, out)
  },
}
