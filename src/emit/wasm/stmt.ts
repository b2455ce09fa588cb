// Statements of the `wasm` target: TIR Stmt → instructions, inside a kernel whose layout
// (layout.ts) gives the frame. Loops are wasm loops (a do-while when they surely run), vectorized
// ones take vector.ts's SIMD path where its plan admits them, loops indexing a register buffer are
// unrolled (registers.ts), a phase's parallel loop runs its chunk [$begin, $end); allocations take
// a frame slot or v128 locals; each region (a loop body, an arm) has its own address and vector
// caches, dropped where a store makes them stale.
import { c, collect, isIntDtype, mapExpr, substitute, type Expr } from "../../ast/te/expr.js"
import { simplify, type Interval } from "../../ast/te/simplify.js"
import { mapStmt, type Stmt } from "../../ast/tir/tir.js"
import { storedBuffers } from "../../ast/tir/analysis.js"
import { emitLoopLatch, STORAGE, VCLASS, type FnBuilder, type VT } from "./builder.js"
import { emitAddress, emitExpr, emitExprAs, invalidate, type Scope } from "./expr.js"
import { emitSteps, hoistBases, stepBases } from "./hoist.js"
import { BEGIN, END, FRAME, frameSlot, type FrameSize } from "./layout.js"
import { emitVectorLoop, vectorPlan } from "./vector.js"
import { coef } from "../../ast/te/linear-index.js"
import { emitDot4x4 } from "./dot.js"
import { emitWideLoop, widePlan } from "./vector-wide.js"
import { copyPlan, emitCopyLoop } from "./vector-copy.js"
import { allocRegs, emitRegWrite, indexesRegs, LANE_DTYPE, promotable } from "./registers.js"

export interface StmtCtx extends Scope {
  /** First free byte of the frame. */
  readonly top: number
  readonly inThread: boolean
  /** The loop that runs only the iterations [$begin, $end) (a phase's parallel loop). */
  readonly chunk?: Stmt
}

/** `sc` with variable `name` in local `local`, and its range (or none: an outer one's is shadowed). */
export const withVar = (sc: StmtCtx, name: string, local: number, vt: VT, bounds?: Interval): StmtCtx => {
  const b = new Map(sc.bounds)
  if (bounds) b.set(name, bounds)
  else b.delete(name)
  return { ...sc, vars: new Map(sc.vars).set(name, { local, vt }), bounds: b }
}

/**
 * Caches for a nested region: copies of the enclosing one's, growing apart. A loop body keeps no
 * cached value of a buffer it stores (a later iteration would read the stale one).
 */
export const freshRegion = (sc: Scope, loopStores?: ReadonlySet<string>): Pick<Scope, "addrCache" | "vcache"> => ({
  addrCache: new Map(sc.addrCache ?? []),
  vcache: new Map([...(sc.vcache ?? [])].filter(([, v]) => !loopStores || ![...v.reads].some((b) => loopStores.has(b)))),
})

/** `body` with loop variable `name` replaced by the constant `value`; integer expressions simplified (float ones only substituted, so their arithmetic is unchanged). */
const substituteStmt = (body: Stmt, name: string, value: number, sc: Scope): Stmt => {
  const env = new Map([[name, c(value)]])
  const simp = (e: Expr) => simplify(e, sc.bounds, sc.simplified)
  const ints = (e: Expr): Expr => (isIntDtype(e.dtype) ? simp(e) : mapExpr(e, (x) => (x.kind === "read" ? { ...x, indices: x.indices.map(simp) } : undefined)))
  return mapStmt(body, () => undefined, (e) => ints(substitute(e, env)))
}

/**
 * Whether `s` (a vectorized loop's body over `v` from the constant `lo`) stores no buffer promoted to
 * registers and reads one only at an index constant in every iteration but for `v`, one step a lane
 * (vector-wide.ts reads those as v128 locals: a conv tile's sums in its requantizing epilogue).
 */
const regReadsOnly = (s: Stmt, v: string, lo: number, sc: StmtCtx): boolean => {
  if (!sc.regs || sc.regs.size === 0) return true
  if (s.kind !== "store" || sc.regs.has(s.buffer)) return false
  const env = new Map([[v, c(lo)]])
  return collect(s.value, (x) => x.kind === "read" && sc.regs!.has(x.source)).every(
    (x) => x.kind === "read" && x.indices.length === 1 && coef(x.indices[0], v) === 1 && simplify(substitute(x.indices[0], env), sc.bounds, sc.simplified).kind === "const",
  )
}

/** Whether `s` reads or stores a buffer promoted to registers (vector-copy.ts addresses memory only). */
const touchesRegs = (s: Stmt, sc: StmtCtx): boolean => {
  if (!sc.regs || sc.regs.size === 0) return false
  if (s.kind === "store" && sc.regs.has(s.buffer)) return true
  let found = false
  mapStmt(s, () => undefined, (e) => {
    if (collect(e, (x) => x.kind === "read" && sc.regs!.has(x.source)).length) found = true
    return e
  })
  return found
}

/** Emits `s`; allocations it makes extend `frame`. */
export const emitStmt = (fb: FnBuilder, sc: StmtCtx, s: Stmt, frame: FrameSize): void => {
  switch (s.kind) {
    case "for": {
      if (s.var.dtype !== "int32") fb.fail(`loop variable of dtype ${s.var.dtype}`)
      const inThread = sc.inThread || s.forKind === "thread"
      const lo = s.min.kind === "const" ? s.min.value : undefined
      const ext = s.extent.kind === "const" ? s.extent.value : undefined
      if (ext !== undefined && ext <= 0) return
      const bounds = lo !== undefined && ext !== undefined ? { min: lo, max: lo + ext - 1 } : undefined
      const regIndexed = sc.regs !== undefined && sc.regs.size > 0 && indexesRegs(s.body, s.var.name, sc.regs.keys())
      const chunked = sc.chunk === s
      if (chunked && regIndexed) fb.fail(`the parallel loop '${s.var.name}' of a phase indexes a register buffer`)
      // a loop over a register tile's lanes runs 4 lanes at a time too when the plan shows them
      // independent (each lane computes what the serial loop computes, in the same order)
      if (!chunked && (s.forKind === "vectorized" || regIndexed) && ext !== undefined && ext >= 4 && (lo !== undefined || !regIndexed)) {
        const plan = vectorPlan(s.body, s.var.name)
        if (plan) {
          const nvec = ext - (ext % 4)
          emitVectorLoop(fb, sc, plan, s.var.name, s.min, nvec, (l) => withVar(sc, s.var.name, l, "i32"))
          if (nvec === ext) return
          const tailMin: Expr = lo !== undefined ? { kind: "const", value: lo + nvec, dtype: "int32" } : { kind: "bin", op: "add", a: s.min, b: { kind: "const", value: nvec, dtype: "int32" }, dtype: "int32" }
          emitStmt(fb, sc, { ...s, forKind: "serial", min: tailMin, extent: { kind: "const", value: ext - nvec, dtype: "int32" } }, frame)
          return
        }
      }
      // a vectorized loop of mixed dtypes (a requantization) over memory buffers: vector-wide.ts
      if (!chunked && s.forKind === "vectorized" && lo !== undefined && ext !== undefined && ext >= 4 && regReadsOnly(s.body, s.var.name, lo, sc)) {
        const wide = widePlan(s.body, s.var.name)
        // (a store that converts — its value's dtype not the buffer's — stays scalar)
        if (wide && sc.bufs.get(wide.store.buffer)?.dtype === wide.store.value.dtype) {
          const nvec = ext - (ext % 4)
          emitWideLoop(fb, sc, wide, s.var.name, lo, nvec)
          if (nvec === ext) return
          emitStmt(fb, sc, { ...s, forKind: "serial", min: c(lo + nvec), extent: c(ext - nvec) }, frame)
          return
        }
      }
      // a vectorized copy of other dtypes (an int8 conv's int16 padded input): vector-copy.ts
      if (!chunked && !regIndexed && s.forKind === "vectorized" && lo !== undefined && ext !== undefined && !touchesRegs(s.body, sc)) {
        const copy = copyPlan(s.body, s.var.name)
        const dt = copy?.store.value.dtype
        if (copy && ext >= copy.lanes && sc.bufs.get(copy.store.buffer)?.dtype === dt && sc.bufs.get((copy.store.value as { source: string }).source)?.dtype === dt) {
          const nvec = ext - (ext % copy.lanes)
          emitCopyLoop(fb, sc, copy, s.var.name, lo, nvec)
          if (nvec === ext) return
          emitStmt(fb, sc, { ...s, forKind: "serial", min: c(lo + nvec), extent: c(ext - nvec) }, frame)
          return
        }
      }
      if (regIndexed) {
        // the unroll rule of registers.ts: the variable indexes a promoted buffer
        if (lo === undefined || ext === undefined) fb.fail(`loop '${s.var.name}' indexes a register buffer but has non-constant bounds`)
        for (let k = lo; k < lo + ext; k++) emitStmt(fb, { ...sc, inThread }, substituteStmt(s.body, s.var.name, k, sc), frame)
        return
      }
      // partial addresses invariant in the loop, then (an innermost loop of constant start) those
      // that step with it
      const invariant = hoistBases(fb, sc, s)
      const stepped = !chunked && lo !== undefined && sc.stepAddresses !== false ? stepBases(fb, invariant, s, s.var.name, lo) : { scope: invariant, steps: [] }
      const hoisted = stepped.scope
      const v = fb.local("i32")
      const end = fb.local("i32")
      // the body is a region of its own: values cached before the loop stay readable, new ones stay inside
      const inner: StmtCtx = { ...withVar(hoisted, s.var.name, v, "i32", bounds), inThread, ...freshRegion(sc, storedBuffers(s.body)), chunk: undefined }
      if (chunked) {
        // iterations [$begin, min($end, extent)): v from min + $begin to min + min($end, extent)
        emitExprAs(fb, sc, s.min, "int32")
        fb.op("local.get", BEGIN)
        fb.op("i32.add")
        fb.op("local.set", v)
        emitExprAs(fb, sc, s.min, "int32")
        fb.op("local.get", END)
        emitExprAs(fb, sc, s.extent, "int32")
        fb.op("local.get", END)
        emitExprAs(fb, sc, s.extent, "int32")
        fb.op("i32.lt_s")
        fb.op("select")
        fb.op("i32.add")
        fb.op("local.set", end)
      } else {
        emitExprAs(fb, sc, s.min, "int32")
        fb.op("local.tee", v)
        emitExprAs(fb, sc, s.extent, "int32")
        fb.op("i32.add")
        fb.op("local.set", end)
      }
      // a do-while when the loop surely runs, else guarded by a block
      const guarded = ext === undefined || chunked
      if (guarded) {
        fb.block("block")
        fb.op("local.get", v)
        fb.op("local.get", end)
        fb.op("i32.ge_s")
        fb.op("br_if", 0)
      }
      fb.block("loop")
      emitStmt(fb, inner, s.body, frame)
      emitSteps(fb, stepped.steps)
      emitLoopLatch(fb, v, end, 1)
      if (guarded) fb.op("end")
      invalidate(sc, storedBuffers(s.body))
      return
    }
    case "seq":
      for (const b of s.body) emitStmt(fb, sc, b, frame)
      return
    case "store": {
      if (s.indices.length !== 1) fb.fail(`store to '${s.buffer}' with ${s.indices.length} indices: run lowering.FlattenStorage first`)
      const reg = sc.regs?.get(s.buffer)
      if (reg) {
        emitRegWrite(fb, reg, s.buffer, simplify(s.indices[0], sc.bounds, sc.simplified), () => emitExprAs(fb, sc, s.value, LANE_DTYPE[reg.lane]))
        return
      }
      // addresses shared with the region (select arms add none: emitExpr)
      const st0: Scope = sc.addrCache ? sc : { ...sc, addrCache: new Map() }
      const { offset, info } = emitAddress(fb, st0, s.buffer, s.indices[0])
      emitExprAs(fb, st0, s.value, info.dtype)
      const st = STORAGE[info.dtype]
      fb.op(st.store, st.align, offset)
      invalidate(sc, [s.buffer])
      return
    }
    case "if":
      emitExprAs(fb, sc, s.cond, "bool")
      fb.block("if")
      emitStmt(fb, { ...sc, ...freshRegion(sc) }, s.then, frame)
      if (s.else) {
        fb.op("else")
        emitStmt(fb, { ...sc, ...freshRegion(sc) }, s.else, frame)
      }
      fb.op("end")
      invalidate(sc, storedBuffers(s))
      return
    case "allocate": {
      const b = s.buffer
      if ((b.dtype === "float32" || b.dtype === "int32") && promotable(b, s.body)) {
        const regs = new Map(sc.regs ?? []).set(b.name, allocRegs(fb, b.dtype, b.shape.reduce((a, d) => a * d, 1)))
        const bufs = new Map(sc.bufs)
        bufs.delete(b.name)
        emitStmt(fb, { ...sc, regs, bufs }, s.body, frame)
        return
      }
      const { info, top } = frameSlot(b, FRAME, sc.top, frame)
      emitStmt(fb, { ...sc, top, bufs: new Map(sc.bufs).set(b.name, info) }, s.body, frame)
      return
    }
    case "let": {
      const vt = VCLASS[s.var.dtype]
      const l = fb.local(vt)
      emitExprAs(fb, sc, s.value, s.var.dtype)
      fb.op("local.set", l)
      // a region of its own: an unrolled copy may bind the same name again with another value
      emitStmt(fb, { ...withVar(sc, s.var.name, l, vt), ...freshRegion(sc) }, s.body, frame)
      invalidate(sc, storedBuffers(s.body))
      return
    }
    case "evaluate":
      emitExpr(fb, sc, s.value)
      fb.op("drop")
      return
    case "barrier":
      if (sc.inThread) fb.fail("a barrier inside a thread loop needs threads: the wasm target runs thread loops serially")
      return
    case "intrinsic":
      if (s.intrin.emit.wasm === "dot_u8s8_4x4") return emitDot4x4(fb, sc, s)
      fb.fail(`intrinsic ${s.intrin.name} reached the wasm emitter: run lowering.LowerIntrinsics first`)
      return
    case "shuffle":
      fb.fail("a warp shuffle (a cuda reduction across threads) cannot run on the wasm target")
  }
}
