// The TIR verifier, run between TIR passes. Always: the function is well formed — params and
// allocations have well-formed shapes, every buffer accessed is a param or allocated around the
// access, every access has one index per dim, every variable is defined (by a loop or a let around
// its use, never twice in one scope), loop bounds are integer expressions of the variables outside
// the loop, no reduction is left in an expression, and intrinsic statements fit their declaration.
// Then what a point in a pipeline has established, declared as data (`TirExpect`): what the next
// stage — a pass or an emitter — assumes of its input.
import { isIntDtype, type Expr } from "../te/expr.js"
import type { VerifyProblem } from "../verify-problem.js"
import { isStraightLine } from "./analysis.js"
import type { Buffer, PrimFunc, Region, Stmt } from "./tir.js"

/** What holds at a point of a TIR pipeline, beyond well-formedness (each fact checked when set). */
export interface TirExpect {
  /** Thread and vthread loops have constant bounds (a launch, and InjectVirtualThread's copies, need them). */
  readonly threadExtentsKnown?: boolean
  /** Storage is flat (after FlattenStorage): every buffer has rank 1, so every access one index. */
  readonly flat?: boolean
  /** No intrinsic statement is left (after LowerIntrinsics). */
  readonly noIntrinsics?: boolean
  /** Vectorized loops have a constant extent of at most this many lanes over a straight-line body (after VectorizeLoops). */
  readonly maxVectorLanes?: number
  /** Unrolled loops have a constant extent of at most this (after UnrollLoops). */
  readonly maxUnroll?: number
}

/** Both sets of facts: each flag that either sets, the tighter of two limits. */
export const bothExpect = (a: TirExpect, b: TirExpect): TirExpect => {
  const tighter = (x?: number, y?: number) => (x === undefined ? y : y === undefined ? x : Math.min(x, y))
  const lanes = tighter(a.maxVectorLanes, b.maxVectorLanes)
  const unroll = tighter(a.maxUnroll, b.maxUnroll)
  return {
    ...(a.threadExtentsKnown || b.threadExtentsKnown ? { threadExtentsKnown: true } : {}),
    ...(a.flat || b.flat ? { flat: true } : {}),
    ...(a.noIntrinsics || b.noIntrinsics ? { noIntrinsics: true } : {}),
    ...(lanes !== undefined ? { maxVectorLanes: lanes } : {}),
    ...(unroll !== undefined ? { maxUnroll: unroll } : {}),
  }
}

/** Whether two sets of facts are the same. */
export const sameExpect = (a: TirExpect, b: TirExpect): boolean =>
  !a.threadExtentsKnown === !b.threadExtentsKnown &&
  !a.flat === !b.flat &&
  !a.noIntrinsics === !b.noIntrinsics &&
  a.maxVectorLanes === b.maxVectorLanes &&
  a.maxUnroll === b.maxUnroll

type Problem = VerifyProblem | undefined

/** What is wrong in an expression (and, for an access, which), before the statement around it says where. */
interface Flaw {
  readonly reason: string
  readonly within?: string
}

const constOf = (e: Expr): number | undefined => (e.kind === "const" ? e.value : undefined)

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`

/** A buffer's own shape, strides and view: non-negative integer dims, one stride per dim. */
const checkBuffer = (b: Buffer, where: string, expect: TirExpect): Problem => {
  if (!b.shape.every((d) => Number.isInteger(d) && d >= 0)) return { where, reason: `shape [${b.shape.join(", ")}] is not a list of non-negative integers` }
  if (b.strides && b.strides.length !== b.shape.length) return { where, reason: `${plural(b.strides.length, "stride")} for rank ${b.shape.length}` }
  if (b.view) {
    if (b.view.shape.length !== b.view.strides.length) return { where, reason: `its view has ${plural(b.view.strides.length, "stride")} for rank ${b.view.shape.length}` }
    if (b.shape.length !== 1) return { where, reason: `a buffer with a view is flat storage, but has rank ${b.shape.length}` }
  }
  if (expect.flat && b.shape.length !== 1) return { where, reason: `storage is not flattened: rank ${b.shape.length} (run lowering.FlattenStorage)` }
  return undefined
}

/** The first problem of `f` against well-formedness and `expect`, or undefined when there is none. */
export const verifyPrimFunc = (f: PrimFunc, expect: TirExpect = {}): VerifyProblem | undefined => {
  const at = (where: string) => `primfunc ${f.name}: ${where}`
  const buffers = new Map<string, Buffer>()
  const vars = new Set<string>()

  for (const p of f.params) {
    if (buffers.has(p.name)) return { where: at(`param '${p.name}'`), reason: "named twice" }
    const bad = checkBuffer(p, at(`param '${p.name}'`), expect)
    if (bad) return bad
    buffers.set(p.name, p)
  }

  // expressions report a flaw (allocated only when there is one); the statement around it says where
  const problem = (where: string, flaw: Flaw): VerifyProblem => ({ where: at(flaw.within ? `${where}: ${flaw.within}` : where), reason: flaw.reason })
  const access = (name: string, count: number, within: string): Flaw | undefined => {
    const b = buffers.get(name)
    if (!b) return { within, reason: `buffer '${name}' is neither a param nor allocated around the access` }
    if (count !== b.shape.length) return { within, reason: `'${name}' has rank ${b.shape.length}, accessed with ${plural(count, "index")}` }
    return undefined
  }
  const indices = (es: readonly Expr[]): Flaw | undefined => {
    for (const e of es) {
      const flaw = isIntDtype(e.dtype) ? expr(e) : { reason: `an index of dtype ${e.dtype}` }
      if (flaw) return flaw
    }
    return undefined
  }
  const expr = (e: Expr): Flaw | undefined => {
    switch (e.kind) {
      case "const":
        return undefined
      case "var":
        return vars.has(e.name) ? undefined : { reason: `variable '${e.name}' is used where no loop or let defines it` }
      case "read":
        return access(e.source, e.indices.length, `read of '${e.source}'`) ?? indices(e.indices)
      case "bin":
        return expr(e.a) ?? expr(e.b)
      case "select":
        return expr(e.cond) ?? expr(e.t) ?? expr(e.f)
      case "cast":
        return expr(e.value)
      case "call":
        for (const a of e.args) {
          const flaw = expr(a)
          if (flaw) return flaw
        }
        return undefined
      case "reduce":
        return { reason: "a reduction is left in an expression (lowering turns it into an init and an update)" }
    }
  }
  const region = (r: Region): Flaw | undefined => {
    if (r.strides && r.base.length !== 1) return { reason: `a strided region has ${plural(r.base.length, "index")} (one flat index expected)` }
    return access(r.buffer, r.base.length, `region of '${r.buffer}'`) ?? indices(r.base)
  }
  /** Runs `body` with `name` defined (undefined again after it). */
  const binding = (name: string, where: string, body: () => Problem): Problem => {
    if (vars.has(name)) return { where: at(where), reason: `variable '${name}' is defined again inside its own scope` }
    vars.add(name)
    const bad = body()
    vars.delete(name)
    return bad
  }

  const bound = (s: Stmt & { kind: "for" }, what: "min" | "extent", e: Expr): Problem => {
    if (!isIntDtype(e.dtype)) return { where: at(`for ${s.var.name}`), reason: `${what} of dtype ${e.dtype}` }
    const flaw = expr(e)
    if (flaw) return problem(`for ${s.var.name}: ${what}`, flaw)
    const k = constOf(e)
    if (k !== undefined && !Number.isInteger(k)) return { where: at(`for ${s.var.name}`), reason: `${what} ${k} is not an integer` }
    return undefined
  }
  const loop = (s: Stmt & { kind: "for" }): Problem => {
    const where = () => at(`for ${s.var.name}`)
    if (!isIntDtype(s.var.dtype)) return { where: where(), reason: `loop variable of dtype ${s.var.dtype}` }
    const bad = bound(s, "min", s.min) ?? bound(s, "extent", s.extent)
    if (bad) return bad
    const lo = constOf(s.min)
    const ext = constOf(s.extent)
    if (ext !== undefined && ext < 0) return { where: where(), reason: `negative extent ${ext}` }
    if (s.forKind === "thread" && !s.thread) return { where: where(), reason: "a thread loop without a thread tag" }
    const threaded = s.forKind === "thread" || s.forKind === "vthread"
    if (expect.threadExtentsKnown && threaded && (lo === undefined || ext === undefined))
      return { where: where(), reason: `a ${s.forKind} loop (${s.thread ?? "untagged"}) with non-constant bounds` }
    if (expect.maxVectorLanes !== undefined && s.forKind === "vectorized") {
      if (ext === undefined || ext > expect.maxVectorLanes)
        return { where: where(), reason: `a vectorized loop of extent ${ext ?? "unknown"} (at most ${expect.maxVectorLanes} lanes; run lowering.VectorizeLoops)` }
      if (!isStraightLine(s.body)) return { where: where(), reason: "a vectorized loop whose body is not straight-line code (run lowering.VectorizeLoops)" }
    }
    if (expect.maxUnroll !== undefined && s.forKind === "unrolled" && (ext === undefined || ext > expect.maxUnroll))
      return { where: where(), reason: `an unrolled loop of extent ${ext ?? "unknown"} (at most ${expect.maxUnroll}; run lowering.UnrollLoops)` }
    return binding(s.var.name, `for ${s.var.name}`, () => stmt(s.body))
  }

  const stmt = (s: Stmt): Problem => {
    switch (s.kind) {
      case "for":
        return loop(s)
      case "seq":
        for (const b of s.body) {
          const bad = stmt(b)
          if (bad) return bad
        }
        return undefined
      case "store": {
        const flaw = access(s.buffer, s.indices.length, "") ?? indices(s.indices) ?? expr(s.value)
        return flaw && problem(`store to '${s.buffer}'`, flaw)
      }
      case "if": {
        const flaw = expr(s.cond)
        return flaw ? problem("if", flaw) : (stmt(s.then) ?? (s.else ? stmt(s.else) : undefined))
      }
      case "allocate": {
        const where = `allocate '${s.buffer.name}'`
        if (buffers.has(s.buffer.name)) return { where: at(where), reason: `'${s.buffer.name}' is already a param or allocated around it` }
        const bad = checkBuffer(s.buffer, at(where), expect)
        if (bad) return bad
        buffers.set(s.buffer.name, s.buffer)
        const inner = stmt(s.body)
        buffers.delete(s.buffer.name)
        return inner
      }
      case "let": {
        const flaw = expr(s.value)
        return flaw ? problem(`let ${s.var.name}`, flaw) : binding(s.var.name, `let ${s.var.name}`, () => stmt(s.body))
      }
      case "evaluate": {
        const flaw = expr(s.value)
        return flaw && problem("evaluate", flaw)
      }
      case "barrier":
        return undefined
      case "shuffle": {
        const where = `shuffle into '${s.buffer}'`
        if (!(Number.isInteger(s.width) && s.width >= 1 && s.width <= 32 && (s.width & (s.width - 1)) === 0)) return { where: at(where), reason: `width ${s.width} is not a power of two up to 32` }
        if (!(Number.isInteger(s.offset) && s.offset >= 1 && s.offset < s.width)) return { where: at(where), reason: `offset ${s.offset} outside [1, ${s.width})` }
        const flaw = access(s.buffer, s.indices.length, "") ?? indices(s.indices) ?? expr(s.value)
        return flaw && problem(where, flaw)
      }
      case "intrinsic": {
        const where = `intrinsic ${s.intrin.name}`
        if (expect.noIntrinsics) return { where: at(where), reason: "an intrinsic statement is left (run lowering.LowerIntrinsics)" }
        if (s.inputs.length !== s.intrin.inputs.length) return { where: at(where), reason: `${plural(s.inputs.length, "input region")} for ${s.intrin.inputs.length} declared inputs` }
        if (s.intrin.compute.body.kind === "reduce" && s.intrin.mode !== "update") return { where: at(where), reason: "a reduction must be an update" }
        for (const [k, r] of [s.output, ...s.inputs].entries()) {
          const flaw = region(r)
          if (flaw) return problem(k === 0 ? `${where}: output` : `${where}: input ${k - 1}`, flaw)
        }
        return undefined
      }
    }
  }
  return stmt(f.body)
}
