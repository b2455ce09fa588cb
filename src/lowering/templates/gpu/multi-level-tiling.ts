// Multi-level tiling for reductions with data reuse (Ansor's and MetaSchedule's GPU sketch
// "SSSRRSRS"; TVM's conv2d_direct / dense CUDA schedules): each data axis of the output split in
// four — blockIdx / vthread / threadIdx / inner — the levels fused across axes and bound
// (blockIdx.x, vthread, threadIdx.x); the anchor's output tile computed at the thread loop in
// registers ("local": the anchor itself under an elementwise epilogue, else a cacheWrite copy), its
// reduction in two levels, outer then inner, outside the tile; every input of the anchor copied
// into shared memory at the outer reduction loop, fetched cooperatively (fused, split by the
// block's threads, bound to threadIdx.x, each thread's share `vec` contiguous elements, `vec` per
// input: a float4 where the emitter proves it, else coalesced scalars). Lowering puts a barrier
// before and after each fetch.
//
// The TIR form:
//   for[blockIdx.x] b:  for[vthread] v:  for[threadIdx.x] t:
//     allocate C.local[tile] @local
//     C.local[…] = identity …
//     for ro (the outer reduction loops):
//       barrier(); for o: for[threadIdx.x] t': for[vectorized] e: X.shared[…] = X[…] (guarded); barrier()
//       for ri (the inner reduction loops): for the tile (unrolled): C.local[…] = C.local[…] + X.shared[…] · W.shared[…]
//     for the tile: out[…] = epilogue(C.local[…])
// (the threadIdx.x loop of a fetch nested in the block's thread loop is that thread's own index;
// the shared buffers are allocated once for the kernel. A shared tile covers every thread and
// vthread of the block — bound inference relaxes both — so lowering.InjectVirtualThread keeps the
// fetch once a step and copies only the register tile's updates, interleaved: TVM's form.)
import * as S from "../../../ast/schedule/schedule.js"
import { freeVars, collect, type Expr } from "../../../ast/te/expr.js"
import { lowerSync } from "../../lower.js"
import type { PrimFunc, Stmt } from "../../../ast/tir/tir.js"
import type { DType } from "../../../ast/graph/dtype.js"
import { vectorCopy } from "../../../ast/tir/vector-access.js"
import { cudaTirPipeline } from "../../tir/cuda-pipeline.js"
import { runTirSync } from "../../tir/tir-pass.js"
import { anchorStage, dataLeaves, divisors } from "../common.js"
import { UNROLL_STEPS } from "../sketch.js"
import type { Config, Knob } from "../template.js"
import { vthreadCaps, type GpuLimits } from "./limits.js"
import { verifyGpuFunc } from "./verify.js"

/** Whether a reduction stage has data reuse: an input read free of some data axis longer than one (a weight shared by every position, a row by every column). */
export const hasReuse = (st: S.Stage): boolean => {
  const body = st.op.body
  if (body.kind !== "reduce" || st.op.axes.length < 2) return false
  const data = st.op.axes.filter((a) => a.dom.extent > 1).map((a) => a.var.name)
  const reads = collect(body.source, (x) => x.kind === "read") as Extract<Expr, { kind: "read" }>[]
  return reads.some((r) => {
    const used = new Set(r.indices.flatMap((i) => [...freeVars(i)]))
    return data.some((d) => !used.has(d))
  })
}

/** The stage the tiles are made of (the anchor's one elementwise epilogue, or the anchor), with the anchor's inputs cached in shared memory and its output tile in a local stage. */
export const prepare = (base: S.Schedule, anchor: string): { schedule: S.Schedule; out: string; local?: string; shared: string[] } => {
  let s = base
  const shared: string[] = []
  for (const name of [...new Set(s.stages.get(anchor)!.op.inputs.map((t) => t.name))]) {
    const r = S.cacheRead(s, name, "shared", [anchor])
    s = r.schedule
    shared.push(r.stage)
  }
  if (S.effectiveConsumers(s, anchor).length === 0) {
    const w = S.cacheWrite(s, anchor, "local")
    return { schedule: w.schedule, out: anchor, local: w.stage, shared }
  }
  const epilogue = epilogueOf(s, anchor)
  return epilogue ? { schedule: s, out: epilogue, local: anchor, shared } : { schedule: s, out: anchor, shared }
}

/** The anchor's one reader (through inlined stages) where the tiles can be made of it: at root, elementwise, of the anchor's shape, the anchor not an output. */
export const epilogueOf = (s: S.Schedule, anchor: string): string | undefined => {
  const readers = S.effectiveConsumers(s, anchor)
  if (readers.length !== 1 || s.outputs.some((o) => o.name === anchor)) return undefined
  const o = s.stages.get(readers[0])!
  return o.attach.kind === "root" && o.op.body.kind !== "reduce" && o.op.shape.join() === s.stages.get(anchor)!.op.shape.join() ? readers[0] : undefined
}

/** "v.t.i" triples of an extent: i divides it, t divides what is left, v (at most `vcap`: vthreadCaps) divides what is left of that. */
export const tileTriples = (extent: number, l: GpuLimits, vcap: number): string[] => {
  const out: string[] = []
  for (const i of divisors(extent, l.accumulators))
    for (const t of divisors(extent / i, l.maxThreads)) for (const v of divisors(extent / i / t, vcap)) out.push(`${v}.${t}.${i}`)
  return out
}

/**
 * Each axis split in four levels by its triple (vthread, thread, inner): outer (blockIdx) ·
 * vthread · thread · inner. Returns the schedule and the four levels' axes, in the axes' order.
 */
export const splitFourLevels = (s0: S.Schedule, stage: string, axes: readonly string[], triples: readonly (readonly [number, number, number])[]): { schedule: S.Schedule; levels: string[][] } => {
  let s = s0
  const levels: string[][] = [[], [], [], []]
  axes.forEach((a, i) => {
    const [v, t, inner] = triples[i]
    const si = S.split(s, stage, a, { factor: inner })
    const st = S.split(si.schedule, stage, si.outer, { factor: t })
    const sv = S.split(st.schedule, stage, st.outer, { factor: v })
    s = sv.schedule
    levels[0].push(sv.outer)
    levels[1].push(sv.inner)
    levels[2].push(st.inner)
    levels[3].push(si.inner)
  })
  return { schedule: s, levels }
}

export const parseTriple = (x: unknown): [number, number, number] => {
  const [v, t, i] = String(x).split(".").map(Number)
  return [v || 1, t || 1, i || 1]
}

/** The knobs of the tiling of `anchor` in `base`: a triple per data axis of the tiled stage, an inner factor per reduce axis, unroll and fetch width. */
export const tilingKnobs = (base: S.Schedule, anchor: string, l: GpuLimits): Knob[] => {
  const st = base.stages.get(anchor)!
  const data = st.op.axes.map((a) => a.dom.extent)
  const red = st.op.body.kind === "reduce" ? st.op.body.axes.map((a) => a.dom.extent) : []
  const vcaps = vthreadCaps(data, l.maxVthreads)
  return [
    ...data.map((e, i): Knob => ({ kind: "choice", name: `mt_s${i}`, extent: e, levels: 3, candidates: tileTriples(e, l, vcaps[i]) })),
    ...red.map((e, j): Knob => ({ kind: "choice", name: `mt_r${j}`, extent: e, candidates: divisors(e, 64) })),
    { kind: "choice", name: "mt_unroll", candidates: [...UNROLL_STEPS] },
    ...sharedInputs(st).map((_, k): Knob => ({ kind: "choice", name: vecKnob(k), candidates: [1, 2, 4] })),
  ]
}

/** The anchor's distinct inputs, each cached in shared memory (prepare's order). */
const sharedInputs = (st: S.Stage): string[] => [...new Set(st.op.inputs.map((t) => t.name))]

/** The knob of the k-th shared input's fetch width (elements a thread copies as one vector). */
export const vecKnob = (k: number): string => `mt_vec${k}`

/** The tiled schedule of a config. */
export const applyTiling = (base: S.Schedule, anchor: string, config: Config): S.Schedule => {
  const p = prepare(base, anchor)
  let s = p.schedule
  const out = p.out
  const ost = s.stages.get(out)!
  const data = dataLeaves(ost)
  const triples = data.map((_, i) => parseTriple(config[`mt_s${i}`] ?? "1.1.1"))
  const split = splitFourLevels(s, out, data, triples)
  s = split.schedule
  const levels = split.levels
  // (a tiled anchor without a local stage keeps its reduction inside its tile: its init then runs in the thread)
  const reds = s.stages.get(out)!.leaf.filter((a) => s.stages.get(out)!.axes.get(a)!.type === "reduce")
  s = S.reorder(s, out, [...levels[0], ...levels[1], ...levels[2], ...levels[3], ...reds])
  const fuseAll = (axes: readonly string[]): string => {
    let cur = axes[0]
    for (const next of axes.slice(1)) {
      const f = S.fuse(s, out, cur, next)
      s = f.schedule
      cur = f.fused
    }
    return cur
  }
  const bx = fuseAll(levels[0])
  const vt = fuseAll(levels[1])
  const tx = fuseAll(levels[2])
  s = S.bind(s, out, bx, "blockIdx.x")
  if (s.stages.get(out)!.axes.get(vt)!.extent > 1) s = S.bind(s, out, vt, "vthread")
  s = S.bind(s, out, tx, "threadIdx.x")
  const threads = s.stages.get(out)!.axes.get(tx)!.extent
  // the reduction: in the local stage at the thread loop, or in the output stage itself
  const rstage = p.local ?? out
  if (p.local) s = S.computeAt(s, p.local, out, tx)
  const rst = s.stages.get(rstage)!
  const rdata = dataLeaves(rst)
  const rred = rst.leaf.filter((a) => rst.axes.get(a)!.type === "reduce")
  const ro: string[] = []
  const ri: string[] = []
  rred.forEach((a, j) => {
    const sp = S.split(s, rstage, a, { factor: Number(config[`mt_r${j}`] ?? 1) })
    s = sp.schedule
    ro.push(sp.outer)
    ri.push(sp.inner)
  })
  s = S.reorder(s, rstage, p.local ? [...ro, ...ri, ...rdata] : [...ro, ...ri])
  // the register tile's loops unrolled up to the step (innermost first)
  const step = Number(config.mt_unroll ?? 0)
  let product = 1
  for (const a of p.local ? [...s.stages.get(rstage)!.leaf].reverse() : []) {
    const ax = s.stages.get(rstage)!.axes.get(a)!
    if (ax.type !== "data" || s.stages.get(rstage)!.annotations.has(a) || product * ax.extent > step) break
    product *= ax.extent
    if (ax.extent > 1) s = S.unroll(s, rstage, a)
  }
  // cooperative fetches at the outer reduction loop, each shared input at its own width
  for (const [k, sh] of p.shared.entries()) {
    const vec = Number(config[vecKnob(k)] ?? 1)
    s = S.computeAt(s, sh, rstage, ro[ro.length - 1])
    const leaf = s.stages.get(sh)!.leaf
    let cur = leaf[0]
    for (const next of leaf.slice(1)) {
      const f = S.fuse(s, sh, cur, next)
      s = f.schedule
      cur = f.fused
    }
    const sv = S.split(s, sh, cur, { factor: vec })
    const stt = S.split(sv.schedule, sh, sv.outer, { factor: threads })
    s = S.bind(stt.schedule, sh, stt.inner, "threadIdx.x")
    if (vec > 1) s = S.vectorize(s, sh, sv.inner)
  }
  return s
}

const blocksOf = (exts: readonly number[], t: readonly number[], i: readonly number[]) => exts.reduce((p, e, k) => p * Math.ceil(e / (t[k] * i[k])), 1)

/**
 * Defaults from the limits: threads first to the innermost axes (a warp's neighbours read
 * neighbouring elements) up to the block's default; then the register tile, outermost axes first
 * (an output channel's tile reuses each input element across channels), up to the accumulators a
 * thread holds, while the grid still fills every SM (or has the blocks it could have); no
 * vthreads; the inner reduction factor the largest (≤ 16 a first axis, the whole of the others)
 * whose shared tiles fit half the block's shared memory — else the others one step, else also one
 * output a thread, else fewer threads on the innermost axes; the tile's loops unrolled; fetches of the
 * widest vector (4, 2, 1) that divides every shared tile's rows.
 */
export const tilingDefaults = (base: S.Schedule, anchor: string, knobs: readonly Knob[], l: GpuLimits): Config => {
  const st = base.stages.get(anchor)!
  const exts = st.op.axes.map((a) => a.dom.extent)
  const n = exts.length
  const t = exts.map(() => 1)
  const i = exts.map(() => 1)
  let budget = l.blockThreads
  for (let k = n - 1; k >= 0; k--) {
    t[k] = [...divisors(exts[k], l.maxThreads)].reverse().find((d) => d <= budget) ?? 1
    budget = Math.floor(budget / t[k])
  }
  const outputs = exts.reduce((a, b) => a * b, 1)
  const threads = t.reduce((a, b) => a * b, 1)
  const wantBlocks = Math.min(l.sms, Math.ceil(outputs / threads))
  let acc = l.accumulators
  for (let k = 0; k < n; k++) {
    for (const d of [...divisors(exts[k] / t[k], acc)].reverse()) {
      const next = [...i]
      next[k] = d
      if (blocksOf(exts, t, next) >= wantBlocks) {
        i[k] = d
        break
      }
    }
    acc = Math.floor(acc / i[k])
  }
  const config: Record<string, string | number | boolean> = { mt_unroll: UNROLL_STEPS.find((x) => x >= l.accumulators) ?? UNROLL_STEPS[UNROLL_STEPS.length - 1] }
  sharedInputs(st).forEach((_, k) => (config[vecKnob(k)] = 1))
  exts.forEach((_, k) => (config[`mt_s${k}`] = `1.${t[k]}.${i[k]}`))
  const red = knobs.filter((k) => k.name.startsWith("mt_r"))
  const first = red.length ? (red[0].candidates as number[]) : []
  const withFirst = (f: number, others: "whole" | "one", from: Config = config) => {
    const c = { ...from }
    red.forEach((k, j) => (c[k.name] = j === 0 ? f : others === "whole" ? ((k.kind === "choice" ? k.extent : undefined) ?? 1) : 1))
    return c
  }
  // one output a thread, with `tt` threads an axis
  const single = (tt: readonly number[]): Config => ({ ...config, ...Object.fromEntries(exts.map((_, k) => [`mt_s${k}`, `1.${tt[k]}.1`])) })
  const firsts = [...first].reverse().filter((x) => x <= 16)
  // the first that fits: the other reduction axes whole, then one step each (a patch embedding's
  // 16×16 window whole needs 200 KiB), then one output a thread, then fewer threads on the
  // innermost axes, one divisor at a time (a block of 14×14 outputs at stride 16 reads a 224×224
  // input tile, whatever the reduction's step)
  const shrunk: number[][] = []
  for (let tt = [...t]; ; ) {
    const k = [...tt.keys()].reverse().find((j) => tt[j] > 1)
    if (k === undefined) break
    tt = tt.map((x, j) => (j === k ? (divisors(exts[j], x - 1).at(-1) ?? 1) : x))
    shrunk.push(tt)
  }
  const tries = [
    ...firsts.map((f) => withFirst(f, "whole")),
    ...(red.length > 1 ? firsts.map((f) => withFirst(f, "one")) : []),
    ...[t, ...shrunk].flatMap((tt) => firsts.map((f) => withFirst(f, "one", single(tt)))),
  ]
  for (const c of tries) {
    const func = lowerSync(applyTiling(base, anchor, c))
    const v = verifyGpuFunc(func, l)
    if (v.kernels.every((kk) => kk.sharedBytes <= l.sharedBytes / 2)) return fetchWidths(base, anchor, c, func, l)
  }
  return withFirst(1, "one", single(t))
}

/**
 * Each shared input's fetch width: the widest vector (4, 2 elements, within the record's
 * maxVectorBytes) that divides its shared tile's rows and whose copies the emitter proves aligned
 * and contiguous (src/ast/tir/vector-access.ts, on the cuda TIR pipeline's output: every vectorized
 * loop of the fetch one float4 / float2 load and store); else 1 — scalar loads, consecutive threads
 * reading consecutive elements (coalesced). One width for the whole kernel (the last dim's of every
 * tile, or the innermost dim longer than 1) split the fetches whose alignment could not be proven
 * into chunks of 4 a thread: scalar loads 4 apart across a warp, MobileNetV2 on an H200 0.91 ms
 * against 0.57 ms (docs/cuda.md). Per buffer, a conv's weights can go as float4 while its input's
 * halo rows stay coalesced scalars.
 */
const fetchWidths = (base: S.Schedule, anchor: string, c: Config, f0: PrimFunc, l: GpuLimits): Config => {
  // (a stage's buffer is named after it: `p0.shared` → `p0.shared.local`)
  const ofStage = (stage: string) => (buffer: string) => buffer === stage || buffer.startsWith(`${stage}.`)
  const stages = prepare(base, anchor).shared
  const allocated: { name: string; row: number }[] = []
  let b = f0.body
  while (b.kind === "allocate") {
    if (b.buffer.scope === "shared") allocated.push({ name: b.buffer.name, row: b.buffer.shape[b.buffer.shape.length - 1] })
    b = b.body
  }
  const shared = stages.map((st) => allocated.find((a) => ofStage(st)(a.name))?.name ?? st)
  const rows = new Map(allocated.map((a) => [a.name, a.row] as const))
  const halve = (w: number, row: number) => [w / 2, 1].find((x) => x === 1 || (Number.isInteger(x) && row % x === 0)) ?? 1
  let widths = shared.map((name) => [4, 2].find((w) => w <= l.vectorLanes && (rows.get(name) ?? 1) % w === 0) ?? 1)
  const withWidths = (ws: readonly number[]): Config => ({ ...c, ...Object.fromEntries(ws.map((w, k) => [vecKnob(k), w])) })
  // (at most two narrowings: 4 → 2 → 1)
  for (let round = 0; round < 3 && widths.some((w) => w > 1); round++) {
    const f = runTirSync(cudaTirPipeline(l.record), lowerSync(applyTiling(base, anchor, withWidths(widths))))
    const proven = provenFetches(f, l.record.maxVectorBytes)
    if (widths.every((w, k) => w === 1 || proven.get(shared[k]) === true)) break
    widths = widths.map((w, k) => (w === 1 || proven.get(shared[k]) === true ? w : halve(w, rows.get(shared[k]) ?? 1)))
  }
  return withWidths(widths)
}

/**
 * Per buffer stored to by a vectorized loop (a fetch into shared memory): whether every such loop
 * is one vector access the emitter proves (vectorCopy). A fetch whose vectorized loop the pipeline
 * turned serial or whose guard stayed inside its lanes is not in the map, or false.
 */
export const provenFetches = (f: PrimFunc, maxVectorBytes: number): Map<string, boolean> => {
  const dtypes = new Map<string, DType>(f.params.map((p) => [p.name, p.dtype]))
  const visit = (st: Stmt): void => {
    if (st.kind === "allocate") dtypes.set(st.buffer.name, st.buffer.dtype)
    forEachChild(st, visit)
  }
  visit(f.body)
  const out = new Map<string, boolean>()
  const walk = (st: Stmt): void => {
    if (st.kind === "for" && st.forKind === "vectorized") {
      const copy = vectorCopy(st, (name) => dtypes.get(name), maxVectorBytes)
      for (const dst of storedBuffers(st.body)) out.set(dst, copy !== undefined && copy.dst === dst && out.get(dst) !== false)
      return
    }
    forEachChild(st, walk)
  }
  walk(f.body)
  return out
}

const forEachChild = (s: Stmt, f: (child: Stmt) => void): void => {
  if (s.kind === "for" || s.kind === "allocate" || s.kind === "let") f(s.body)
  else if (s.kind === "seq") s.body.forEach(f)
  else if (s.kind === "if") {
    f(s.then)
    if (s.else) f(s.else)
  }
}

const storedBuffers = (st: Stmt): string[] => {
  const out: string[] = []
  const walk = (s: Stmt): void => {
    if (s.kind === "store") out.push(s.buffer)
    forEachChild(s, walk)
  }
  walk(st)
  return out
}

/** The anchor the tiling rule takes in a group's base schedule, if any: a reduction with data reuse and enough outputs. */
export const tilingAnchor = (base: S.Schedule): string | undefined => anchorStage(base)?.name
