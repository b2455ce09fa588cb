// lowering.PrefetchNextTile (the c target's TIR pipeline): the laws of every TIR pass (a prefetch
// changes no value), and its hints: on generated tile loops — a parallel loop over channel tiles,
// each reading its slab of a weight buffer in passes over rows, the reduction, blocks and lanes, as
// the conv and Winograd templates lower — every prefetched index lies inside the buffer, and the
// lines an iteration prefetches cover every line the next iteration reads. A slab read once per
// iteration, a buffer within the threshold, a slab whose pair exceeds the L2, and reads outside a
// vector loop get no hint; the hints come from the outermost loop that asks for at most
// MAX_PER_STEP lines a step. The same where G row tiles are fused with each channel tile into the
// parallel loop (index S·⌊p / G⌋ + rest): a group's G iterations together cover the next group's slab.
// And where a tail row outside the row loop reads the same slab (a matmul's last row tile, peeled),
// the row loop issues the hints.
// And where the weights are a tensor intrinsic's operand (the VNNI dot, 64 bytes a call, the c
// target's int8 convs with their channels in the lanes): the same cover, none where a group is one
// iteration (its slab read once) or the operand is not one contiguous run.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { add, c, floordiv, floormod, mapExpr, mul, read, v, type Expr } from "../../../src/ast/te/expr.js"
import { evalExpr } from "../../../src/ast/te/eval-expr.js"
import type { Buffer, PrimFunc, Stmt } from "../../../src/ast/tir/tir.js"
import { vnniDot16x4 } from "../../../src/ast/te/intrinsic.js"
import { CACHE_LINE_BYTES, MAX_PER_STEP, MIN_REUSE, prefetchNextTile, prefetchNextTiles } from "../../../src/lowering/tir/prefetch-next-tile.js"
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
 * slab S = blocks × ic × lanes, read once per row. With `group` G > 1 the parallel loop runs tiles × G
 * iterations, G row tiles of each channel tile (a channel tile fused with the image's rows): the
 * iteration p reads rows (p mod G)·rows + r and the slab of tile ⌊p / G⌋.
 */
const tileKernel = (k: TileCase, laneKind: ForStmt["forKind"] = "vectorized", group = 1, tail: "beside" | "inside" | undefined = undefined): PrimFunc => {
  const S = k.blocks * k.ic * k.lanes
  // (with `tail`, each iteration one row more, outside the row loop: the last row tile LoopPartition peels off a matmul's rows)
  const rowsAll = k.rows + (tail ? 1 : 0)
  const w: Buffer = { name: "w", dtype: "float32", shape: [k.tiles * S], scope: "global" }
  const x: Buffer = { name: "x", dtype: "float32", shape: [group * rowsAll * k.ic], scope: "global" }
  const out: Buffer = { name: "out", dtype: "float32", shape: [k.tiles * group * rowsAll * k.blocks * k.lanes], scope: "global" }
  const [p, i, l] = ["p", "i", "l"].map((n) => v(n))
  const rowLoop = (r: Expr, iName: string): Stmt => {
    const ii = iName === "i" ? i : v(iName)
    const [tile, row]: Expr[] = group === 1 ? [p, r] : [floordiv(p, c(group)), add(mul(floormod(p, c(group)), c(rowsAll)), r)]
    // (the blocks unrolled, as UnrollLoops leaves a register tile's channel blocks: one store each)
    const stores: Stmt[] = Array.from({ length: k.blocks }, (_, b) => {
      const at: Expr = add(mul(add(mul(add(mul(p, c(rowsAll)), r), c(k.blocks)), c(b)), c(k.lanes)), l)
      const wIndex = add(add(add(mul(tile, c(S)), c(b * k.ic * k.lanes)), mul(ii, c(k.lanes))), l)
      return { kind: "store", buffer: "out", indices: [at], value: add(read("out", [at], "float32"), mul(read("x", [add(mul(row, c(k.ic)), ii)], "float32"), read("w", [wIndex], "float32"))) }
    })
    const lanes = stores.map((st) => loopOf("l", k.lanes, st, laneKind))
    return loopOf(iName, k.ic, lanes.length === 1 ? lanes[0] : { kind: "seq", body: lanes })
  }
  // ("inside": the extra row's loop a sibling of the channel loop inside the row loop, both sharing it — a conv's window positions)
  const rows = loopOf("r", k.rows, tail === "inside" ? { kind: "seq", body: [rowLoop(v("r"), "i"), rowLoop(c(k.rows), "tail_i")] } : rowLoop(v("r"), "i"))
  const body = loopOf("p", k.tiles * group, tail === "beside" ? { kind: "seq", body: [rows, rowLoop(c(k.rows), "tail_i")] } : rows, "parallel")
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

/** The indices of w each tile (each group of `group` iterations) prefetches, by tile: the parallel loop and the serial loops down to the hinted one, enumerated. */
const prefetchedByTile = (f: PrimFunc, k: TileCase, group = 1): Map<number, number[]> => {
  const hinted = prefetchLoops(f.body)
  expect(hinted.length).toBe(1)
  const byTile = new Map<number, number[]>()
  const noRead = () => {
    throw new Error("a prefetch index reads a buffer")
  }
  for (let p = 0; p < k.tiles * group; p++)
    for (let r = 0; r < k.rows; r++)
      for (let i = 0; i < k.ic; i++) {
        const env = new Map([["p", p], ["r", r], ["i", i]])
        const tile = Math.floor(p / group)
        for (const h of hinted[0].prefetch!) byTile.set(tile, [...(byTile.get(tile) ?? []), evalExpr(h.index, env, noRead)])
      }
  return byTile
}

/**
 * The hints sit in the outermost serial loop whose steps ask for at most MAX_PER_STEP lines each:
 * in the row loop where a group's rows leave that few lines a row, else in the channel loop.
 */
const expectHintLoop = (f: PrimFunc, k: TileCase, group = 1): void => {
  // (the slab's lines, one more where it does not start on a line)
  const S = k.blocks * k.ic * k.lanes
  const lineElems = CACHE_LINE_BYTES / 4
  const lines = Math.ceil(S / lineElems) + (S % lineElems === 0 ? 0 : 1)
  expect(prefetchLoops(f.body)[0].var.name).toBe(group * k.rows * MAX_PER_STEP >= lines ? "r" : "i")
}

/** Every prefetched index lies inside w, and a tile's prefetches cover every line of the next tile's slab. */
const expectNextSlabsCovered = (byTile: ReadonlyMap<number, readonly number[]>, k: TileCase): void => {
  const S = k.blocks * k.ic * k.lanes
  const lineElems = CACHE_LINE_BYTES / 4
  for (const [p, indices] of byTile) {
    for (const x of indices) expect(x >= 0 && x < k.tiles * S).toBe(true)
    if (p === k.tiles - 1) continue
    const lines = new Set(indices.map((x) => Math.floor(x / lineElems)))
    // every element of the next slab lies on a prefetched line
    for (let e = (p + 1) * S; e < (p + 2) * S; e++) expect(lines.has(Math.floor(e / lineElems))).toBe(true)
  }
}

describe("lowering.PrefetchNextTile: its hints", () => {
  const slabBytes = (k: TileCase) => k.blocks * k.ic * k.lanes * 4
  it("every prefetched index is inside the buffer, a tile's prefetches cover every line the next tile reads, issued by the outermost loop that asks for at most MAX_PER_STEP lines a step", () => {
    fc.assert(
      fc.property(arbTiles, (k) => {
        const out = prefetchNextTiles(tileKernel(k), 0, 1 << 30)
        expectNextSlabsCovered(prefetchedByTile(out, k), k)
        expectHintLoop(out, k)
      }),
      lawParams(60),
    )
  })

  it("row tiles fused with the channel tiles (a slab per G iterations): a group's prefetches cover every line the next group reads, from the same loop", () => {
    fc.assert(
      fc.property(arbTiles, fc.integer({ min: 2, max: 7 }), (k, group) => {
        const out = prefetchNextTiles(tileKernel(k, "vectorized", group), 0, 1 << 30)
        expectNextSlabsCovered(prefetchedByTile(out, k, group), k)
        expectHintLoop(out, k, group)
      }),
      lawParams(60),
    )
  })

  it("a tail row beside the row loop (the row tile LoopPartition peels off) reads the same slab: the row loop, where most reads are, issues the hints, and they cover the next tile's slab", () => {
    fc.assert(
      fc.property(arbTiles, (k) => {
        const out = prefetchNextTiles(tileKernel(k, "vectorized", 1, "beside"), 0, 1 << 30)
        expectNextSlabsCovered(prefetchedByTile(out, k), k)
        expectHintLoop(out, k)
      }),
      lawParams(60),
    )
  })

  it("no hint where the buffer is within the threshold, two slabs exceed the L2, the reads are in no vector loop, the slab is read once a tile, the reads' loops share a serial loop but not the innermost, or the groups do not divide the loop", () => {
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
        // (reads in sibling serial loops that share a serial loop around them)
        const shared = tileKernel(k, "vectorized", 1, "inside")
        expect(prefetchNextTiles(shared, 0, 1 << 30)).toBe(shared)
        // (a group that does not divide the parallel loop: its last group would be short)
        const grouped = tileKernel(k, "vectorized", 3)
        const ragged: PrimFunc = { ...grouped, body: { ...(grouped.body as ForStmt), extent: c(k.tiles * 3 - 1) } }
        expect(prefetchNextTiles(ragged, 0, 1 << 30)).toBe(ragged)
      }),
      lawParams(40),
    )
  })
})

interface PlaneCase {
  readonly rows: number
  readonly tiles: number
  readonly cols: number
  readonly blocks: number
  readonly channelTiles: number
  readonly planes: number
}

const LINE = CACHE_LINE_BYTES / 4

/**
 * A projection's register tile over its input's planes, as the conv template lowers a 1×1 conv
 * with its channel tiles inside the image tiles: p parallel (rows), t serial (column tiles), o
 * serial (channel tiles: no move of x), i serial (input channel blocks, a plane apart), j serial
 * (a block's lanes: within a line), the columns and blocks unrolled, l vectorized (x broadcast):
 * out[…] += x[i·P + p·R + t·T + col·LINE + j] · w[…].
 */
const planeKernel = (k: PlaneCase): PrimFunc => {
  const T = k.cols * LINE
  const R = k.tiles * T
  const P = k.rows * R
  // (x with room past its planes: past the L1 and L2 the law's records give, w within them)
  const wElems = k.channelTiles * k.blocks * k.planes * LINE * 4
  const x: Buffer = { name: "x", dtype: "float32", shape: [k.planes * P + (1 << 16)], scope: "global" }
  const w: Buffer = { name: "w", dtype: "float32", shape: [wElems], scope: "global" }
  const out: Buffer = { name: "out", dtype: "float32", shape: [k.rows * k.tiles * k.channelTiles * k.blocks * k.cols * 4], scope: "global" }
  const [p, t, o, i, j, l] = ["p", "t", "o", "i", "j", "l"].map((n) => v(n))
  const stores: Stmt[] = []
  for (let b = 0; b < k.blocks; b++)
    for (let col = 0; col < k.cols; col++) {
      const at: Expr = add(mul(add(mul(add(mul(add(mul(p, c(k.tiles)), t), c(k.channelTiles)), o), c(k.blocks * k.cols)), c(b * k.cols + col)), c(4)), l)
      const xi: Expr = add(add(add(add(mul(i, c(P)), mul(p, c(R))), mul(t, c(T))), c(col * LINE)), j)
      const wi: Expr = add(mul(add(mul(add(mul(add(mul(o, c(k.blocks)), c(b)), c(k.planes)), i), c(LINE)), j), c(4)), l)
      stores.push(loopOf("l", 4, { kind: "store", buffer: "out", indices: [at], value: add(read("out", [at], "float32"), mul(read("x", [xi], "float32"), read("w", [wi], "float32"))) }, "vectorized"))
    }
  const body = loopOf("p", k.rows, loopOf("t", k.tiles, loopOf("o", k.channelTiles, loopOf("i", k.planes, loopOf("j", LINE, { kind: "seq", body: stores })))), "parallel")
  return { name: "planes", params: [x, w, out], body }
}

/** An L1 whose half holds two column tiles' lines of x (cols × planes lines each), exactly. */
const l1Holding = (k: PlaneCase): number => 4 * k.cols * k.planes * CACHE_LINE_BYTES

const arbPlanes: fc.Arbitrary<PlaneCase> = fc.record({
  rows: fc.integer({ min: 1, max: 3 }),
  tiles: fc.integer({ min: 2, max: 4 }),
  cols: fc.integer({ min: 1, max: 8 }),
  blocks: fc.integer({ min: 1, max: 2 }),
  channelTiles: fc.integer({ min: 1, max: 3 }),
  planes: fc.integer({ min: 2, max: 6 }),
})

describe("lowering.PrefetchNextTile: the next tile of a buffer read in tiles over its planes", () => {
  it("hints at the plane loop the lines the next column tile reads, inside the buffer, where each line is read at least MIN_REUSE times a tile and two tiles' lines fit half the L1; none where once, or with an L1 a byte smaller", () => {
    fc.assert(
      fc.property(arbPlanes, (k) => {
        const f = planeKernel(k)
        // (an L2 of w's size: only x streams from beyond it; an L1 whose half holds two column tiles' lines of x)
        const [l1, l2] = [l1Holding(k), f.params[1].shape[0] * 4]
        const g = prefetchNextTiles(f, l1, l2)
        expect(prefetchLoops(prefetchNextTiles(f, l1 - 1, l2).body)).toHaveLength(0)
        const reused = k.blocks * k.channelTiles >= MIN_REUSE
        const hinted = prefetchLoops(g.body)
        if (!reused) {
          expect(hinted).toHaveLength(0)
          return
        }
        expect(hinted.map((h) => h.var.name)).toEqual(["i"])
        const size = f.params[0].shape[0]
        const noRead = () => {
          throw new Error("a prefetch index reads a buffer")
        }
        for (let p = 0; p < k.rows; p++)
          for (let t = 0; t < k.tiles; t++) {
            const lines = new Set<number>()
            for (let o = 0; o < k.channelTiles; o++)
              for (let i = 0; i < k.planes; i++)
                for (const h of hinted[0].prefetch!) {
                  const e = evalExpr(h.index, new Map([["p", p], ["t", t], ["o", o], ["i", i]]), noRead)
                  expect(e >= 0 && e < size).toBe(true)
                  lines.add(Math.floor(e / LINE))
                }
            if (t === k.tiles - 1) continue
            // every line the next column tile reads
            for (let i = 0; i < k.planes; i++)
              for (let col = 0; col < k.cols; col++) {
                const e = i * k.rows * k.tiles * k.cols * LINE + p * k.tiles * k.cols * LINE + (t + 1) * k.cols * LINE + col * LINE
                expect(lines.has(Math.floor(e / LINE))).toBe(true)
              }
          }
      }),
      lawParams(60),
    )
  })

  it("no hint where the reads inside the plane loop do not start on a line, or the buffer is within the L2", () => {
    fc.assert(
      fc.property(arbPlanes, (k) => {
        const f = planeKernel({ ...k, blocks: 2 })
        expect(prefetchLoops(prefetchNextTiles(f, l1Holding(k), f.params[0].shape[0] * 4).body)).toHaveLength(0)
        // (the reads shifted by one element off their lines)
        const shift = (s: Stmt): Stmt =>
          s.kind === "for" ? { ...s, body: shift(s.body) } : s.kind === "seq" ? { ...s, body: s.body.map(shift) } : s.kind === "store" ? { ...s, value: mapExpr(s.value, (e) => (e.kind === "read" && e.source === "x" ? read("x", [add(e.indices[0], c(1))], "float32") : undefined)) } : s
        const off: PrimFunc = { ...f, params: [{ ...f.params[0], shape: [f.params[0].shape[0] + 1] }, ...f.params.slice(1)], body: shift(f.body) }
        expect(prefetchLoops(prefetchNextTiles(f, l1Holding(k), f.params[1].shape[0] * 4).body)).toHaveLength(1)
        expect(prefetchLoops(prefetchNextTiles(off, l1Holding(k), off.params[1].shape[0] * 4).body)).toHaveLength(0)
      }),
      lawParams(30),
    )
  })
})

interface DotCase {
  readonly tiles: number
  readonly group: number
  readonly ic: number
  readonly taps: number
  readonly blocks: number
}

/**
 * The channels-in-lanes int8 conv's dot as the c pipeline leaves it: p parallel over tiles × G
 * (a channel tile's G row tiles), i serial (input channel quads), t serial (taps), per output block
 * b one VNNI dot acc[16·b..] += x[(p mod G)·ic·4 + i·4 .. +4] · w[⌊p / G⌋·S + b·ic·taps·64 +
 * i·taps·64 + t·64 .. +64] (a [16×4] operand, strides 4 and 1; `flat`: w's region given one stride,
 * not the operand's two).
 */
const dotKernel = (k: DotCase, flat = false): PrimFunc => {
  const S = k.blocks * k.ic * k.taps * 64
  const x: Buffer = { name: "x", dtype: "uint8", shape: [k.group * k.ic * 4], scope: "global" }
  const w: Buffer = { name: "w", dtype: "int8", shape: [k.tiles * S], scope: "global" }
  const acc: Buffer = { name: "acc", dtype: "int32", shape: [k.blocks * 16], scope: "global" }
  const [p, i, t] = ["p", "i", "t"].map((n) => v(n))
  const tile = floordiv(p, c(k.group))
  const calls: Stmt[] = Array.from({ length: k.blocks }, (_, b) => ({
    kind: "intrinsic",
    intrin: vnniDot16x4,
    output: { buffer: "acc", base: [c(b * 16)], strides: [1] },
    inputs: [
      { buffer: "x", base: [add(mul(floormod(p, c(k.group)), c(k.ic * 4)), mul(i, c(4)))], strides: [1] },
      { buffer: "w", base: [add(add(add(mul(tile, c(S)), c(b * k.ic * k.taps * 64)), mul(i, c(k.taps * 64))), mul(t, c(64)))], strides: flat ? [1] : [k.ic * k.taps * 64, k.taps * 64, 4, 1] },
    ],
  }))
  const body = loopOf("p", k.tiles * k.group, loopOf("i", k.ic, loopOf("t", k.taps, calls.length === 1 ? calls[0] : { kind: "seq", body: calls })), "parallel")
  return { name: "dots", params: [x, w, acc], body }
}

const arbDots: fc.Arbitrary<DotCase> = fc.record({
  tiles: fc.integer({ min: 2, max: 5 }),
  group: fc.integer({ min: 2, max: 7 }),
  ic: fc.integer({ min: 1, max: 12 }),
  taps: fc.constantFrom(1, 9),
  blocks: fc.integer({ min: 1, max: 2 }),
})

describe("lowering.PrefetchNextTile: weights a tensor intrinsic reads (the VNNI dot)", () => {
  it("a group's prefetches lie inside w and cover every line of the next group's slab, the 64 bytes of each dot included; none where a group is one iteration or the operand is not one run", () => {
    fc.assert(
      fc.property(arbDots, (k) => {
        const S = k.blocks * k.ic * k.taps * 64
        const out = prefetchNextTiles(dotKernel(k), 0, 1 << 30)
        const hinted = prefetchLoops(out.body)
        expect(hinted).toHaveLength(1)
        const noRead = () => {
          throw new Error("a prefetch index reads a buffer")
        }
        const byGroup = new Map<number, Set<number>>()
        for (let p = 0; p < k.tiles * k.group; p++)
          for (let i = 0; i < k.ic; i++)
            for (let t = 0; t < k.taps; t++)
              for (const h of hinted[0].prefetch!) {
                const e = evalExpr(h.index, new Map([["p", p], ["i", i], ["t", t]]), noRead)
                expect(e >= 0 && e < k.tiles * S).toBe(true)
                const g = Math.floor(p / k.group)
                byGroup.set(g, (byGroup.get(g) ?? new Set()).add(Math.floor(e / 64)))
              }
        for (let g = 0; g + 1 < k.tiles; g++) for (let e = (g + 1) * S; e < (g + 2) * S; e += 64) expect(byGroup.get(g)!.has(Math.floor(e / 64))).toBe(true)
        const single = dotKernel({ ...k, group: 1 })
        expect(prefetchLoops(prefetchNextTiles(single, 0, 1 << 30).body)).toHaveLength(0)
        const flat = dotKernel(k, true)
        expect(prefetchNextTiles(flat, 0, 1 << 30)).toBe(flat)
      }),
      lawParams(60),
    )
  })
})
