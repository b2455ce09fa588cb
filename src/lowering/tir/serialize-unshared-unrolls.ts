// lowering.SerializeUnsharedUnrolls (the wasm target): an unrolled reduction loop whose copies
// would share no load becomes serial, before UnrollLoops copies it.
//
// Why: V8's optimizing tier (TurboFan, the engine of Chromium and Node) issues the loads of one
// straight-line region ahead of its arithmetic — a load is on the effect chain, a multiply or add
// floats down to its use — so every value loaded in the region is live at once beside the
// accumulators, and what the 16 vector registers cannot hold is spilled to the stack. Unrolling
// pays where the copies share loads (a row's kernel taps read the columns' inputs once, the
// emitter reusing them from a local: vector.ts) or index a register tile; copies that share
// nothing (the kernel rows of a one-row conv tile: each reads an input row and a weight row of
// its own) only lengthen the region. A serial loop's iterations are regions of their own (the
// engine unrolls a short loop itself, with a branch between copies). MobileNetV2's depthwise
// convs on wasm (8 columns, 3×3 taps, one straight-line region of 39 loads: ~190 stack accesses
// to 72 products in V8's code) ran 3.99 → 3.24 ms with the kernel rows serial (Node 20, Zen 4,
// CPU time alternated with the unrolled build: docs/scheduling.md).
//
// A reduction loop: its variable indexes no store. Loads compared: reads of buffers not allocated
// in the function (params; a local tile's reads are registers), each copy's indices simplified.
import { c, collect, constValue, exprKey, substitute, type Expr } from "../../ast/te/expr.js"
import { simplify } from "../../ast/te/simplify.js"
import { mapStmt, type Stmt } from "../../ast/tir/tir.js"
import { tirPass, type TirPass } from "./tir-pass.js"

/** Buffers allocated inside `s`. */
const allocated = (s: Stmt, out = new Set<string>()): Set<string> => {
  mapStmt(s, (x) => {
    if (x.kind === "allocate") out.add(x.buffer.name)
    return undefined
  })
  return out
}

/** Whether variable `v` occurs in any store's indices inside `s`. */
const indexesStore = (s: Stmt, v: string): boolean => {
  let found = false
  mapStmt(s, (x) => {
    if (x.kind === "store" && x.indices.some((i) => collect(i, (e) => e.kind === "var" && e.name === v).length > 0)) found = true
    return undefined
  })
  return found
}

/** A read of a buffer outside `local`, with the unrolled loops of constant bounds around it inside the body (their copies are one region too). */
interface RegionRead {
  readonly source: string
  readonly indices: readonly Expr[]
  readonly unrolled: readonly { readonly v: string; readonly lo: number; readonly ext: number }[]
}

const regionReads = (s: Stmt, local: ReadonlySet<string>, around: RegionRead["unrolled"] = [], out: RegionRead[] = []): RegionRead[] => {
  const ofExpr = (e: Expr) => {
    for (const r of collect(e, (x) => x.kind === "read")) if (r.kind === "read" && !local.has(r.source)) out.push({ source: r.source, indices: r.indices, unrolled: around })
  }
  switch (s.kind) {
    case "for": {
      const lo = constValue(s.min)
      const ext = constValue(s.extent)
      const inner = s.forKind === "unrolled" && lo !== undefined && ext !== undefined ? [...around, { v: s.var.name, lo, ext }] : around
      regionReads(s.body, local, inner, out)
      break
    }
    case "seq":
      s.body.forEach((b) => regionReads(b, local, around, out))
      break
    case "store":
      s.indices.forEach(ofExpr)
      ofExpr(s.value)
      break
    case "if":
      ofExpr(s.cond)
      regionReads(s.then, local, around, out)
      if (s.else) regionReads(s.else, local, around, out)
      break
    case "let":
      ofExpr(s.value)
      regionReads(s.body, local, around, out)
      break
    case "allocate":
      regionReads(s.body, local, around, out)
      break
    case "evaluate":
      ofExpr(s.value)
      break
    default:
      break
  }
  return out
}

/** Every assignment of the unrolled loops `loops` (their cartesian product). */
const assignments = (loops: RegionRead["unrolled"]): Map<string, Expr>[] =>
  loops.reduce<Map<string, Expr>[]>((acc, l) => acc.flatMap((m) => Array.from({ length: l.ext }, (_, i) => new Map(m).set(l.v, c(l.lo + i)))), [new Map()])

/**
 * Whether two of the loop's copies (v = lo … lo + ext − 1) read the same element of a buffer, the
 * unrolled loops inside each copy expanded (what UnrollLoops makes one straight-line region).
 */
export const copiesShareLoad = (body: Stmt, v: string, lo: number, ext: number, local: ReadonlySet<string>): boolean => {
  const seen = new Map<string, number>()
  for (const r of regionReads(body, local)) {
    const used = r.unrolled.filter((l) => r.indices.some((i) => collect(i, (e) => e.kind === "var" && e.name === l.v).length > 0))
    for (const inner of assignments(used)) {
      for (let k = lo; k < lo + ext; k++) {
        const env = new Map(inner).set(v, c(k))
        const key = `${r.source}[${r.indices.map((i) => exprKey(simplify(substitute(i, env)))).join(",")}]`
        const at = seen.get(key)
        if (at !== undefined && at !== k) return true
        seen.set(key, k)
      }
    }
  }
  return false
}

export const serializeUnsharedUnrolls: TirPass = tirPass("lowering.SerializeUnsharedUnrolls", 1, (f) => {
  const local = allocated(f.body)
  return {
    ...f,
    body: mapStmt(f.body, (x) => {
      if (x.kind !== "for" || x.forKind !== "unrolled") return undefined
      const lo = constValue(x.min)
      const ext = constValue(x.extent)
      if (lo === undefined || ext === undefined || ext < 2 || indexesStore(x.body, x.var.name)) return undefined
      return copiesShareLoad(x.body, x.var.name, lo, ext, local) ? undefined : { ...x, forKind: "serial" }
    }),
  }
})
