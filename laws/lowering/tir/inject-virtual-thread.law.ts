// lowering.InjectVirtualThread: same meaning — on random schedules (vthreads among their loops, cache
// stages attached at and inside them) and on the nest it is for: a cache stage (cacheWrite local,
// cacheRead local or shared) computed at the vthread axis of its consumer, so each vthread fills
// and reads a buffer of its own; its output verifies and has no vthread loop left.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as S from "../../../src/ast/schedule/schedule.js"
import { buildCompute } from "../../../src/ast/te/arbitrary.js"
import { mapStmt, type PrimFunc } from "../../../src/ast/tir/tir.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { injectVirtualThread } from "../../../src/lowering/tir/inject-virtual-thread.js"
import { lawParams } from "../../support.js"
import { applyPass, arbLoweredCase, passLaws, type LoweredCase } from "./support.js"

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

const vthreads = (f: PrimFunc): number => {
  let n = 0
  mapStmt(f.body, (x) => {
    if (x.kind === "for" && x.forKind === "vthread") n++
    return undefined
  })
  return n
}

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
})
