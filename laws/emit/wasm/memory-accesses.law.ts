// The wasm emitter's accesses of a loop (src/emit/wasm/hoist.ts memoryAccesses, what hoistBases and
// stepBases hoist from): built from each statement's remembered events, they are what one walk of
// the loop's statements and expressions finds — each store and each single-index read of a buffer
// the scope knows or a frame allocation met before it, in order, with its start local and element
// size. Law: on every loop of the golden kernels (blocked, depthwise and Winograd convs with their
// frame buffers, dense, softmax), asked in nest order and in reverse, over scopes knowing all of the
// parameters or some, the two agree.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { collect, type Expr } from "../../../src/ast/te/expr.js"
import type { PrimFunc, Stmt } from "../../../src/ast/tir/tir.js"
import { STORAGE } from "../../../src/emit/wasm/builder.js"
import type { Scope } from "../../../src/emit/wasm/expr.js"
import { memoryAccesses } from "../../../src/emit/wasm/hoist.js"
import { FRAME } from "../../../src/emit/wasm/layout.js"
import { GOLDEN_CASES, goldenFunc, WASM_GOLDEN_CASES } from "../../../scripts/update-goldens.js"
import { lawParams } from "../../support.js"

/** memoryAccesses' definition: one walk, a buffer allocated in a frame known from its allocation on. */
const accessesByWalk = (sc: Pick<Scope, "bufs">, s: Stmt): { start: number; index: Expr; size: number }[] => {
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
        return ofExpr(x.value)
      }
      case "for":
        return rec(x.body)
      case "seq":
        return x.body.forEach(rec)
      case "if":
        ofExpr(x.cond)
        rec(x.then)
        return x.else && rec(x.else)
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

/** Every loop of a statement, outermost first. */
const loopsOf = (s: Stmt): Stmt[] => {
  switch (s.kind) {
    case "for":
      return [s, ...loopsOf(s.body)]
    case "seq":
      return s.body.flatMap(loopsOf)
    case "if":
      return [...loopsOf(s.then), ...(s.else ? loopsOf(s.else) : [])]
    case "allocate":
    case "let":
      return loopsOf(s.body)
    default:
      return []
  }
}

const FUNCS: readonly PrimFunc[] = [...GOLDEN_CASES, ...WASM_GOLDEN_CASES].map((g) => goldenFunc(g()))

describe("wasm: memoryAccesses from remembered events is one walk's", () => {
  it("on every loop of the golden kernels, in any order, over any known parameters", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: FUNCS.length - 1 }), fc.boolean(), fc.integer({ min: 0, max: 255 }), (k, reversed, known) => {
        const f = FUNCS[k]
        const sc = { bufs: new Map(f.params.filter((_, j) => (known >> j) % 2 === 0 || known === 0).map((p, j) => [p.name, { base: j, dtype: p.dtype }] as const)) } as unknown as Pick<Scope, "bufs">
        const loops = loopsOf(f.body)
        expect(loops.length).toBeGreaterThan(0)
        for (const loop of reversed ? [...loops].reverse() : loops) expect(memoryAccesses(sc, loop)).toEqual(accessesByWalk(sc, loop))
        expect(memoryAccesses(sc, f.body)).toEqual(accessesByWalk(sc, f.body))
      }),
      lawParams(40),
    )
  })
})
