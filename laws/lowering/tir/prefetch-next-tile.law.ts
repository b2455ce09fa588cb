// lowering.PrefetchNextTile (the c target's TIR pipeline): the laws of every TIR pass (a prefetch
// changes no value), and its hints: on generated tile loops — a parallel loop over channel tiles,
// each reading its slab of a weight buffer in passes over rows, the reduction, blocks and lanes, as
// the conv and Winograd templates lower, or a parallel loop fused from the tiles and their rows
// (iteration p reads slab ⌊p / rows⌋, a 1×1 conv's channel tiles over a 7×7 image) — every
// prefetched index lies inside the buffer, and the lines a tile's iterations prefetch cover every
// line the next tile reads. A slab read once per tile, a buffer within the threshold, a slab whose
// pair exceeds the L2, and reads outside a vector loop get no hint.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { add, c, floordiv, floormod, mul, read, v, type Expr } from "../../../src/ast/te/expr.js"
import { evalExpr } from "../../../src/ast/te/eval-expr.js"
import type { Buffer, PrimFunc, Stmt } from "../../../src/ast/tir/tir.js"
import { CACHE_LINE_BYTES, prefetchNextTile, prefetchNextTiles } from "../../../src/lowering/tir/prefetch-next-tile.js"
import { lawParams } from "../../support.js"
import { passLaws } from "./support.js"

passLaws(prefetchNextTile(64), { runs: 30, variant: "a threshold every generated buffer passes" })

type ForStmt = Extract<Stmt, { kind: "for" }>
const loopOf = (name: string, extent: number, body: Stmt, forKind: ForStmt["forKind"] = "serial"): Stmt => ({ kind: "for", var: v(name), min: c(0), extent: c(extent), forKind, body })

interface TileCase {
  readonly tiles: number
  readonly rows: number
  readonly ic: number
  readonly blocks: number
  readonly lanes: number
}

/**
 * out[p, r, b, l] = Σ_i x[r, i] · w[p·S + b·(ic·lanes) + i·lanes + l], p parallel: a channel tile's
 * slab S = blocks × ic × lanes, read once per row. `fused`: one parallel loop over tiles × rows,
 * the tile ⌊p / rows⌋ and the row p mod rows (the conv template's channel tiles fused with a small
 * image's rows).
 */
const tileKernel = (k: TileCase, laneKind: ForStmt["forKind"] = "vectorized", fused = false): PrimFunc => {
  const S = k.blocks * k.ic * k.lanes
  const w: Buffer = { name: "w", dtype: "float32", shape: [k.tiles * S], scope: "global" }
  const x: Buffer = { name: "x", dtype: "float32", shape: [k.rows * k.ic], scope: "global" }
  const out: Buffer = { name: "out", dtype: "float32", shape: [k.tiles * k.rows * k.blocks * k.lanes], scope: "global" }
  const [i, l] = ["i", "l"].map((n) => v(n))
  const p = fused ? floordiv(v("p"), c(k.rows)) : v("p")
  const r = fused ? floormod(v("p"), c(k.rows)) : v("r")
  // (the blocks unrolled, as UnrollLoops leaves a register tile's channel blocks: one store each)
  const stores: Stmt[] = Array.from({ length: k.blocks }, (_, b) => {
    const at: Expr = add(mul(add(mul(add(mul(p, c(k.rows)), r), c(k.blocks)), c(b)), c(k.lanes)), l)
    const wIndex = add(add(add(mul(p, c(S)), c(b * k.ic * k.lanes)), mul(i, c(k.lanes))), l)
    return { kind: "store", buffer: "out", indices: [at], value: add(read("out", [at], "float32"), mul(read("x", [add(mul(r, c(k.ic)), i)], "float32"), read("w", [wIndex], "float32"))) }
  })
  const lanes = stores.map((st) => loopOf("l", k.lanes, st, laneKind))
  const step = loopOf("i", k.ic, lanes.length === 1 ? lanes[0] : { kind: "seq", body: lanes })
  const body = fused ? loopOf("p", k.tiles * k.rows, step, "parallel") : loopOf("p", k.tiles, loopOf("r", k.rows, step), "parallel")
  return { name: "tiles", params: [x, w, out], body }
}

const arbTiles: fc.Arbitrary<TileCase> = fc.record({
  tiles: fc.integer({ min: 2, max: 5 }),
  rows: fc.integer({ min: 2, max: 7 }),
  ic: fc.integer({ min: 1, max: 24 }),
  blocks: fc.integer({ min: 1, max: 3 }),
  lanes: fc.constantFrom(4, 8, 16),
})

const prefetchLoops = (s: Stmt, out: ForStmt[] = []): ForStmt[] => {
  if (s.kind === "for") {
    if (s.prefetch?.length) out.push(s)
    prefetchLoops(s.body, out)
  } else if (s.kind === "seq") s.body.forEach((b) => prefetchLoops(b, out))
  return out
}

/** The indices of w each tile prefetches, by tile: the tile loop (fused: the tile's iterations) and the serial loops down to the hinted one, enumerated. */
const prefetchedByTile = (f: PrimFunc, k: TileCase, fused = false): Map<number, number[]> => {
  const hinted = prefetchLoops(f.body)
  expect(hinted.length).toBe(1)
  const byTile = new Map<number, number[]>()
  const noRead = () => {
    throw new Error("a prefetch index reads a buffer")
  }
  for (let t = 0; t < k.tiles; t++)
    for (let r = 0; r < k.rows; r++)
      for (let i = 0; i < k.ic; i++) {
        const env = new Map(fused ? [["p", t * k.rows + r], ["i", i]] : [["p", t], ["r", r], ["i", i]])
        for (const h of hinted[0].prefetch!) byTile.set(t, [...(byTile.get(t) ?? []), evalExpr(h.index, env, noRead)])
      }
  return byTile
}

describe("lowering.PrefetchNextTile: its hints", () => {
  const slabBytes = (k: TileCase) => k.blocks * k.ic * k.lanes * 4
  it("every prefetched index is inside the buffer, and a tile's prefetches cover every line the next tile reads (the tiles a loop, or fused with their rows)", () => {
    fc.assert(
      fc.property(arbTiles, fc.boolean(), (k, fused) => {
        const f = tileKernel(k, "vectorized", fused)
        const out = prefetchNextTiles(f, 0, 1 << 30)
        const S = k.blocks * k.ic * k.lanes
        const lineElems = CACHE_LINE_BYTES / 4
        const byTile = prefetchedByTile(out, k, fused)
        for (const [p, indices] of byTile) {
          for (const x of indices) expect(x >= 0 && x < k.tiles * S).toBe(true)
          if (p === k.tiles - 1) continue
          const lines = new Set(indices.map((x) => Math.floor(x / lineElems)))
          // every element of the next slab lies on a prefetched line
          for (let e = (p + 1) * S; e < (p + 2) * S; e++) expect(lines.has(Math.floor(e / lineElems))).toBe(true)
        }
      }),
      lawParams(60),
    )
  })

  it("no hint where the buffer is within the threshold, two slabs exceed the L2, the reads are in no vector loop, or the slab is read once a tile", () => {
    fc.assert(
      fc.property(arbTiles, (k) => {
        const f = tileKernel(k)
        const wBytes = k.tiles * slabBytes(k)
        expect(prefetchNextTiles(f, wBytes, 1 << 30)).toBe(f)
        expect(prefetchNextTiles(f, 0, 2 * slabBytes(k) - 1)).toBe(f)
        // (reads outside a vector loop: a scalar loop, not a register tile's step)
        const scalar = tileKernel(k, "serial")
        expect(prefetchNextTiles(scalar, 0, 1 << 30)).toBe(scalar)
        const once = tileKernel({ ...k, rows: 1 })
        expect(prefetchLoops(prefetchNextTiles(once, 0, 1 << 30).body)).toHaveLength(0)
        // (fused with its rows: the threshold and the L2 alike; one slab in all has no next one)
        const fused = tileKernel(k, "vectorized", true)
        expect(prefetchNextTiles(fused, wBytes, 1 << 30)).toBe(fused)
        expect(prefetchNextTiles(fused, 0, 2 * slabBytes(k) - 1)).toBe(fused)
        const single = tileKernel({ ...k, tiles: 1 }, "vectorized", true)
        expect(prefetchNextTiles(single, 0, 1 << 30)).toBe(single)
      }),
      lawParams(40),
    )
  })
})
