// The error channels of lowering a group: an op without a compute, an illegal schedule and an
// ill-formed compute are typed and make the group a fallback (its reference kernels) with the
// reason; anything else lowering throws is a bug and propagates.
import { describe, expect, it } from "vitest"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import * as S from "../src/ast/schedule/schedule.js"
import { v } from "../src/ast/te/expr.js"
import { at, compute, IllFormedComputeError, placeholder, reduceAxis, sum } from "../src/ast/te/tensor.js"
import { lowerGroup, type ScheduleFn } from "../src/lowering/lower-group.js"
import { cpuTir } from "../src/backend/cpu.js"
import { makeTarget } from "../src/ast/target.js"
import { none, NoComputeError } from "../src/lowering/op-library-common.js"
import { singletonGroups } from "../src/rewrite/fuse-ops.js"

/** y = Relu(x) on [2, 3] (dtype `dtype`): one group. */
const relu = (dtype: "float32" | "float16" = "float32") => {
  const graph = makeGraph({
    opset: 18,
    inputs: [{ name: "x", type: { dtype, shape: [2, 3] } }],
    outputs: [{ name: "y", type: { dtype, shape: [2, 3] } }],
    nodes: [node("Relu", ["x"], ["y"])],
  })
  const fused = singletonGroups(graph)
  return { fused, group: fused.groups[0] }
}

/** The c backend's TIR pipeline (the one compilation lowers a c group through). */
const TIR = cpuTir(makeTarget("c"))

/** A schedule that throws `e` (what a template or a TE builder inside it may throw). */
const throwing =
  (e: unknown): ScheduleFn =>
  () => {
    throw e
  }

describe("the TE builders' typed error", () => {
  const A = placeholder("A", [2, 3])

  it("a read with the wrong number of indices is an IllFormedComputeError", () => {
    expect(() => compute("B", [2], (i) => at(A, i))).toThrow(IllFormedComputeError)
    expect(() => at(A, v("i"))).toThrow("ill-formed compute: 'A' has rank 2, read with 1 indices")
  })

  it("a reduce axis named like a data axis is an IllFormedComputeError", () => {
    const k = reduceAxis(3, "B.i")
    const build = () => compute("B", [2], (i) => sum(at(A, i, k.var), [k]))
    expect(build).toThrow(IllFormedComputeError)
    expect(build).toThrow("ill-formed compute: 'B' has a reduce axis 'B.i' named like one of its data axes")
  })

  it("an op compute declines with a NoComputeError (tagged)", () => {
    expect(() => none("Dropout's mask output")).toThrow(NoComputeError)
    try {
      none("why")
    } catch (e) {
      expect((e as NoComputeError)._tag).toBe("NoComputeError")
      expect((e as NoComputeError).message).toBe("why")
    }
  })
})

describe("lowerGroup's fallbacks", () => {
  it("lowers a group it has a compute for", () => {
    const { fused, group } = relu()
    expect(lowerGroup(fused, group, TIR).kind).toBe("compiled")
  })

  it("no compute (a float16 group is not fused): a fallback with the reason", () => {
    const { fused, group } = relu("float16")
    expect(lowerGroup(fused, group, TIR)).toMatchObject({ kind: "fallback", reason: "Relu: Relu computes in float16 (rounded after every op; not fused)" })
  })

  it("an illegal schedule or an ill-formed compute: a fallback with the reason", () => {
    const { fused, group } = relu()
    const illegal = new S.ScheduleError({ primitive: "vectorize", stage: "t0", axis: "t0.i", reason: "extent 99 is too long to vectorize (split it first)" })
    expect(lowerGroup(fused, group, TIR, throwing(illegal))).toMatchObject({ kind: "fallback", reason: `Relu: ${illegal.message}` })
    const illFormed = new IllFormedComputeError({ tensor: "p0", reason: "has rank 2, read with 3 indices" })
    expect(lowerGroup(fused, group, TIR, throwing(illFormed))).toMatchObject({ kind: "fallback", reason: "Relu: ill-formed compute: 'p0' has rank 2, read with 3 indices" })
    expect(lowerGroup(fused, group, TIR, throwing(new NoComputeError({ reason: "declined" })))).toMatchObject({ kind: "fallback", reason: "Relu: declined" })
  })

  it("anything else is a bug: it propagates (a RangeError no longer means 'unsupported')", () => {
    const { fused, group } = relu()
    expect(() => lowerGroup(fused, group, TIR, throwing(new RangeError("Maximum call stack size exceeded")))).toThrow(RangeError)
    expect(() => lowerGroup(fused, group, TIR, throwing(new TypeError("x is undefined")))).toThrow(TypeError)
  })
})
