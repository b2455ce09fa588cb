// The conv2d schedule's TIR: what TVM's conv2d_packed schedule lowers to before VTA's passes — the
// layer's TE (src/lowering/vta/conv2d.ts: data [CI][H][W][1][BI], kernel [CO][CI][KH][KW][BO][BI],
// out [CO][OH][OW][1][BO]) under the knobs of a VtaConv2dSchedule:
//   - output tiles of tileCo channel blocks × tileOh rows × all columns, walked in `order`;
//   - the tile axis split by the virtual threads and its inner part bound to `vthread` (TVM binds
//     it to `cthread`): tile t = to·V + vt;
//   - the reduction over input channel blocks split into steps of tileCi (the outer part a loop);
//   - cacheRead of the data (with its padding: the pad stage inlined, a `valid` guard) into the
//     inp scope and of the kernel into the wgt scope, at the reduction step; the bias (a graph's
//     conv) into the acc scope at the tile;
//   - the conv computed in the acc scope (its init a GEMM reset), its innermost 1×BI · BI×BO
//     tensorized onto the GEMM intrinsic (src/ast/vta/intrinsic.ts: one `gemm` statement an
//     element), the loops above it in the order oh, ow, co, ci, kh, kw;
//   - the requantize epilogue (+ bias, floor-divide by 2^shift, clip to [clipLo, 127]) computed in
//     the acc scope — one elementwise statement an element, the ALU marking is pass 2's matching —
//     and the output written back (a copy into DRAM) — with virtual threads in chunks of output
//     rows or channel blocks, each chunk's epilogue then its copy (epilogueChunkOf).
// Every scope allocation lives inside the vthread loop — each virtual thread its own — but the
// stationary buffer of a one-step tile, which the threads share.
import { add, and, c, eq, floordiv, floormod, ge, lt, max, min, mul, read, sub, substitute, v, type Expr } from "../../../ast/te/expr.js"
import type { VtaDerived } from "../../../ast/vta/config.js"
import { epilogueChunkOf, outSize, VtaScheduleError, type VtaConv2d, type VtaConv2dSchedule } from "../conv2d-layer.js"
import { mapDeep, vseq, type Ref, type VFunc, type VStmt } from "./ir.js"

const need = (ok: boolean, reason: string): void => {
  if (!ok) throw new VtaScheduleError({ reason })
}

/** The statement with a loop variable fixed (a load hoisted out of its one-iteration loop). */
const subst = (s: VStmt, name: string, value: number): VStmt => mapDeep(s, (e) => substitute(e, new Map([[name, c(value)]])), (r) => r)

const loop = (name: string, extent: Expr | number, body: VStmt): VStmt => ({ kind: "for", var: name, extent: typeof extent === "number" ? c(extent) : extent, body })
const nest = (loops: readonly (readonly [string, Expr | number])[], body: VStmt): VStmt => loops.reduceRight<VStmt>((acc, [n, e]) => loop(n, e, acc), body)

/** The schedule's TIR for the layer (knobs as lowerConv2d takes them). */
export const scheduleConv2dTir = (d: VtaDerived, x: VtaConv2d, s: VtaConv2dSchedule): VFunc => {
  const { oh: OH, ow: OW } = outSize(x)
  const V = s.vthreads
  const tileCi = s.tileCi ?? x.ci
  need(d.batch === 1, "the conv2d schedule is written for BATCH 1")
  need(Number.isInteger(V) && V >= 1 && V <= 4, `vthreads ${V} is not in 1..4`)
  need(x.co % s.tileCo === 0, `tileCo ${s.tileCo} does not divide ${x.co} output channel blocks`)
  need(x.ci % tileCi === 0, `tileCi ${tileCi} does not divide ${x.ci} input channel blocks`)
  need(s.tileOh >= 1 && s.tileOh <= OH, `tileOh ${s.tileOh} is not in [1, ${OH}]`)
  const order = s.order ?? "co-oh"
  const colsIn = x.w + 2 * x.pad
  // a 1×1 kernel with a stride and no padding skips rows: its windows touch input rows oh·stride
  // only, so only those are loaded (one 2-D LOAD an input block, its DRAM row step the stride's
  // rows), one SRAM row an output row; other kernels load every row of the window (with padding
  // the rows' guard would be ±stride·y, which no LOAD's pads express)
  const skipRows = x.kh === 1 && x.stride > 1 && x.pad === 0
  const rowsMax = skipRows ? s.tileOh : (s.tileOh - 1) * x.stride + x.kh
  const ohTiles = Math.ceil(OH / s.tileOh)
  const coTiles = x.co / s.tileCo
  const T = ohTiles * coTiles
  const nci = x.ci / tileCi
  const accElems = s.tileCo * s.tileOh * OW

  // The buffer the outer tile loop walks is stationary when a tile is one reduction step (TVM's
  // cacheRead at the outer axis): the weights under "co-oh", the input rows under "oh-co", loaded
  // once an outer index, outside the vthread loop, shared by the threads, which split the inner
  // tile axis. Otherwise the threads split the tiles in order: tile t = to·V + vt.
  const stationary = nci === 1 ? (order === "co-oh" ? "wgt" : "inp") : undefined
  const inner = order === "co-oh" ? ohTiles : coTiles
  const t = stationary ? add(mul(v("o"), c(inner)), add(mul(v("io"), c(V)), v("vt"))) : add(mul(v("to"), c(V)), v("vt"))
  const innerIdx = add(mul(v("io"), c(V)), v("vt"))
  const cot = stationary ? (order === "co-oh" ? v("o") : innerIdx) : order === "co-oh" ? floordiv(t, c(ohTiles)) : floormod(t, c(coTiles))
  const oht = stationary ? (order === "co-oh" ? innerIdx : v("o")) : order === "co-oh" ? floormod(t, c(ohTiles)) : floordiv(t, c(coTiles))
  const oh0 = mul(oht, c(s.tileOh))
  const th = min(c(s.tileOh), sub(c(OH), oh0))
  const y0 = sub(mul(oh0, c(x.stride)), c(x.pad))
  const ty = skipRows ? th : add(mul(sub(th, c(1)), c(x.stride)), c(x.kh))
  const [co, ci, kh, kw, oh, ow, k, y, xx] = ["co", "ci", "kh", "kw", "oh", "ow", "k", "y", "x"].map((n) => v(n))
  const accIdx = add(add(mul(co, c(s.tileOh * OW)), mul(oh, c(OW))), ow)
  const wgtIdx = add(mul(add(mul(add(mul(co, c(tileCi)), ci), c(x.kh)), kh), c(x.kw)), kw)

  const reset = nest([["co", s.tileCo], ["oh", th], ["ow", OW]], { kind: "gemm", reset: true, acc: { buf: "acc_tile", idx: accIdx } })
  // the input window of step k: one channel block after another, rows y0 .. y0+ty (every stride-th
  // one where rows are skipped), all padded columns
  const yy = add(y0, skipRows ? mul(y, c(x.stride)) : y)
  const xs = sub(xx, c(x.pad))
  const valid = x.pad > 0 ? and(and(ge(yy, c(0)), lt(yy, c(x.h))), and(ge(xs, c(0)), lt(xs, c(x.w)))) : undefined
  const loadInp = nest([["ci", tileCi], ["y", ty], ["x", colsIn]], {
    kind: "copy",
    dst: { buf: "inp_tile", idx: add(add(mul(ci, c(rowsMax * colsIn)), mul(y, c(colsIn))), xx) },
    src: { buf: "data", idx: add(mul(add(mul(add(mul(k, c(tileCi)), ci), c(x.h)), yy), c(x.w)), xs) },
    ...(valid ? { valid } : {}),
  })
  const loadWgt = nest([["co", s.tileCo], ["ci", tileCi], ["kh", x.kh], ["kw", x.kw]], {
    kind: "copy",
    dst: { buf: "wgt_tile", idx: wgtIdx },
    src: { buf: "kernel", idx: add(mul(add(mul(add(mul(add(mul(cot, c(s.tileCo)), co), c(x.ci)), add(mul(k, c(tileCi)), ci)), c(x.kh)), kh), c(x.kw)), kw) },
  })
  const conv = nest([["oh", th], ["ow", OW], ["co", s.tileCo], ["ci", tileCi], ["kh", x.kh], ["kw", x.kw]], {
    kind: "gemm",
    reset: false,
    acc: { buf: "acc_tile", idx: accIdx },
    inp: { buf: "inp_tile", idx: add(add(mul(ci, c(rowsMax * colsIn)), mul(skipRows ? add(oh, kh) : add(mul(oh, c(x.stride)), kh), c(colsIn))), add(mul(ow, c(x.stride)), kw)) },
    wgt: { buf: "wgt_tile", idx: wgtIdx },
  })
  const stepLoads = [...(stationary === "inp" ? [] : [loadInp]), ...(stationary === "wgt" ? [] : [loadWgt])]
  // the init right before the first step's GEMM, after its loads (so that a thread's init waits
  // for its slot's stores no earlier than its GEMM needs it); a one-step reduction is no loop
  // Several reduction steps and virtual threads: a thread's input and weight buffers are
  // double-buffered over the steps (step k in slot k mod 2) where two slots a thread fit, so that
  // its next step loads under its own GEMM as well as under the other threads' (with one thread
  // the schedule stays serial: what "without virtual threads" measures)
  const inpElems = tileCi * rowsMax * colsIn
  const wgtElems = s.tileCo * tileCi * x.kh * x.kw
  const steps2 = V > 1 && nci > 1 && 2 * V * inpElems <= d.inpDepth && 2 * V * wgtElems <= d.wgtDepth && 2 * V * wgtElems + 2 * V <= d.uopDepth ? 2 : 1
  const stepSlot = (r: Ref): Ref => (steps2 === 2 && (r.buf === "inp_tile" || r.buf === "wgt_tile") ? { buf: r.buf, idx: add(r.idx, mul(floormod(k, c(2)), c(r.buf === "inp_tile" ? inpElems : wgtElems))) } : r)
  const reduction = nci === 1 ? vseq([...stepLoads.map((l) => subst(l, "k", 0)), reset, subst(conv, "k", 0)]) : loop("k", nci, mapDeep(vseq([...stepLoads, { kind: "if", cond: eq(k, c(0)), then: reset }, conv]), (e) => e, stepSlot))
  const accRead = read("acc_tile", [accIdx], "int32")
  const summed = x.bias ? add(accRead, read("bias_tile", [co], "int32")) : accRead
  const ewLeaf: VStmt = { kind: "ew", dst: { buf: "acc_tile", idx: accIdx }, value: min(max(floordiv(summed, c(2 ** x.shift)), c(x.clipLo ?? 0)), c(127)) }
  const epilogue = nest([["co", s.tileCo], ["oh", th], ["ow", OW]], ewLeaf)
  const loadBias = x.bias ? [nest([["co", s.tileCo]], { kind: "copy", dst: { buf: "bias_tile", idx: co }, src: { buf: "bias", idx: add(mul(cot, c(s.tileCo)), co) } })] : []
  const storeLeaf: VStmt = {
    kind: "copy",
    dst: { buf: "out", idx: add(mul(add(mul(add(mul(cot, c(s.tileCo)), co), c(OH)), add(oh0, oh)), c(OW)), ow) },
    src: { buf: "acc_tile", idx: accIdx },
  }
  const store = nest([["co", s.tileCo], ["oh", th], ["ow", OW]], storeLeaf)
  // the epilogue in chunks (epilogueChunkOf) — R output rows of one channel block, or B channel
  // blocks of all the tile's rows — each chunk's ALU passes then its STORE, so that a chunk's STORE
  // runs under the next chunk's passes and only the last chunk's is left after the tile's last ALU
  // op; a tile's last chunk may be smaller
  const chunk = epilogueChunkOf(d, x, s)
  const chunked = (k: NonNullable<typeof chunk>): VStmt => {
    const g = v("g")
    const at = (name: string, e: Expr) => (st: VStmt): VStmt => mapDeep(st, (x_) => substitute(x_, new Map([[name, e]])), (r) => r)
    if ("rows" in k) {
      const R = k.rows
      const sub_ = at("oh", add(mul(g, c(R)), v("r")))
      const part = (leaf: VStmt) => nest([["r", min(c(R), sub(th, mul(g, c(R))))], ["ow", OW]], sub_(leaf))
      return nest([["co", s.tileCo], ["g", floordiv(add(th, c(R - 1)), c(R))]], vseq([part(ewLeaf), part(storeLeaf)]))
    }
    const B = k.blocks
    const sub_ = at("co", add(mul(g, c(B)), v("b")))
    const part = (leaf: VStmt) => nest([["b", min(c(B), sub(c(s.tileCo), mul(g, c(B))))], ["oh", th], ["ow", OW]], sub_(leaf))
    return loop("g", Math.ceil(s.tileCo / B), vseq([part(ewLeaf), part(storeLeaf)]))
  }
  const tileBody = vseq([reduction, ...loadBias, ...(chunk ? [chunked(chunk)] : [epilogue, store])])
  const guarded: VStmt = stationary
    ? inner % V === 0 ? tileBody : { kind: "if", cond: lt(innerIdx, c(inner)), then: tileBody }
    : T % V === 0 ? tileBody : { kind: "if", cond: lt(t, c(T)), then: tileBody }
  const alloc = (name: string, scope: "inp" | "wgt" | "acc", elems: number, body: VStmt): VStmt => ({ kind: "alloc", name, scope, elems, body })
  let perThread: VStmt = guarded
  if (x.bias) perThread = alloc("bias_tile", "acc", s.tileCo, perThread)
  if (stationary !== "wgt") perThread = alloc("wgt_tile", "wgt", wgtElems * steps2, perThread)
  if (stationary !== "inp") perThread = alloc("inp_tile", "inp", inpElems * steps2, perThread)
  perThread = alloc("acc_tile", "acc", accElems, perThread)
  const threads = (outer: string, n: number): VStmt => loop(outer, n, { kind: "for", var: "vt", extent: c(V), vthread: true, body: perThread })
  // the stationary buffer double-buffered when there are threads (TVM's double_buffer): outer
  // index o uses slot o mod 2, so the next one loads while the threads finish this one
  const sSlots = Math.min(V, 2)
  const stationaryBody = (name: string, elems: number, load: VStmt): VStmt => {
    const slot = (r: Ref): Ref => (r.buf === name ? { buf: name, idx: add(r.idx, mul(floormod(v("o"), c(sSlots)), c(elems))) } : r)
    const inner_ = vseq([subst(load, "k", 0), threads("io", Math.ceil(inner / V))])
    return alloc(name, stationary!, elems * sSlots, loop("o", order === "co-oh" ? coTiles : ohTiles, mapDeep(inner_, (e) => e, slot)))
  }
  const body = stationary === "wgt" ? stationaryBody("wgt_tile", wgtElems, loadWgt) : stationary === "inp" ? stationaryBody("inp_tile", inpElems, loadInp) : threads("to", Math.ceil(T / V))
  const tensors = new Map([
    ["data", x.ci * x.h * x.w],
    ["kernel", x.co * x.ci * x.kh * x.kw],
    ["out", x.co * OH * OW],
    ...(x.bias ? [["bias", x.co] as const] : []),
  ] as const)
  return { name: "conv2d", tensors, body }
}
