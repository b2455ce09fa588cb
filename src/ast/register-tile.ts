// The matmul register tile a target's vector unit holds, derived from its record (vector lanes,
// FMA pipes × latency, vector registers) and nothing fit by hand. Shared by the matmul rule
// (src/lowering/templates/matmul.ts: its default tile) and the layout rewrite of constant weights
// (src/rewrite/pack-dense.ts: the column panels a constant B is packed in, one a tile's columns),
// so the panels the graph pass packs are the tiles the schedule computes.
import { MAX_VECTORIZED } from "./schedule/schedule.js"

/** What a register tile is sized from (a ScheduleTarget or a LayoutTarget holds it). */
export interface RegisterFile {
  /** fp32 lanes of the vector unit. */
  readonly vectorLanes: number
  /** FMA pipes and their latency in cycles at that width (absent: 2 × 4). */
  readonly fmaUnits?: number
  readonly fmaLatency?: number
  /** Vector registers of the ISA (absent: 16). */
  readonly vectorRegisters?: number
  /** Bytes of a core's L2 (absent: a panel of any depth is taken to fit). */
  readonly l2Bytes?: number
}

/** Bytes of an element of a packed panel (fp32). */
const PANEL_ELEMENT_BYTES = 4

/** Rows of a register tile at most (an unrolled loop of broadcasts). */
export const MAX_TILE_ROWS = 8

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

const lexGreater = (a: readonly number[], b: readonly number[]): boolean => {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] > b[i]
  return false
}

/** The largest divisor of n that is at most `max` (1 at least). */
const largestDivisor = (n: number, max: number): number => {
  for (let d = Math.min(n, max); d > 1; d--) if (n % d === 0) return d
  return 1
}

/**
 * The register tile for these rows and columns: `rows` × `cols`. Columns: a multiple of the lanes
 * (up to four vectors and the vectorizer's 64) whose tiles cover the columns with at most 12.5%
 * to spare, else the widest divisor within one vector; `width` where given (a packed weight's
 * panel). Rows: up to 8, their tiles covering the rows with at most 5% to spare (guarded).
 * Accumulators: rows × vectors, at least pipes × latency where the registers allow, at most the
 * registers less one per column vector (the B row) and one for the broadcast A element; among
 * those the fewest loads per FMA ((rows + vectors) / (rows × vectors)), then the least extra
 * work, then the wider columns. With the reduction's `depth` and the target's L2: only the widths
 * whose panel of B (depth × width fp32) fills at most half the L2, where one does — every row tile
 * passes over the panel, which then stays in L2 with the next one fetched beside it
 * (lowering.PrefetchNextTile's condition); a wider one is evicted by the rows of A streaming through
 * (BERT-base's and ViT-B/16's MLP down-projection, depth 3072: panels of 64 are 768 KiB).
 */
export const matmulRegisterTile = <T extends RegisterFile>(target: T, rows: number, cols: number, width?: number, depth?: number): { readonly rows: number; readonly cols: number } => {
  const lanes = Math.max(1, target.vectorLanes)
  const registers = target.vectorRegisters ?? 16
  const need = (target.fmaUnits ?? 2) * (target.fmaLatency ?? 4)
  const colWaste = (w: number) => (Math.ceil(cols / w) * w - cols) / cols
  const whole = Array.from({ length: MAX_VECTORS }, (_, k) => (k + 1) * lanes).filter((w) => w <= Math.min(MAX_VECTORIZED, cols) && colWaste(w) <= MAX_COL_WASTE)
  const inL2 = whole.filter((w) => depth === undefined || target.l2Bytes === undefined || 2 * depth * w * PANEL_ELEMENT_BYTES <= target.l2Bytes)
  const full = inL2.length ? inL2 : whole.slice(0, 1)
  const widths = width !== undefined ? [width] : full.length ? full : [largestDivisor(cols, lanes)]
  let best: { rows: number; cols: number; score: number[] } | undefined
  for (const w of widths) {
    const vectors = Math.ceil(w / lanes)
    for (let r = 1; r <= Math.min(MAX_TILE_ROWS, rows); r++) {
      const rowWaste = (Math.ceil(rows / r) * r - rows) / rows
      const acc = r * vectors
      if (rowWaste > MAX_ROW_WASTE || acc + vectors + 1 > registers) continue
      // saturating the pipes first; then fewer loads per FMA; then less extra work, wider columns
      const score = [Math.min(acc, need), -(r + vectors) / acc, -((1 + rowWaste) * (1 + colWaste(w)) - 1), w]
      if (!best || lexGreater(score, best.score)) best = { rows: r, cols: w, score }
    }
  }
  return best ? { rows: best.rows, cols: best.cols } : { rows: 1, cols: widths[0] }
}
