// lowering.RewriteStorage (on flat storage, as it runs): same meaning; its output verifies — on
// random schedules and on stages all computed at root, whose intermediates' lifetimes do not all
// overlap (chains, softmax, two outputs of intermediates of their own, chains of tensorized stages
// used through intrinsic regions); and what it promises beyond meaning: it only renames (an access
// goes to a buffer of the same dtype and scope, large enough), shares exactly where dtype and scope
// agree, and returns a function it does not change (nothing to share, or storage not flat) as it is.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { prng } from "../../../src/ast/graph/arbitrary.js"
import { fromArray } from "../../../src/ast/graph/tensor.js"
import * as S from "../../../src/ast/schedule/schedule.js"
import { arbComputeCase } from "../../../src/ast/te/arbitrary.js"
import { add, c, cast, collect, f32, max, mul, read, v, type Expr } from "../../../src/ast/te/expr.js"
import { at, compute, placeholder, type ComputeTensor } from "../../../src/ast/te/tensor.js"
import { evaluatePrimFunc } from "../../../src/ast/tir/evaluate.js"
import { mapStmt, seq, type Buffer, type PrimFunc, type Stmt } from "../../../src/ast/tir/tir.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { flattenStorage } from "../../../src/lowering/tir/flatten-storage.js"
import { rewriteStorage } from "../../../src/lowering/tir/rewrite-storage.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { applyPass, passLaws, vectorAdd, type LoweredCase } from "./support.js"

/** X → t1 → … → tL (elementwise, each reading the one before and sometimes X), every stage at root, some split. */
const arbRootChain = (): fc.Arbitrary<LoweredCase> =>
  fc.integer({ min: 0, max: 0x7fffffff }).map((seed) => {
    const rng = prng(seed)
    const [m, n] = [rng.int(1, 4), rng.int(1, 9)]
    const X = placeholder("X", [m, n])
    let prev: ComputeTensor | undefined
    for (let k = 0; k < rng.int(3, 5); k++) {
      const src = prev
      const f = rng.pick([(a: ReturnType<typeof at>) => add(a, f32(1)), (a: ReturnType<typeof at>) => mul(a, f32(0.5)), (a: ReturnType<typeof at>) => max(a, f32(0))])
      const withX = rng.next() < 0.3
      prev = compute(`t${k}`, [m, n], (i, j) => {
        const a = src ? at(src, i, j) : at(X, i, j)
        return withX ? add(f(a), at(X, i, j)) : f(a)
      })
    }
    let s = S.createSchedule([prev!])
    for (const name of s.order)
      if (rng.next() < 0.4) {
        const leaf = s.stages.get(name)!.leaf
        s = S.split(s, name, leaf[leaf.length - 1], { factor: rng.int(1, n) }).schedule
      }
    return { func: lowerSync(s), outputs: [prev!], inputs: new Map([["X", fromArray("float32", [m, n], Array.from({ length: m * n }, () => rng.float(-1, 1)))]]) }
  })

/** The softmax family with every stage at root (rowmax, exp, rowsum, softmax). */
const arbRootSoftmax = (): fc.Arbitrary<LoweredCase> => arbComputeCase(["softmax"]).map((cc) => ({ ...cc, func: lowerSync(S.createSchedule(cc.outputs)) }))

/**
 * Two outputs, each from an intermediate of its own (A0 → O1, A1 → O2, all at root): the
 * intermediates' lifetimes do not overlap, so one buffer serves both — unless A1 is of another
 * dtype (int32) or scope (local), which must keep it apart.
 */
const arbTwoOutputs = (): fc.Arbitrary<LoweredCase> =>
  fc.tuple(fc.integer({ min: 0, max: 0x7fffffff }), fc.constantFrom("float32", "int32"), fc.constantFrom("global", "local")).map(([seed, dtype, scope]) => {
    const rng = prng(seed)
    const [m, n] = [rng.int(1, 3), rng.int(1, 6)]
    const X = placeholder("X", [m, n])
    const A0 = compute("A0", [m, rng.int(1, n)], (i, j) => mul(at(X, i, j), f32(0.5)))
    const O1 = compute("O1", A0.shape, (i, j) => max(at(A0, i, j), f32(0)))
    const A1 = compute("A1", [m, n], (i, j) => (dtype === "int32" ? cast("int32", mul(at(X, i, j), f32(4))) : add(at(X, i, j), f32(1))), dtype as "float32" | "int32")
    const O2 = compute("O2", [m, n], (i, j) => add(cast("float32", at(A1, i, j)), f32(1)))
    let s = S.createSchedule([O1, O2])
    if (scope === "local") s = S.setScope(s, "A1", "local")
    return { func: lowerSync(s), outputs: [O1, O2], inputs: new Map([["X", fromArray("float32", [m, n], Array.from({ length: m * n }, () => rng.float(-1, 1)))]]) }
  })

/** X → t0 → … → tL, each tk = t(k-1) + X at root, its columns split by the vector width and tensorized to a vector add (buffers used by intrinsic regions only). */
const arbTensorizedChain = (): fc.Arbitrary<LoweredCase> =>
  fc.tuple(fc.integer({ min: 0, max: 0x7fffffff }), fc.integer({ min: 3, max: 5 }), fc.constantFrom(2, 4)).map(([seed, stages, w]) => {
    const rng = prng(seed)
    const [m, n] = [rng.int(1, 3), w * rng.int(1, 2)]
    const X = placeholder("X", [m, n])
    const ts: ComputeTensor[] = []
    for (let k = 0; k < stages; k++) {
      const src = ts[k - 1]
      ts.push(compute(`t${k}`, [m, n], (i, j) => add(src ? at(src, i, j) : at(X, i, j), at(X, i, j))))
    }
    let s = S.createSchedule([ts[ts.length - 1]])
    for (const t of ts) {
      const sp = S.split(s, t.name, s.stages.get(t.name)!.leaf[1], { factor: w })
      s = S.tensorize(sp.schedule, t.name, sp.inner, vectorAdd(w))
    }
    return { func: lowerSync(s), outputs: [ts[ts.length - 1]], inputs: new Map([["X", fromArray("float32", [m, n], Array.from({ length: m * n }, () => rng.float(-1, 1)))]]) }
  })

/** The allocations atop the function, outermost first. */
const allocationNames = (f: PrimFunc): string[] => {
  const names = (s: Stmt): string[] => (s.kind === "allocate" ? [s.buffer.name, ...names(s.body)] : [])
  return names(f.body)
}
const allocations = (f: PrimFunc): number => allocationNames(f).length

/** Every buffer access of `f` in program order (stores, reads, intrinsic regions), with the buffer it names. */
const accesses = (f: PrimFunc): Buffer[] => {
  const buffers = new Map(f.params.map((p) => [p.name, p]))
  mapStmt(f.body, (x) => {
    if (x.kind === "allocate") buffers.set(x.buffer.name, x.buffer)
    return undefined
  })
  const out: Buffer[] = []
  const expr = (e: Expr) => void collect(e, (y) => y.kind === "read").forEach((r) => out.push(buffers.get((r as { source: string }).source)!))
  const rec = (s: Stmt): void => {
    switch (s.kind) {
      case "store":
        out.push(buffers.get(s.buffer)!)
        s.indices.forEach(expr)
        expr(s.value)
        return
      case "intrinsic":
        for (const r of [s.output, ...s.inputs]) out.push(buffers.get(r.buffer)!)
        return
      case "for":
        return rec(s.body)
      case "seq":
        return s.body.forEach(rec)
      case "if":
        expr(s.cond)
        rec(s.then)
        if (s.else) rec(s.else)
        return
      case "allocate":
      case "let":
        return rec(s.body)
      default:
    }
  }
  rec(f.body)
  return out
}

const rooted = fc.oneof(arbRootChain(), arbRootSoftmax(), arbTwoOutputs(), arbTensorizedChain())

passLaws(rewriteStorage, { after: [flattenStorage()] })
passLaws(rewriteStorage, { after: [flattenStorage()], cases: rooted, variant: "stages at root" })

describe("lowering.RewriteStorage", () => {
  it("only renames: each access of an allocation goes to one of the same dtype and scope and at least its size; a param's stays", () => {
    let kept = 0
    fc.assert(
      fc.property(rooted, (c) => {
        const { input, output } = applyPass(rewriteStorage, c, [flattenStorage()])
        const before = accesses(input)
        const after = accesses(output)
        expect(after.length).toBe(before.length)
        before.forEach((b, k) => {
          const a = after[k]
          if (input.params.includes(b)) expect(a).toBe(b)
          else expect([a.dtype, a.scope, a.shape[0] >= b.shape[0]]).toEqual([b.dtype, b.scope, true])
        })
        if (after.some((a, k) => a.name === before[k].name)) kept++
      }),
      lawParams(30),
    )
    expect(kept).toBeGreaterThan(0)
  })

  it("returns the function as it is where it shares nothing, and where storage is not flat", () => {
    fc.assert(
      fc.property(rooted, (c) => {
        const flat = applyPass(rewriteStorage, c, [flattenStorage()])
        if (allocations(flat.output) === allocations(flat.input)) expect(flat.output).toBe(flat.input)
        expect(applyPass(rewriteStorage, c).output).toBe(c.func)
      }),
      lawParams(30),
    )
  })

  it("a chain's intermediates fit in two buffers (each one's lifetime overlaps only its neighbours'); allocations keep their order", () => {
    fc.assert(
      fc.property(fc.oneof(arbRootChain(), arbTensorizedChain()), (c) => {
        const { input, output } = applyPass(rewriteStorage, c, [flattenStorage()])
        const before = allocationNames(input)
        const after = allocationNames(output)
        expect(after.length).toBe(Math.min(2, before.length))
        expect(after).toEqual(before.filter((n) => after.includes(n)))
      }),
      lawParams(30),
    )
  })

  it("shares one buffer between two intermediates of disjoint lifetimes exactly when they have one dtype and scope", () => {
    fc.assert(
      fc.property(arbTwoOutputs(), (c) => {
        const { output } = applyPass(rewriteStorage, c, [flattenStorage()])
        const buffers = accesses(c.func).filter((b) => b.name === "A1")
        expect(allocations(output)).toBe(buffers[0].dtype === "float32" && buffers[0].scope === "global" ? 1 : 2)
      }),
      lawParams(20),
    )
  })

  it("never adds an allocation, and shares one where lifetimes do not overlap", () => {
    let shared = 0
    fc.assert(
      fc.property(rooted, (c) => {
        const { input, output } = applyPass(rewriteStorage, c, [flattenStorage()])
        expect(allocations(output)).toBeLessThanOrEqual(allocations(input))
        if (allocations(output) < allocations(input)) shared++
      }),
      lawParams(30),
    )
    expect(shared).toBeGreaterThan(0)
  })
})

// Before / Expected on flat storage: lifetimes counted from a buffer's first use, whichever
// allocation that is; an allocation no statement uses hosts any other; a body of one statement.
describe("lowering.RewriteStorage: lifetimes", () => {
  const out: Buffer = { name: "out", dtype: "float32", shape: [2], scope: "global" }
  const buf = (name: string): Buffer => ({ name, dtype: "float32", shape: [1], scope: "global" })
  const put = (buffer: string, index: number, value: Expr): Stmt => ({ kind: "store", buffer, indices: [c(index)], value })
  const get = (buffer: string): Expr => read(buffer, [c(0)], "float32")
  const allocated = (names: string[], body: Stmt): PrimFunc => ({ name: "f", params: [out], body: names.reduceRight<Stmt>((inner, n) => ({ kind: "allocate", buffer: buf(n), body: inner }), body) })
  const run = (f: PrimFunc) => runTirSync(rewriteStorage, f, { verify: false })

  it("a buffer used first by the first statement is not given to one whose use lies between its uses", () => {
    // H is allocated first but used only in the middle of B's lifetime
    const f = allocated(["H", "B"], seq([put("B", 0, f32(1)), put("H", 0, f32(5)), put("out", 1, get("H")), put("out", 0, get("B"))]))
    const g = run(f)
    expect(allocationNames(g)).toEqual(["H", "B"])
    expect([...evaluatePrimFunc(g, new Map()).get("out")!.data]).toEqual([1, 5])
  })

  it("an allocation no statement uses hosts the next one", () => {
    const f = allocated(["U", "B"], seq([put("B", 0, f32(1)), put("out", 0, get("B"))]))
    expect(allocationNames(run(f))).toEqual(["U"])
  })

  it("a body of one statement shares nothing", () => {
    const f = allocated(["P", "Q"], { kind: "for", var: v("i"), min: c(0), extent: c(2), forKind: "serial", body: seq([put("P", 0, f32(1)), put("Q", 0, f32(2)), put("out", 0, add(get("P"), get("Q")))]) })
    expect(run(f)).toBe(f)
  })
})
