// The phases of a `wasm` kernel (emit.ts has the calling convention): under the body's top-level
// allocations (in the region at $shared, which every thread's phases share) and lets, each
// statement of its sequence is a phase, run when $phase is its index or < 0; a phase that is a
// parallel loop runs only its chunk of iterations [$begin, $end).
import type { Stmt } from "../../ast/tir/tir.js"
import { storedBuffers } from "../../ast/tir/analysis.js"
import { VCLASS, type FnBuilder } from "./builder.js"
import { emitExprAs, invalidate } from "./expr.js"
import { frameSlot, PHASE, SHARED, type FrameSize, type WasmPhase } from "./layout.js"
import { promotable } from "./registers.js"
import { emitStmt, freshRegion, withVar, type StmtCtx } from "./stmt.js"

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
export const emitPhases = (fb: FnBuilder, sc: StmtCtx, s: Stmt, frame: FrameSize, phases: WasmPhase[]): void => {
  if (s.kind === "allocate" && !((s.buffer.dtype === "float32" || s.buffer.dtype === "int32") && promotable(s.buffer, s.body))) {
    const { info, top } = frameSlot(s.buffer, SHARED, sc.top, frame)
    return emitPhases(fb, { ...sc, top, bufs: new Map(sc.bufs).set(s.buffer.name, info) }, s.body, frame, phases)
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
