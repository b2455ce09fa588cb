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

type Problem = VerifyProblem | undefined

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

  const access = (name: string, count: number, where: string): Problem => {
    const b = buffers.get(name)
    if (!b) return { where: at(where), reason: `buffer '${name}' is neither a param nor allocated around the access` }
    if (count !== b.shape.length) return { where: at(where), reason: `'${name}' has rank ${b.shape.length}, accessed with ${plural(count, "index")}` }
    return undefined
  }
  const index = (e: Expr, where: string): Problem => (isIntDtype(e.dtype) ? expr(e, where) : { where: at(where), reason: `an index of dtype ${e.dtype}` })
  const indices = (es: readonly Expr[], where: string): Problem => {
    for (const e of es) {
      const bad = index(e, where)
      if (bad) return bad
    }
    return undefined
  }
  const expr = (e: Expr, where: string): Problem => {
    switch (e.kind) {
      case "const":
        return undefined
      case "var":
        return vars.has(e.name) ? undefined : { where: at(where), reason: `variable '${e.name}' is used where no loop or let defines it` }
      case "read":
        return access(e.source, e.indices.length, `${where}: read of '${e.source}'`) ?? indices(e.indices, where)
      case "bin":
        return expr(e.a, where) ?? expr(e.b, where)
      case "select":
        return expr(e.cond, where) ?? expr(e.t, where) ?? expr(e.f, where)
      case "cast":
        return expr(e.value, where)
      case "call":
        for (const a of e.args) {
          const bad = expr(a, where)
          if (bad) return bad
        }
        return undefined
      case "reduce":
        return { where: at(where), reason: "a reduction is left in an expression (lowering turns it into an init and an update)" }
    }
  }
  const region = (r: Region, where: string): Problem => {
    if (r.strides && r.base.length !== 1) return { where: at(where), reason: `a strided region has ${plural(r.base.length, "index")} (one flat index expected)` }
    return access(r.buffer, r.base.length, `${where}: region of '${r.buffer}'`) ?? indices(r.base, where)
  }
  /** Runs `body` with `name` defined (undefined again after it). */
  const binding = (name: string, where: string, body: () => Problem): Problem => {
    if (vars.has(name)) return { where: at(where), reason: `variable '${name}' is defined again inside its own scope` }
    vars.add(name)
    const bad = body()
    vars.delete(name)
    return bad
  }

  const loop = (s: Stmt & { kind: "for" }): Problem => {
    const where = `for ${s.var.name}`
    if (!isIntDtype(s.var.dtype)) return { where: at(where), reason: `loop variable of dtype ${s.var.dtype}` }
    for (const [what, e] of [["min", s.min], ["extent", s.extent]] as const) {
      if (!isIntDtype(e.dtype)) return { where: at(where), reason: `${what} of dtype ${e.dtype}` }
      const bad = expr(e, `${where}: ${what}`)
      if (bad) return bad
      const k = constOf(e)
      if (k !== undefined && !Number.isInteger(k)) return { where: at(where), reason: `${what} ${k} is not an integer` }
    }
    const lo = constOf(s.min)
    const ext = constOf(s.extent)
    if (ext !== undefined && ext < 0) return { where: at(where), reason: `negative extent ${ext}` }
    if (s.forKind === "thread" && !s.thread) return { where: at(where), reason: "a thread loop without a thread tag" }
    const threaded = s.forKind === "thread" || s.forKind === "vthread"
    if (expect.threadExtentsKnown && threaded && (lo === undefined || ext === undefined))
      return { where: at(where), reason: `a ${s.forKind} loop (${s.thread ?? "untagged"}) with non-constant bounds` }
    if (expect.maxVectorLanes !== undefined && s.forKind === "vectorized") {
      if (ext === undefined || ext > expect.maxVectorLanes)
        return { where: at(where), reason: `a vectorized loop of extent ${ext ?? "unknown"} (at most ${expect.maxVectorLanes} lanes; run lowering.VectorizeLoops)` }
      if (!isStraightLine(s.body)) return { where: at(where), reason: "a vectorized loop whose body is not straight-line code (run lowering.VectorizeLoops)" }
    }
    if (expect.maxUnroll !== undefined && s.forKind === "unrolled" && (ext === undefined || ext > expect.maxUnroll))
      return { where: at(where), reason: `an unrolled loop of extent ${ext ?? "unknown"} (at most ${expect.maxUnroll}; run lowering.UnrollLoops)` }
    return binding(s.var.name, where, () => stmt(s.body))
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
        const where = `store to '${s.buffer}'`
        return access(s.buffer, s.indices.length, where) ?? indices(s.indices, where) ?? expr(s.value, where)
      }
      case "if":
        return expr(s.cond, "if") ?? stmt(s.then) ?? (s.else ? stmt(s.else) : undefined)
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
      case "let":
        return expr(s.value, `let ${s.var.name}`) ?? binding(s.var.name, `let ${s.var.name}`, () => stmt(s.body))
      case "evaluate":
        return expr(s.value, "evaluate")
      case "barrier":
        return undefined
      case "intrinsic": {
        const where = `intrinsic ${s.intrin.name}`
        if (expect.noIntrinsics) return { where: at(where), reason: "an intrinsic statement is left (run lowering.LowerIntrinsics)" }
        if (s.inputs.length !== s.intrin.inputs.length) return { where: at(where), reason: `${plural(s.inputs.length, "input region")} for ${s.intrin.inputs.length} declared inputs` }
        if (s.intrin.compute.body.kind === "reduce" && s.intrin.mode !== "update") return { where: at(where), reason: "a reduction must be an update" }
        for (const [k, r] of [s.output, ...s.inputs].entries()) {
          const bad = region(r, k === 0 ? `${where}: output` : `${where}: input ${k - 1}`)
          if (bad) return bad
        }
        return undefined
      }
    }
  }
  return stmt(f.body)
}
