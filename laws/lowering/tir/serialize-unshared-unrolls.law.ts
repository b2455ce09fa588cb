// lowering.SerializeUnsharedUnrolls (the wasm target's TIR pipeline): the laws of every TIR pass on
// lowered random schedules and on them with loops retagged unrolled; and its decision against a
// concrete oracle: a reduction loop it leaves unrolled has two copies reading one element (under
// values drawn for every other variable, the unrolled loops inside each copy expanded), and one it
// makes serial has none under some draw. Example: a padded depthwise blocked conv at the conv rule's
// defaults on a target without FMA — the kernel rows (sharing nothing in a one-row tile) serial,
// the kernel columns (sharing the columns' inputs) unrolled.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { prng } from "../../../src/ast/graph/arbitrary.js"
import { add, and, c, collect, f32, ge, lt, mul, select, sub, substitute, type Expr } from "../../../src/ast/te/expr.js"
import { simplify } from "../../../src/ast/te/simplify.js"
import { at, compute, placeholder, reduceAxis, sum } from "../../../src/ast/te/tensor.js"
import type { Stmt } from "../../../src/ast/tir/tir.js"
import { baseSchedule } from "../../../src/lowering/lower-group.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { templateFor } from "../../../src/lowering/templates/template-for.js"
import { serializeUnsharedUnrolls } from "../../../src/lowering/tir/serialize-unshared-unrolls.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { arbLoweredCase, arbVariedLoops, loopsOf, passLaws } from "./support.js"

const varied = arbVariedLoops({ kinds: ["unrolled", "serial"] })

passLaws(serializeUnsharedUnrolls)
passLaws(serializeUnsharedUnrolls, { cases: varied, runs: 30, variant: "loops retagged unrolled" })

type For = Extract<Stmt, { kind: "for" }>

const allocatedIn = (s: Stmt): Set<string> => {
  const out = new Set<string>()
  const rec = (x: Stmt): void => {
    if (x.kind === "allocate") out.add(x.buffer.name)
    if (x.kind === "for" || x.kind === "allocate" || x.kind === "let") rec(x.body)
    if (x.kind === "seq") x.body.forEach(rec)
    if (x.kind === "if") {
      rec(x.then)
      if (x.else) rec(x.else)
    }
  }
  rec(s)
  return out
}

/** Every (read, inner unrolled loops around it) in `s`, reads of `local` buffers left out. */
const readsIn = (s: Stmt, local: ReadonlySet<string>, around: For[] = [], out: { read: Expr & { kind: "read" }; around: For[] }[] = []) => {
  const ofExpr = (e: Expr) => collect(e, (x) => x.kind === "read").forEach((r) => r.kind === "read" && !local.has(r.source) && out.push({ read: r, around }))
  switch (s.kind) {
    case "for":
      readsIn(s.body, local, s.forKind === "unrolled" ? [...around, s] : around, out)
      break
    case "seq":
      s.body.forEach((b) => readsIn(b, local, around, out))
      break
    case "store":
      s.indices.forEach(ofExpr)
      ofExpr(s.value)
      break
    case "if":
      ofExpr(s.cond)
      readsIn(s.then, local, around, out)
      if (s.else) readsIn(s.else, local, around, out)
      break
    case "let":
      ofExpr(s.value)
      readsIn(s.body, local, around, out)
      break
    case "allocate":
      readsIn(s.body, local, around, out)
      break
    case "evaluate":
      ofExpr(s.value)
      break
    default:
      break
  }
  return out
}

/** Under one draw of values for the free variables: whether two copies of `loop` read one element (concrete indices). */
const sharesUnder = (loop: For, local: ReadonlySet<string>, seed: number): boolean => {
  const rng = prng(seed)
  const drawn = new Map<string, Expr>()
  const value = (name: string) => {
    if (!drawn.has(name)) drawn.set(name, c(rng.int(0, 40)))
    return drawn.get(name)!
  }
  const lo = (loop.min as { value: number }).value
  const ext = (loop.extent as { value: number }).value
  const seen = new Map<string, number>()
  for (const { read, around } of readsIn(loop.body, local)) {
    const inner = around.filter((l) => l.min.kind === "const" && l.extent.kind === "const")
    const envs = inner.reduce<Map<string, Expr>[]>(
      (acc, l) => acc.flatMap((m) => Array.from({ length: (l.extent as { value: number }).value }, (_, i) => new Map(m).set(l.var.name, c((l.min as { value: number }).value + i)))),
      [new Map()],
    )
    for (const env of envs)
      for (let k = lo; k < lo + ext; k++) {
        const full = new Map(env).set(loop.var.name, c(k))
        const idx = read.indices.map((i) => {
          let e = substitute(i, full)
          for (const n of new Set(collect(e, (x) => x.kind === "var").map((x) => (x as { name: string }).name))) e = substitute(e, new Map([[n, value(n)]]))
          return JSON.stringify(simplify(e))
        })
        const key = `${read.source}[${idx.join(",")}]`
        const at = seen.get(key)
        if (at !== undefined && at !== k) return true
        seen.set(key, k)
      }
  }
  return false
}

/** A padded (1) depthwise blocked conv (NCHW4c) lowered at the conv rule's defaults on a target without FMA (the wasm record). */
const depthwiseDefault = (o: { CB: number; H: number; W: number; K: number; stride: number }) => {
  const { CB, H, W, K, stride } = o
  const X = placeholder("X", [1, CB, H, W, 4])
  const Wt = placeholder("W", [CB, 1, K, K, 1, 4])
  const padded = compute("pad", [1, CB, H + 2, W + 2, 4], (n, cb, y, x, l) => {
    const [iy, ix] = [sub(y, c(1)), sub(x, c(1))]
    return select(and(and(ge(iy, c(0)), lt(iy, c(H))), and(ge(ix, c(0)), lt(ix, c(W)))), at(X, n, cb, iy, ix, l), f32(0))
  })
  const [OH, OW] = [Math.floor((H + 2 - K) / stride) + 1, Math.floor((W + 2 - K) / stride) + 1]
  const [ic, ry, rx] = [reduceAxis(1, "ic"), reduceAxis(K, "ry"), reduceAxis(K, "rx")]
  const conv = compute("conv", [1, CB, OH, OW, 4], (n, cb, y, x, l) =>
    sum(mul(at(padded, n, add(cb, ic.var), add(mul(y, c(stride)), ry.var), add(mul(x, c(stride)), rx.var), l), at(Wt, cb, ic.var, ry.var, rx.var, c(0), l)), [ic, ry, rx]), "float32", "conv2d_nchwc")
  const base = baseSchedule([conv])
  const t = templateFor(base)
  const knobs = t.space([conv], base)
  const d = t.defaults(knobs, { vectorLanes: 4, cores: 1, vectorRegisters: 16, fmaUnits: 1, fmaLatency: 4, fusedMultiplyAdd: false })
  return lowerSync(t.apply([conv], base, d))
}

const arbDepthwise = fc
  .record({ CB: fc.integer({ min: 1, max: 2 }), H: fc.integer({ min: 3, max: 9 }), W: fc.integer({ min: 3, max: 12 }), K: fc.constantFrom(2, 3), stride: fc.constantFrom(1, 2) })
  .map((o) => ({ func: depthwiseDefault(o) }))

/** Whether variable `v` indexes a store inside `s`. */
const indexesStore = (s: Stmt, v: string): boolean => {
  switch (s.kind) {
    case "store":
      return s.indices.some((i) => collect(i, (e) => e.kind === "var" && e.name === v).length > 0)
    case "for":
    case "allocate":
    case "let":
      return indexesStore(s.body, v)
    case "seq":
      return s.body.some((b) => indexesStore(b, v))
    case "if":
      return indexesStore(s.then, v) || (s.else !== undefined && indexesStore(s.else, v))
    default:
      return false
  }
}

describe("lowering.SerializeUnsharedUnrolls: its decision", () => {
  it("a reduction loop left unrolled has copies that read one element under any draw; one made serial has copies that share nothing under some draw", () => {
    const seen = { kept: 0, serial: 0 }
    fc.assert(
      fc.property(fc.oneof(arbLoweredCase(["conv2d", "conv2d_nchwc", "depthwise", "matmul", "pool"]), varied, arbDepthwise), (lc) => {
        const out = runTirSync(serializeUnsharedUnrolls, lc.func)
        const local = allocatedIn(lc.func.body)
        const before = loopsOf(lc.func.body)
        const after = loopsOf(out.body)
        expect(after.length).toBe(before.length)
        before.forEach((l, i) => {
          const a = after[i]
          if (l.forKind !== "unrolled") return expect(a.forKind).toBe(l.forKind)
          const candidate = l.min.kind === "const" && l.extent.kind === "const" && l.extent.value >= 2 && !indexesStore(l.body, l.var.name)
          if (!candidate) return expect(a.forKind).toBe("unrolled")
          if (a.forKind === "unrolled") {
            seen.kept++
            for (const seed of [1, 2, 3]) expect(sharesUnder(l, local, seed)).toBe(true)
          } else {
            expect(a.forKind).toBe("serial")
            seen.serial++
            expect([1, 2, 3].some((seed) => !sharesUnder(l, local, seed))).toBe(true)
          }
        })
      }),
      lawParams(60),
    )
    expect(seen.kept).toBeGreaterThan(0)
    expect(seen.serial).toBeGreaterThan(0)
  })

  it("a padded depthwise blocked conv at the defaults of a target without FMA: kernel rows serial, kernel columns unrolled", () => {
    const f = depthwiseDefault({ CB: 2, H: 9, W: 9, K: 3, stride: 1 })
    const kind = (s: Stmt, name: string) => loopsOf(s).find((l) => l.var.name === name || l.var.name.endsWith(`.${name}`))?.forKind
    expect([kind(f.body, "ry"), kind(f.body, "rx")]).toEqual(["unrolled", "unrolled"])
    const out = runTirSync(serializeUnsharedUnrolls, f)
    expect([kind(out.body, "ry"), kind(out.body, "rx")]).toEqual(["serial", "unrolled"])
  })
})
