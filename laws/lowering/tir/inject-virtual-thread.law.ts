// lowering.InjectVirtualThread: same meaning — on random schedules (vthreads among their loops, cache
// stages attached at and inside them) and on the nest it is for: a cache stage (cacheWrite local,
// cacheRead local or shared) computed at the vthread axis of its consumer, so each vthread fills
// and reads a buffer of its own; its output verifies and has no vthread loop left. Before /
// Expected: the loop pushed down to the statements that depend on it (TVM's VTInjector), those
// copied in place and interleaved, the others (a fetch, a barrier) kept once, a buffer filled per
// vthread given a section each; the copies of the whole body one after another where a buffer
// outside the loop is written per vthread at the same place.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as S from "../../../src/ast/schedule/schedule.js"
import { buildCompute } from "../../../src/ast/te/arbitrary.js"
import { add, c, f32, read, v, type Expr } from "../../../src/ast/te/expr.js"
import { printStmt, seq, type Buffer, type PrimFunc, type Stmt } from "../../../src/ast/tir/tir.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { injectVirtualThread } from "../../../src/lowering/tir/inject-virtual-thread.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { lawParams } from "../../support.js"
import { applyPass, arbLoweredCase, arbVariedLoops, passLaws, profileOf, type LoweredCase, type Profile } from "./support.js"

/**
 * A family's output (its intermediates inlined) with a cache stage — its local accumulator, or a
 * local or shared copy of one of its inputs — computed at a data axis split into 2–4 vthreads.
 */
const arbCacheAtVthread = (): fc.Arbitrary<LoweredCase> =>
  fc
    .tuple(
      fc.constantFrom("matmul", "batch_matmul", "conv2d", "elementwise", "pool"),
      fc.integer({ min: 0, max: 0x7fffffff }),
      fc.constantFrom("cacheWrite", "local", "shared"),
      fc.integer({ min: 2, max: 4 }),
      fc.nat(),
    )
    .map(([family, seed, cache, vthreads, pick]) => {
      const cc = buildCompute(family as Parameters<typeof buildCompute>[0], seed)
      const out = cc.outputs[0].name
      let s = S.createSchedule(cc.outputs)
      for (const n of s.order) if (n !== out && s.stages.get(n)!.op.body.kind !== "reduce") s = S.computeInline(s, n)
      const inputs = s.stages.get(out)!.op.inputs
      const c = cache === "cacheWrite" ? S.cacheWrite(s, out, "local") : S.cacheRead(s, inputs[pick % inputs.length].name, cache, [out])
      s = c.schedule
      const st = s.stages.get(out)!
      const data = st.leaf.filter((a) => st.axes.get(a)!.type === "data" && st.axes.get(a)!.extent >= 2)
      if (!data.length) return { func: lowerSync(s), outputs: cc.outputs, inputs: cc.inputs }
      const sp = S.split(s, out, data[pick % data.length], { nparts: Math.min(vthreads, st.axes.get(data[pick % data.length])!.extent) })
      s = S.computeAt(S.bind(sp.schedule, out, sp.outer, "vthread"), c.stage, out, sp.outer)
      return { func: lowerSync(s), outputs: cc.outputs, inputs: cc.inputs }
    })

passLaws(injectVirtualThread)
passLaws(injectVirtualThread, { cases: arbCacheAtVthread(), runs: 30, variant: "a cache stage computed at a vthread axis" })

/** Lowered cases with vthreads, some of non-constant bounds (the same values through a let). */
const relaxed = arbVariedLoops({ relax: "vthread" }, fc.oneof(arbLoweredCase(), arbCacheAtVthread()))

const vthreads = (f: PrimFunc): number => profileOf(f.body).get("vthread") ?? 0

/** The profile InjectVirtualThread promises: a vthread loop of constant bounds counted as its copies, any other as one serial loop. */
const expected = (s: Stmt, p: Profile = new Map(), times = 1): Profile => {
  switch (s.kind) {
    case "for": {
      if (s.forKind === "vthread" && s.min.kind === "const" && s.extent.kind === "const") return expected(s.body, p, times * Math.max(0, s.extent.value))
      const kind = s.forKind === "vthread" ? "serial" : s.forKind
      p.set(kind, (p.get(kind) ?? 0) + times)
      return expected(s.body, p, times)
    }
    case "seq":
      for (const b of s.body) expected(b, p, times)
      return p
    case "if":
      expected(s.then, p, times)
      return s.else ? expected(s.else, p, times) : p
    case "allocate":
    case "let":
      return expected(s.body, p, times)
    default:
      return profileOf(s, p, times)
  }
}

const sorted = (p: Profile) => Object.fromEntries([...p].filter(([, n]) => n > 0).sort(([a], [b]) => a.localeCompare(b)))

// Before / Expected: which order the copies take
const A: Buffer = { name: "A", dtype: "float32", shape: [8], scope: "global" }
const vt = v("vt")
const vthreadLoop = (body: Stmt, min: Expr = c(1), extent: Expr = c(3)): Stmt => ({ kind: "for", var: vt, min, extent, forKind: "vthread", thread: "vthread", body })
const store = (buffer: string, index: Expr, value: number): Stmt => ({ kind: "store", buffer, indices: [index], value: f32(value) })
const injected = (body: Stmt): string => printStmt(runTirSync(injectVirtualThread, { name: "f", params: [A], body }, { verify: false }).body)
const lines = (...ls: string[]) => ls.map((l) => `  ${l}`).join("\n")

describe("lowering.InjectVirtualThread", () => {
  it("leaves no vthread loop (the cases have some)", () => {
    let seen = 0
    fc.assert(
      fc.property(fc.oneof(arbLoweredCase(), arbCacheAtVthread()), (c) => {
        seen += vthreads(c.func)
        expect(vthreads(applyPass(injectVirtualThread, c).output)).toBe(0)
      }),
      lawParams(40),
    )
    expect(seen).toBeGreaterThan(0)
  })

  it("a vthread loop of constant bounds becomes at most its copies (a statement that does not depend on the vthread kept once), one of non-constant bounds a serial loop; every other store is kept", () => {
    let serial = 0
    let fewer = 0
    fc.assert(
      fc.property(relaxed, (c) => {
        const out = runTirSync(injectVirtualThread, c.func, { verify: false })
        const got = profileOf(out.body)
        const copies = expected(c.func.body)
        for (const [kind, n] of got) expect(n, kind).toBeLessThanOrEqual(copies.get(kind) ?? 0)
        expect(got.get("store") ?? 0).toBeGreaterThanOrEqual(profileOf(c.func.body).get("store") ?? 0)
        if (JSON.stringify(sorted(got)) !== JSON.stringify(sorted(copies))) fewer++
        if ((profileOf(out.body).get("serial") ?? 0) > (profileOf(c.func.body).get("serial") ?? 0)) serial++
      }),
      lawParams(40),
    )
    expect(serial).toBeGreaterThan(0)
    expect(fewer).toBeGreaterThan(0)
  })

  it("interleaves the copies statement by statement, each at its vthread index from the loop's min", () => {
    expect(injected(vthreadLoop(seq([store("A", vt, 1), store("A", add(vt, c(4)), 2)])))).toBe(
      lines("A[1] = 1.0f", "A[2] = 1.0f", "A[3] = 1.0f", "A[5] = 2.0f", "A[6] = 2.0f", "A[7] = 2.0f"),
    )
    expect(injected(vthreadLoop(store("A", vt, 1), c(0), c(2)))).toBe(lines("A[0] = 1.0f", "A[1] = 1.0f"))
  })

  it("keeps what does not depend on the vthread once (a local filled with a constant, a barrier) and copies the rest in place", () => {
    const L: Buffer = { name: "L", dtype: "float32", shape: [1], scope: "local" }
    const local: Stmt = { kind: "allocate", buffer: L, body: seq([store("L", c(0), 3), { kind: "store", buffer: "A", indices: [vt], value: read("L", [c(0)], "float32") }]) }
    expect(injected(vthreadLoop(seq([local, store("A", add(vt, c(4)), 2)]), c(0), c(2)))).toBe(
      lines("allocate L: float32[1] @local", "L[0] = 3.0f", "A[0] = L[0]", "A[1] = L[0]", "A[4] = 2.0f", "A[5] = 2.0f"),
    )
    expect(injected(vthreadLoop(seq([store("A", vt, 1), { kind: "barrier" }, store("A", add(vt, c(4)), 2)]), c(0), c(2)))).toBe(
      lines("A[0] = 1.0f", "A[1] = 1.0f", "barrier()", "A[4] = 2.0f", "A[5] = 2.0f"),
    )
  })

  it("gives a buffer filled per vthread a section each, the vthread its first index (vthreads cost registers)", () => {
    const L: Buffer = { name: "L", dtype: "float32", shape: [1], scope: "local" }
    const body: Stmt = { kind: "allocate", buffer: L, body: seq([{ kind: "store", buffer: "L", indices: [c(0)], value: read("A", [vt], "float32") }, { kind: "store", buffer: "A", indices: [add(vt, c(4))], value: read("L", [c(0)], "float32") }]) }
    expect(injected(vthreadLoop(body, c(0), c(2)))).toBe(lines("allocate L.vt: float32[2, 1] @local", "L.vt[0, 0] = A[0]", "L.vt[1, 0] = A[1]", "A[4] = L.vt[0, 0]", "A[5] = L.vt[1, 0]"))
  })

  it("a shared tile fetched for every vthread once a step: the fetch and its barriers once, the vthreads' updates copied inside the thread's loops", () => {
    const S: Buffer = { name: "S", dtype: "float32", shape: [4], scope: "shared" }
    const t = v("t")
    const r = v("r")
    const fetch: Stmt = { kind: "store", buffer: "S", indices: [t], value: read("A", [add(r, t)], "float32") }
    const update: Stmt = { kind: "store", buffer: "B", indices: [vt], value: add(read("B", [vt], "float32"), read("S", [add(vt, t)], "float32")) }
    const thread: Stmt = { kind: "for", var: t, min: c(0), extent: c(2), forKind: "thread", thread: "threadIdx.x", body: { kind: "for", var: r, min: c(0), extent: c(2), forKind: "serial", body: seq([{ kind: "barrier" }, fetch, { kind: "barrier" }, update]) } }
    expect(injected({ kind: "allocate", buffer: S, body: vthreadLoop(thread, c(0), c(2)) })).toBe(
      lines("allocate S: float32[4] @shared", "for[threadIdx.x] t in [0, +2):", "  for r in [0, +2):", "    barrier()", "    S[t] = A[(r + t)]", "    barrier()", "    B[0] = (B[0] + S[t])", "    B[1] = (B[1] + S[(1 + t)])"),
    )
  })

  it("runs the copies of the whole body one after another where a buffer outside the loop is written per vthread at the same place (a tile each vthread fetches for itself)", () => {
    const S: Buffer = { name: "S", dtype: "float32", shape: [1], scope: "shared" }
    const body = seq([{ kind: "store", buffer: "S", indices: [c(0)], value: read("A", [vt], "float32") }, { kind: "barrier" }, { kind: "store", buffer: "A", indices: [add(vt, c(4))], value: read("S", [c(0)], "float32") }])
    expect(injected({ kind: "allocate", buffer: S, body: vthreadLoop(body, c(0), c(2)) })).toBe(
      lines("allocate S: float32[1] @shared", "S[0] = A[0]", "barrier()", "A[4] = S[0]", "S[0] = A[1]", "barrier()", "A[5] = S[0]"),
    )
  })

  it("keeps a vthread loop of non-constant bounds as a serial loop", () => {
    const n = v("n")
    const body = store("A", vt, 1)
    for (const [min, extent] of [[c(0), n], [n, c(2)]] as const)
      expect(injected({ kind: "let", var: n, value: c(2), body: vthreadLoop(body, min, extent) })).toBe(
        lines("let n = 2", `for vt in [${min === n ? "n" : "0"}, +${extent === n ? "n" : "2"}):`, "  A[vt] = 1.0f"),
      )
  })
})
