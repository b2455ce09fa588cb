// The reduction template (matmul, dense, pooling, NCHW convolution, any reduction without a
// template of its own): register tiling over the innermost data axes, the reduction outside the
// tile; with an elementwise epilogue, the anchor computed at the epilogue's tile.
import { BYTES, isInteger, type DType } from "../../ast/graph/dtype.js"
import * as S from "../../ast/schedule/schedule.js"
import { collect } from "../../ast/te/expr.js"
import { anchorStage, dataLeaves, divisors, parallelize, parallelOuter, tileStages } from "./common.js"
import { applyRfactor, rfactorDefaults, rfactorKnobs } from "./rfactor.js"
import type { Config, ScheduleTarget, Template } from "./template.js"

/**
 * Elements of a type in one float32 lane: 4 for an 8-bit integer, 2 for a 16-bit one, else 1 — a
 * float16 / bfloat16 is computed as float on every CPU target, a wider type is left as it was.
 */
export const lanesPerFloat32 = (dtype: DType): number => (isInteger(dtype) && BYTES[dtype] < 4 ? 4 / BYTES[dtype] : 1)

/**
 * The widest `tile_inner` the defaults take outside one-row reductions: a vector of the anchor's
 * type — the target's lanes times its elements per float32 lane (`perLane`) where the C compiler
 * vectorizes the loops itself and keeps an 8-bit value in an 8-bit lane (gcc: ResNet-18 int8's
 * MaxPool rows, 56 bytes, one loop of byte lanes instead of four of 14, 0.21 → 0.10 ms on a Zen 5);
 * the target's lanes where the emitter's own vectors compute every integer in a 32-bit lane (js,
 * wasm: `outerLoopVectorizer` false).
 */
export const tileLanes = (knob: { readonly perLane?: number }, target: ScheduleTarget): number => {
  const lanes = Math.max(target.vectorLanes, 1)
  return lanes > 1 && target.outerLoopVectorizer !== false ? lanes * (knob.perLane ?? 1) : lanes
}

/** The widest column tile of a one-row reduction (2 KB of float32 accumulators). */
const ONE_ROW_MAX_TILE = 512

/**
 * The reduction template (conv, matmul, pooling, blocked conv): the innermost data axis split by
 * `tile_inner` and moved inside the reduction (register tiling over output width / columns),
 * the reduce axes in order, the outer data axes parallel, the innermost vectorized.
 */
export const reductionTemplate: Template = {
  name: "reduction",
  tunable: true,
  space: (_outputs, base) => {
    const st = anchorStage(base)
    if (!st) return []
    const data = dataLeaves(st)
    const inner = st.axes.get(data[data.length - 1])!.extent
    const second = data.length >= 2 ? st.axes.get(data[data.length - 2])!.extent : 1
    const perLane = lanesPerFloat32(st.op.dtype)
    // one output row (a matrix-vector product): column tiles up to 512 wide, whose accumulators
    // stay in L1 while each weight row's stretch is read in order
    return [
      { kind: "split", name: "tile_inner", extent: inner, candidates: divisors(inner, second === 1 ? ONE_ROW_MAX_TILE : 64), ...(perLane > 1 ? { perLane } : {}) },
      { kind: "split", name: "tile_second", extent: second, candidates: divisors(second, 16) },
      { kind: "choice", name: "vectorize", candidates: [true, false] },
      { kind: "choice", name: "unroll_tile", candidates: [true, false] },
      { kind: "choice", name: "fuse_epilogue", candidates: [true, false] },
      // one output row (a matrix-vector product): the rfactor rule's knobs, for few outputs
      ...(second === 1 ? rfactorKnobs(st) : []),
    ]
  },
  defaults: (knobs, target) => {
    const cfg: Record<string, string | number | boolean> = {}
    const lanes = Math.max(target.vectorLanes, 1)
    // one output row (a batch-1 dense layer, a matrix-vector product). With 8 or 16 lanes (the c
    // target): the widest column tile up to 256 that leaves two tiles per core, its accumulators
    // in L1 while the weights stream past in order (MobileNetV2's 1280 -> 1000 classifier, weights
    // out of cache, AVX-512, 1 thread: 0.225 ms at 10 columns, 0.095 at 40, 0.071 at 250). Else up
    // to 6 vectors of columns, so each weight row's cache line is read whole and 5-6 FMA chains
    // overlap (timed alone: 0.18 ms at one vector, 0.12 at five).
    const second = knobs.find((k) => k.name === "tile_second")
    const oneRow = second?.kind === "split" && second.extent === 1
    for (const k of knobs) {
      if (k.kind === "split" && k.name === "tile_inner") {
        const streaming = oneRow && lanes >= 8 ? [...k.candidates].reverse().find((d) => d > 64 && d <= 256 && k.extent / d >= 2 * target.cores) : undefined
        const wide = oneRow && lanes > 1 ? [...k.candidates].reverse().find((d) => d % lanes === 0 && d <= 6 * lanes) : undefined
        cfg[k.name] = streaming ?? wide ?? [...k.candidates].reverse().find((d) => d <= tileLanes(k, target)) ?? 1
      }
      else if (k.kind === "split") {
        // register rows: up to 4, or up to 8 where nothing in 2..4 divides the axis (7 wide: 7)
        const four = [...k.candidates].reverse().find((d) => d <= 4) ?? 1
        cfg[k.name] = four > 1 ? four : ([...k.candidates].reverse().find((d) => d <= 8) ?? 1)
      }
      else cfg[k.name] = k.name === "vectorize" ? target.vectorLanes > 1 : k.name === "fuse_epilogue" || k.name === "unroll_tile"
    }
    // (a vector of outputs along the last axis: the emitter does not vectorize the reduce loop)
    return { ...cfg, ...rfactorDefaults(knobs, target, false) }
  },
  apply: (_outputs, base, config) => {
    const st = anchorStage(base)
    if (!st) return base
    const rf = applyRfactor(base, st.name, config, !!config.vectorize, false)
    if (rf) return rf
    if (config.fuse_epilogue) {
      const fused = fusedEpilogue(base, st, config)
      if (fused) return fused
    }
    let s = base
    const data = dataLeaves(st)
    const red = st.leaf.filter((a) => st.axes.get(a)!.type === "reduce")
    const lastData = data[data.length - 1]
    const ti = Number(config.tile_inner ?? 1)
    const t2 = Number(config.tile_second ?? 1)
    const sp = S.split(s, st.name, lastData, { factor: ti })
    s = sp.schedule
    let outerData = [...data.slice(0, -1), sp.outer]
    let innerTile = [sp.inner]
    if (data.length >= 2 && t2 > 1) {
      const sp2 = S.split(s, st.name, data[data.length - 2], { factor: t2 })
      s = sp2.schedule
      outerData = [...data.slice(0, -2), sp2.outer, sp.outer]
      innerTile = [sp2.inner, sp.inner]
    }
    s = S.reorder(s, st.name, [...outerData, ...red, ...innerTile])
    s = parallelOuter(s, st.name, outerData)
    if (config.vectorize && ti > 1 && ti <= S.MAX_VECTORIZED) s = S.vectorize(s, st.name, sp.inner)
    if (config.unroll_tile && innerTile.length === 2) s = S.unroll(s, st.name, innerTile[0])
    return parallelize(s, !!config.vectorize, st.name)
  },
}

/**
 * TVM's CPU convolution schedule: the output (the epilogue stage, or a copy of the anchor through
 * cacheWrite when the anchor is the output) is tiled — the innermost data axis by `tile_inner`
 * (vector lanes), the next by `tile_second` (register rows) — and the anchor is computed at the
 * tile, its reduction outside its tile loops: the partial sums stay in a small local buffer.
 */
const fusedEpilogue = (base: S.Schedule, anchor: S.Stage, config: Config): S.Schedule | undefined => {
  const tiled = tileStages(base, anchor)
  if (!tiled) return undefined
  let s = tiled.schedule
  const { out, local } = tiled
  const os = s.stages.get(out)!
  const data = dataLeaves(os)
  if (data.length !== os.leaf.length || data.length < 2) return undefined
  const ti = Number(config.tile_inner ?? 1)
  const t2 = Number(config.tile_second ?? 1)
  const sp = S.split(s, out, data[data.length - 1], { factor: ti })
  const sp2 = S.split(sp.schedule, out, data[data.length - 2], { factor: t2 })
  s = S.reorder(sp2.schedule, out, [...data.slice(0, -2), sp2.outer, sp.outer, sp2.inner, sp.inner])
  // batch-1 dense layers (one output row): the column tiles are the parallel loop
  const outerAxes = [...data.slice(0, -2), sp2.outer]
  const extentOf = (a: string) => s.stages.get(out)!.axes.get(a)!.extent
  s = outerAxes.every((a) => extentOf(a) === 1) && extentOf(sp.outer) > 1 ? S.parallel(s, out, sp.outer) : parallelOuter(s, out, outerAxes)
  if (config.vectorize && ti > 1 && ti <= S.MAX_VECTORIZED) s = S.vectorize(s, out, sp.inner)
  s = S.computeAt(s, local, out, sp.outer)
  // the anchor inside the tile: reduction outside, the tile's data loops inside (accumulators)
  const ls = s.stages.get(local)!
  const lred = ls.leaf.filter((a) => ls.axes.get(a)!.type === "reduce")
  const ldata = dataLeaves(ls)
  s = S.reorder(s, local, [...lred, ...ldata])
  // (the schedule checks the axis's full extent, though the region it covers in the tile is tile_inner long)
  if (config.vectorize && ti > 1 && ls.axes.get(ldata[ldata.length - 1])!.extent <= S.MAX_VECTORIZED) s = S.vectorize(s, local, ldata[ldata.length - 1])
  if (config.unroll_tile && t2 > 1 && ldata.length >= 2) s = S.unroll(s, local, ldata[ldata.length - 2])
  return parallelize(s, !!config.vectorize, out)
}

/**
 * A reduction along its inputs' innermost dimension (innerReduction): the reduce loop innermost
 * (the emitter sums it in a vector register), the outer data loops parallel — no register tile
 * across rows, whose loads would stride a whole row apart.
 */
export const innerReductionTemplate: Template = {
  name: "inner-reduction",
  tunable: false,
  // the rfactor rule's knobs: partials where the outputs leave cores or FMA chains idle
  space: (_outputs, base) => {
    const st = anchorStage(base)
    return st ? rfactorKnobs(st) : []
  },
  // (the emitter sums the reduce loop in a vector: each output already fills the lanes)
  defaults: (knobs, target) => rfactorDefaults(knobs, target, true),
  apply: (_outputs, base, config) => {
    const st = anchorStage(base)
    return (st && applyRfactor(base, st.name, config, true, true)) ?? rowLocal(base) ?? parallelize(base, true)
  },
}

/**
 * A row's statistics and the values both they and the output read, computed at the output's row
 * (TVM's x86 softmax schedule): an inlined stage that calls a function (a softmax's exp) and is
 * read by several stages — computed once into a row-local buffer instead of once a reader — and
 * every stage at root computed at the output's row loop, the union of its readers' rows there
 * (computeAt with several consumers); a stage its one reader computes there, at that reader's row.
 * ViT-B/16's softmax over [12, 197, 197], AVX-512: the exp once instead of twice, the same bits.
 * Undefined where the group has no such stage, or a stage cannot be computed at the row.
 */
const rowLocal = (base: S.Schedule): S.Schedule | undefined => {
  if (base.outputs.length !== 1) return undefined
  const out = base.outputs[0].name
  const shared = base.order.filter((n) => {
    const st = base.stages.get(n)!
    return st.attach.kind === "inline" && st.op.body.kind !== "reduce" && collect(st.op.body, (e) => e.kind === "call").length > 0 && S.effectiveConsumers(base, n).length > 1
  })
  if (!shared.length) return undefined
  try {
    let s = shared.reduce((acc, n) => S.computeRoot(acc, n), base)
    s = parallelize(s, true, s.order.filter((n) => n !== out))
    const leaf = s.stages.get(out)!.leaf
    if (leaf.length < 2) return undefined
    const row = leaf[leaf.length - 2]
    for (const n of [...s.order].reverse()) {
      const st = s.stages.get(n)!
      if (n === out || st.attach.kind !== "root") continue
      const readers = S.effectiveConsumers(s, n)
      const host = readers.length === 1 && readers[0] !== out ? s.stages.get(readers[0])! : undefined
      s = host && host.attach.kind === "at" ? S.computeAt(s, n, host.name, host.leaf[Math.max(host.leaf.length - 2, 0)]) : S.computeAt(s, n, out, row)
    }
    return s
  } catch (e) {
    if (e instanceof S.ScheduleError) return undefined
    throw e
  }
}
