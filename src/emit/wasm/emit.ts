// The `wasm` target: PrimFuncs → one WebAssembly module (our own encoder, SIMD128), run in Node or
// a browser by src/device/wasm.ts. Pure and deterministic: the same funcs and options give the same
// bytes; names from programs never reach the module (exports are the caller's safe identifiers).
//
// Calling convention and memory:
// - the module imports its memory ("env" "memory"; shared when `sharedMemory`), and each kernel is
//   an export `(func (param $args $shared $frame $phase $begin $end i32))`: `$args` points at the
//   params' addresses (i32 each, in order; each buffer has the JS storage layout of its dtype and a
//   16-byte aligned address), so buffers stay where the host keeps them and a call copies nothing;
//   the body's allocations lie in a frame (a bump region per call: stack discipline, nested
//   allocations after their parents, siblings share space; WasmKernelLayout.frameBytes in all);
// - phases, for threads: under the body's top-level allocations and lets, each statement of its
//   sequence is a phase; `$phase` < 0 runs them all, else only that one. A phase that is a parallel
//   loop runs only its iterations [$begin, $end), so a host may run one phase's chunks on several
//   threads sharing the memory, each with its own `$frame`, and wait for all before the next phase;
//   the top-level allocations (which phases share) lie at `$shared`, the others at `$frame` (the
//   same offsets: a frame leaves the shared part unused). One thread passes $shared = $frame;
// - loops: serial, parallel (split only as above), unrolled, thread and vthread loops are wasm
//   loops; vectorized loops use f32x4 / i32x4 where vector.ts admits them, scalar otherwise;
// - barriers are no-ops outside thread loops and rejected inside (their phases need threads);
// - `boundsCheck` (a debug mode) traps (unreachable) on any index outside its buffer's storage, so
//   a wrong index never reads another buffer silently; without it the TIR is trusted.
import type { DType } from "../../ast/graph/dtype.js"
import { c, collect, isIntDtype, mapExpr, substitute, type Expr } from "../../ast/te/expr.js"
import { simplify, type Interval } from "../../ast/te/simplify.js"
import { mapStmt, type Buffer, type PrimFunc, type Stmt } from "../../ast/tir/tir.js"
import { encodeModule, type FuncType, type WasmFunc, type WasmImportFunc, type WasmModule } from "./encoder.js"
import { FnBuilder, HELPERS, MATH_IMPORTS, STORAGE, VCLASS, WasmEmitError, type BufInfo, type Helper } from "./builder.js"
import { emitAddress, emitExpr, emitExprAs, emitScaledTerms, invalidate, type Scope } from "./expr.js"
import { baseKey, bestBase, boundInside, invariantParts, type Base } from "./address.js"
import { emitVectorLoop, vectorPlan } from "./vector.js"
import { allocRegs, emitRegWrite, indexesRegs, promotable } from "./registers.js"

export { WasmEmitError } from "./builder.js"

/** What the wasm target does with each TIR construct. */
export const WASM_CAPABILITIES = {
  parallel: "serial loop; the loop of a phase runs [begin, end) of its iterations (a host's threads share it)",
  vectorized: "f32x4 / i32x4 for unit-stride float32/int32 bodies, scalar otherwise and for the remainder",
  unrolled: "loop (UnrollLoops has already copied the small ones)",
  thread: "serial loop",
  vthread: "serial loop",
  barrier: "no-op outside thread loops; rejected inside",
  intrinsic: "needs lowering.LowerIntrinsics",
  allocate: "a region of the call's frame (stack discipline)",
} as const

export interface WasmEmitOptions {
  /** Trap on any out-of-bounds index (debug). Default false. */
  readonly boundsCheck?: boolean
  /** Import a shared memory (for a host that runs kernels from workers). Default false. */
  readonly sharedMemory?: boolean
}

export interface WasmParamLayout {
  readonly dtype: DType
  /** Elements of storage (≥ the logical size). */
  readonly length: number
  /** The logical shape (the tensor the param holds). */
  readonly shape: readonly number[]
  /** Whether the kernel stores to it (a host that copies a buffer in copies these back). */
  readonly written: boolean
  /**
   * Whether the kernel may see its value on entry (a host that copies copies these in): false for an
   * output that is never read and stored only outside any `if` (a compute writes all of it).
   */
  readonly copyIn: boolean
}

/** One phase of a kernel (see the calling convention). */
export interface WasmPhase {
  /** The iterations of its parallel loop, when it is one: a host may split [0, parallel) across threads. */
  readonly parallel?: number
  /** Its stores, counted over the loops' constant extents (a host splits only phases worth a thread's wake-up). */
  readonly work: number
}

export interface WasmKernelLayout {
  readonly name: string
  readonly params: readonly WasmParamLayout[]
  /** Bytes of the frame (the body's allocations). */
  readonly frameBytes: number
  readonly phases: readonly WasmPhase[]
}

export interface WasmEmitted {
  readonly bytes: Uint8Array
  readonly module: WasmModule
  readonly kernels: readonly WasmKernelLayout[]
}

const align16 = (n: number) => Math.ceil(n / 16) * 16
const prod = (s: readonly number[]) => s.reduce((a, d) => a * d, 1)

const storedBuffers = (s: Stmt, out = new Set<string>()): Set<string> => {
  switch (s.kind) {
    case "store":
      out.add(s.buffer)
      break
    case "for":
    case "allocate":
    case "let":
      storedBuffers(s.body, out)
      break
    case "seq":
      s.body.forEach((b) => storedBuffers(b, out))
      break
    case "if":
      storedBuffers(s.then, out)
      if (s.else) storedBuffers(s.else, out)
      break
    case "intrinsic":
      out.add(s.output.buffer)
      break
    default:
      break
  }
  return out
}

/** Buffers whose value on entry may matter: every buffer read, and those stored under an `if` (which may leave elements unwritten). */
const seenOnEntry = (body: Stmt): Set<string> => {
  const out = new Set<string>()
  const ofExpr = (e: Expr) => collect(e, (x) => x.kind === "read").forEach((x) => x.kind === "read" && out.add(x.source))
  const rec = (s: Stmt, guarded: boolean): void => {
    switch (s.kind) {
      case "store":
        if (guarded) out.add(s.buffer)
        s.indices.forEach(ofExpr)
        ofExpr(s.value)
        return
      case "for":
        ofExpr(s.min)
        ofExpr(s.extent)
        return rec(s.body, guarded || s.extent.kind !== "const")
      case "seq":
        return s.body.forEach((b) => rec(b, guarded))
      case "if":
        ofExpr(s.cond)
        rec(s.then, true)
        if (s.else) rec(s.else, true)
        return
      case "allocate":
        return rec(s.body, guarded)
      case "let":
        ofExpr(s.value)
        return rec(s.body, guarded)
      case "evaluate":
        return ofExpr(s.value)
      case "intrinsic":
        out.add(s.output.buffer)
        s.inputs.forEach((r) => out.add(r.buffer))
        return
      default:
        return
    }
  }
  rec(body, false)
  return out
}

interface StmtCtx extends Scope {
  /** First free byte of the frame. */
  readonly top: number
  readonly inThread: boolean
  /** The loop that runs only the iterations [$begin, $end) (a phase's parallel loop). */
  readonly chunk?: Stmt
}

/** The kernel's params: locals 0 … 5, in order. */
const ARGS = 0
const SHARED = 1
const FRAME = 2
const PHASE = 3
const BEGIN = 4
const END = 5

const withVar = (sc: StmtCtx, name: string, local: number, vt: "i32" | "f32" | "f64", bounds?: Interval): StmtCtx => {
  const b = new Map(sc.bounds)
  if (bounds) b.set(name, bounds)
  else b.delete(name)
  return { ...sc, vars: new Map(sc.vars).set(name, { local, vt }), bounds: b }
}

const LANE_DTYPE = { f32: "float32", i32: "int32" } as const

/**
 * Caches for a nested region: copies of the enclosing one's, growing apart. A loop body keeps no
 * cached value of a buffer it stores (a later iteration would read the stale one).
 */
const freshRegion = (sc: Scope, loopStores?: ReadonlySet<string>): Pick<Scope, "addrCache" | "vcache"> => ({
  addrCache: new Map(sc.addrCache ?? []),
  vcache: new Map([...(sc.vcache ?? [])].filter(([, v]) => !loopStores || ![...v.reads].some((b) => loopStores.has(b)))),
})

/** `body` with loop variable `name` replaced by the constant `value`; integer expressions simplified (float ones only substituted, so their arithmetic is unchanged). */
const substituteStmt = (body: Stmt, name: string, value: number, bounds: ReadonlyMap<string, Interval>): Stmt => {
  const env = new Map([[name, c(value)]])
  const ints = (e: Expr): Expr => (isIntDtype(e.dtype) ? simplify(e, bounds) : mapExpr(e, (x) => (x.kind === "read" ? { ...x, indices: x.indices.map((i) => simplify(i, bounds)) } : undefined)))
  return mapStmt(body, () => undefined, (e) => ints(substitute(e, env)))
}

/** The (start, index, element size) of every access to a memory buffer inside `s` (not promoted ones). */
const memoryAccesses = (sc: StmtCtx, s: Stmt): { start: number; index: Expr; size: number }[] => {
  const out: { start: number; index: Expr; size: number }[] = []
  const sizes = new Map([...sc.bufs].map(([n, b]) => [n, { start: b.base, size: STORAGE[b.dtype].bytes }] as const))
  const ofExpr = (e: Expr) =>
    collect(e, (x) => x.kind === "read").forEach((x) => {
      const sz = x.kind === "read" && x.indices.length === 1 ? sizes.get(x.source) : undefined
      if (sz !== undefined && x.kind === "read") out.push({ ...sz, index: x.indices[0] })
    })
  const rec = (x: Stmt): void => {
    switch (x.kind) {
      case "store": {
        const sz = sizes.get(x.buffer)
        if (sz !== undefined && x.indices.length === 1) out.push({ ...sz, index: x.indices[0] })
        ofExpr(x.value)
        return
      }
      case "for":
        return rec(x.body)
      case "seq":
        return x.body.forEach(rec)
      case "if":
        ofExpr(x.cond)
        rec(x.then)
        if (x.else) rec(x.else)
        return
      case "allocate":
        if (x.buffer.scope !== "local") sizes.set(x.buffer.name, { start: FRAME, size: STORAGE[x.buffer.dtype].bytes })
        return rec(x.body)
      case "let":
        ofExpr(x.value)
        return rec(x.body)
      case "evaluate":
        return ofExpr(x.value)
      default:
        return
    }
  }
  rec(s)
  return out
}

const MAX_BASES_PER_LOOP = 6

/** Before a loop: the partial addresses invariant in it, each in a local extending the best enclosing base (address.ts). */
const hoistBases = (fb: FnBuilder, sc: StmtCtx, loop: Stmt & { kind: "for" }): StmtCtx => {
  if (sc.boundsCheck) return sc
  const inside = boundInside(loop)
  const bounds = new Map([...sc.bounds, ...inside.bounds])
  const have = new Set((sc.bases ?? []).map((b) => baseKey(b.start, b.size, b.terms)))
  const added: Base[] = []
  for (const part of invariantParts(memoryAccesses(sc, loop), inside.vars, bounds)) {
    if (added.length >= MAX_BASES_PER_LOOP) break
    const key = baseKey(part.start, part.size, part.terms)
    if (have.has(key)) continue
    have.add(key)
    const parent = bestBase([...(sc.bases ?? []), ...added], { terms: part.terms, k: 0 }, part.size, part.start)
    const rest = [...part.terms].filter(([k]) => !parent?.terms.has(k)).map(([, t]) => t)
    fb.op("local.get", parent?.local ?? part.start)
    emitScaledTerms(fb, sc, rest, part.size)
    fb.op("i32.add")
    const local = fb.local("i32")
    fb.op("local.set", local)
    added.push({ local, start: part.start, size: part.size, terms: part.terms })
  }
  return added.length ? { ...sc, bases: [...(sc.bases ?? []), ...added] } : sc
}

class FrameSize {
  max = 0
}

const emitStmt = (fb: FnBuilder, sc: StmtCtx, s: Stmt, frame: FrameSize): void => {
  switch (s.kind) {
    case "for": {
      if (s.var.dtype !== "int32") throw new WasmEmitError(`loop variable of dtype ${s.var.dtype}`)
      const inThread = sc.inThread || s.forKind === "thread"
      const lo = s.min.kind === "const" ? s.min.value : undefined
      const ext = s.extent.kind === "const" ? s.extent.value : undefined
      if (ext !== undefined && ext <= 0) return
      const bounds = lo !== undefined && ext !== undefined ? { min: lo, max: lo + ext - 1 } : undefined
      const regIndexed = sc.regs !== undefined && sc.regs.size > 0 && indexesRegs(s.body, s.var.name, sc.regs.keys())
      const chunked = sc.chunk === s
      if (chunked && regIndexed) throw new WasmEmitError(`the parallel loop '${s.var.name}' of a phase indexes a register buffer`)
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
      if (regIndexed) {
        // the unroll rule of registers.ts: the variable indexes a promoted buffer
        if (lo === undefined || ext === undefined) throw new WasmEmitError(`loop '${s.var.name}' indexes a register buffer but has non-constant bounds`)
        for (let k = lo; k < lo + ext; k++) emitStmt(fb, { ...sc, inThread }, substituteStmt(s.body, s.var.name, k, sc.bounds), frame)
        return
      }
      const hoisted = hoistBases(fb, sc, s)
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
      fb.op("local.get", v)
      fb.op("i32.const", 1)
      fb.op("i32.add")
      fb.op("local.tee", v)
      fb.op("local.get", end)
      fb.op("i32.lt_s")
      fb.op("br_if", 0)
      fb.op("end")
      if (guarded) fb.op("end")
      invalidate(sc, storedBuffers(s.body))
      return
    }
    case "seq":
      for (const b of s.body) emitStmt(fb, sc, b, frame)
      return
    case "store": {
      if (s.indices.length !== 1) throw new WasmEmitError(`store to '${s.buffer}' with ${s.indices.length} indices: run lowering.FlattenStorage first`)
      const reg = sc.regs?.get(s.buffer)
      if (reg) {
        emitRegWrite(fb, reg, s.buffer, simplify(s.indices[0], sc.bounds), () => emitExprAs(fb, sc, s.value, LANE_DTYPE[reg.lane]))
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
        const regs = new Map(sc.regs ?? []).set(b.name, allocRegs(fb, b.dtype, prod(b.shape)))
        const bufs = new Map(sc.bufs)
        bufs.delete(b.name)
        emitStmt(fb, { ...sc, regs, bufs }, s.body, frame)
        return
      }
      const length = Math.max(1, b.shape.length ? b.shape.reduce((acc, d, k) => acc + (d - 1) * (b.strides?.[k] ?? prod(b.shape.slice(k + 1))), 1) : 1)
      const info: BufInfo = { base: FRAME, offset: sc.top, dtype: b.dtype, length }
      const top = align16(sc.top + length * STORAGE[b.dtype].bytes)
      frame.max = Math.max(frame.max, top)
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
      if (sc.inThread) throw new WasmEmitError("a barrier inside a thread loop needs threads: the wasm target runs thread loops serially")
      return
    case "intrinsic":
      throw new WasmEmitError(`intrinsic ${s.intrin.name} reached the wasm emitter: run lowering.LowerIntrinsics first`)
  }
}

const KERNEL_TYPE: FuncType = { params: ["i32", "i32", "i32", "i32", "i32", "i32"], results: [] }

/** Stores `s` runs: over loops of constant extent (others count once), both arms of an if. */
const storesOf = (s: Stmt): number => {
  switch (s.kind) {
    case "for":
      return (s.extent.kind === "const" ? Math.max(0, s.extent.value) : 1) * storesOf(s.body)
    case "seq":
      return s.body.reduce((n, b) => n + storesOf(b), 0)
    case "if":
      return storesOf(s.then) + (s.else ? storesOf(s.else) : 0)
    case "allocate":
    case "let":
      return storesOf(s.body)
    case "store":
    case "intrinsic":
      return 1
    default:
      return 0
  }
}

/** The iterations of a phase's statement when it is a parallel loop over constant bounds of more than one. */
const parallelExtent = (s: Stmt): number | undefined =>
  s.kind === "for" && s.forKind === "parallel" && s.min.kind === "const" && s.extent.kind === "const" && s.extent.value > 1 ? s.extent.value : undefined

/**
 * The body as phases: its top-level allocations (at $shared: every thread's phases share them) and
 * lets, then each statement of the sequence under them, run when $phase is its index or < 0.
 */
const emitPhases = (fb: FnBuilder, sc: StmtCtx, s: Stmt, frame: FrameSize, phases: WasmPhase[]): void => {
  if (s.kind === "allocate" && !((s.buffer.dtype === "float32" || s.buffer.dtype === "int32") && promotable(s.buffer, s.body))) {
    const b = s.buffer
    const length = Math.max(1, b.shape.length ? b.shape.reduce((acc, d, k) => acc + (d - 1) * (b.strides?.[k] ?? prod(b.shape.slice(k + 1))), 1) : 1)
    const top = align16(sc.top + length * STORAGE[b.dtype].bytes)
    frame.max = Math.max(frame.max, top)
    return emitPhases(fb, { ...sc, top, bufs: new Map(sc.bufs).set(b.name, { base: SHARED, offset: sc.top, dtype: b.dtype, length }) }, s.body, frame, phases)
  }
  if (s.kind === "let") {
    const vt = VCLASS[s.var.dtype]
    const l = fb.local(vt)
    emitExprAs(fb, sc, s.value, s.var.dtype)
    fb.op("local.set", l)
    return emitPhases(fb, { ...withVar(sc, s.var.name, l, vt), ...freshRegion(sc) }, s.body, frame, phases)
  }
  for (const stmt of s.kind === "seq" ? s.body : [s]) {
    const parallel = parallelExtent(stmt)
    // if ($phase < 0 | $phase == k)
    fb.op("local.get", PHASE)
    fb.op("i32.const", 0)
    fb.op("i32.lt_s")
    fb.op("local.get", PHASE)
    fb.op("i32.const", phases.length)
    fb.op("i32.eq")
    fb.op("i32.or")
    fb.block("if")
    emitStmt(fb, { ...sc, ...freshRegion(sc), ...(parallel !== undefined ? { chunk: stmt } : {}) }, stmt, frame)
    fb.op("end")
    invalidate(sc, storedBuffers(stmt))
    phases.push(parallel !== undefined ? { parallel, work: storesOf(stmt) } : { work: storesOf(stmt) })
  }
}

/** One kernel: its function and its layout. */
export const emitWasmFunction = (f: PrimFunc, exportName: string, uses: Set<string>, opts: WasmEmitOptions = {}): { func: WasmFunc; layout: WasmKernelLayout } => {
  const fb = new FnBuilder(uses, KERNEL_TYPE.params.length)
  const written = storedBuffers(f.body)
  const seen = seenOnEntry(f.body)
  const bufs = new Map<string, BufInfo>()
  const params: WasmParamLayout[] = f.params.map((p: Buffer, k) => {
    const shape = p.view?.shape ?? p.shape
    const length = Math.max(prod(p.shape), prod(shape))
    if (bufs.has(p.name)) throw new WasmEmitError(`param '${p.name}' appears twice`)
    // its address, from the args
    const base = fb.local("i32")
    fb.op("local.get", ARGS)
    fb.op("i32.load", 2, 4 * k)
    fb.op("local.set", base)
    bufs.set(p.name, { base, offset: 0, dtype: p.dtype, length })
    return { dtype: p.dtype, length, shape, written: written.has(p.name), copyIn: !written.has(p.name) || seen.has(p.name) }
  })
  const frame = new FrameSize()
  const phases: WasmPhase[] = []
  emitPhases(fb, { vars: new Map(), bufs, bounds: new Map(), boundsCheck: opts.boundsCheck ?? false, top: 0, inThread: false, addrCache: new Map(), vcache: new Map() }, f.body, frame, phases)
  const notes = params.map((p, k) => `param ${k}: ${p.dtype}[${p.shape.join("x")}], ${p.length} elements${p.written ? ", written" : ""}${p.copyIn ? "" : ", not copied in"}`)
  notes.push(`frame: ${frame.max} bytes`)
  notes.push(`phases: ${phases.map((p) => `${p.parallel !== undefined ? `parallel ${p.parallel}` : "serial"} (${p.work} stores)`).join(", ")}`)
  return {
    func: { name: exportName, exported: true, type: KERNEL_TYPE, locals: fb.locals, code: fb.code, notes },
    layout: { name: exportName, params, frameBytes: frame.max, phases },
  }
}

const HELPER_FUNCS: { readonly [H in Helper]: () => WasmFunc } = {
  // q = a / b truncated; q - (a rem b != 0 && (a ^ b) < 0)
  floordiv_i32: () => {
    const fb = new FnBuilder(new Set())
    fb.local("i32") // index 1 is the param b
    const q = fb.local("i32")
    for (const [op, a] of [["local.get", 0], ["local.get", 1], ["i32.div_s"], ["local.set", q], ["local.get", q], ["local.get", 0], ["local.get", 1], ["i32.rem_s"], ["i32.const", 0], ["i32.ne"], ["local.get", 0], ["local.get", 1], ["i32.xor"], ["i32.const", 0], ["i32.lt_s"], ["i32.and"], ["i32.sub"]] as const)
      fb.op(op, a)
    return { name: "$floordiv_i32", exported: false, type: { params: ["i32", "i32"], results: ["i32"] }, locals: fb.locals.slice(1), code: fb.code }
  },
  // r = a rem b; r + (r != 0 && (r ^ b) < 0 ? b : 0)
  floormod_i32: () => {
    const fb = new FnBuilder(new Set())
    fb.local("i32") // index 1 is the param b
    const r = fb.local("i32")
    for (const [op, a] of [["local.get", 0], ["local.get", 1], ["i32.rem_s"], ["local.tee", r], ["local.get", 1], ["i32.const", 0], ["local.get", r], ["i32.const", 0], ["i32.ne"], ["local.get", r], ["local.get", 1], ["i32.xor"], ["i32.const", 0], ["i32.lt_s"], ["i32.and"], ["select"], ["i32.add"]] as const)
      fb.op(op, a)
    return { name: "$floormod_i32", exported: false, type: { params: ["i32", "i32"], results: ["i32"] }, locals: fb.locals.slice(1), code: fb.code }
  },
}

const SAFE = /^[A-Za-z_][A-Za-z0-9_]*$/

/** One module exporting each PrimFunc under its given name (a safe identifier), with its frame layout. */
export const emitWasmModule = (funcs: readonly { readonly name: string; readonly func: PrimFunc }[], opts: WasmEmitOptions = {}): WasmEmitted => {
  const names = new Set<string>()
  for (const f of funcs) {
    if (!SAFE.test(f.name)) throw new WasmEmitError(`kernel name '${f.name}' is not a safe identifier`)
    if (names.has(f.name)) throw new WasmEmitError(`kernel name '${f.name}' is given twice`)
    names.add(f.name)
  }
  const uses = new Set<string>()
  const kernels = funcs.map((f) => emitWasmFunction(f.func, f.name, uses, opts))
  const imports: WasmImportFunc[] = MATH_IMPORTS.filter((m) => uses.has(m)).map((m) => ({
    module: "math",
    field: m,
    name: `$${m}`,
    type: { params: m === "pow" ? ["f64", "f64"] : ["f64"], results: ["f64"] },
  }))
  const helpers = HELPERS.filter((h) => uses.has(h)).map((h) => HELPER_FUNCS[h]())
  const module: WasmModule = {
    memory: { module: "env", field: "memory", minPages: 1, ...(opts.sharedMemory ? { maxPages: 16384 } : {}), shared: opts.sharedMemory ?? false },
    imports,
    funcs: [...helpers, ...kernels.map((k) => k.func)],
  }
  return { bytes: encodeModule(module), module, kernels: kernels.map((k) => k.layout) }
}
