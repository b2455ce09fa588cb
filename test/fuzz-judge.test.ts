// How the fuzzer judges a target's outputs (scripts/fuzz-judge.ts): undefined casts found and only
// those, the perturbation's spread widening the tolerance only where the interpreter itself moves,
// and a wrong value in a well-conditioned output still a wrong answer.
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { fromArray, type Tensor } from "../src/ast/graph/tensor.js"
import { computesWith, downstreamOf, hugeValue, judge, perturbedFeeds, perturbOutputs, undefinedCast } from "../scripts/fuzz-judge.js"

const cast = (to: number) => node("Cast", ["x"], ["y"], { to: attr.int(to) })
const f32 = (xs: number[]) => fromArray("float32", [xs.length], xs)

describe("undefinedCast", () => {
  it("names a float → integer cast out of the type's range, NaN and ±Inf included", () => {
    expect(undefinedCast(cast(3), [f32([1, 300])], [fromArray("int8", [2], [1, 44])])).toMatch(/300 \(float32\) to int8 \[1\]/)
    expect(undefinedCast(cast(3), [f32([NaN])], [fromArray("int8", [1], [0])])).toMatch(/NaN/)
    expect(undefinedCast(cast(2), [f32([-1])], [fromArray("uint8", [1], [255])])).toMatch(/uint8/)
    expect(undefinedCast(cast(7), [f32([Infinity])], [fromArray("int64", [1], [0])])).toMatch(/int64/)
  })
  it("leaves in-range casts (truncation toward zero), float → float and integer → integer alone", () => {
    expect(undefinedCast(cast(3), [f32([127.9, -128.9, -0.5])], [fromArray("int8", [3], [127, -128, 0])])).toBeUndefined()
    expect(undefinedCast(cast(2), [f32([-0.9, 255.5])], [fromArray("uint8", [2], [0, 255])])).toBeUndefined()
    expect(undefinedCast(cast(1), [f32([1e38])], [f32([1e38])])).toBeUndefined()
    expect(undefinedCast(cast(3), [fromArray("int32", [1], [300])], [fromArray("int8", [1], [44])])).toBeUndefined()
    expect(undefinedCast(node("Relu", ["x"], ["y"]), [f32([300])], [f32([300])])).toBeUndefined()
  })
})

describe("downstreamOf and hugeValue", () => {
  it("reach what is computed from a root and nothing else", () => {
    const g = makeGraph({ opset: 18, inputs: [], outputs: [], nodes: [node("Relu", ["a"], ["b"]), node("Add", ["b", "c"], ["d"]), node("Neg", ["c"], ["e"])] })
    expect([...downstreamOf(g, ["a"])].sort()).toEqual(["a", "b", "d"])
  })
  it("computesWith: a node that holds or computes with such a value, not a move or selection of ordinary ones", () => {
    const table = f32([1, 2, 1e38, 4])
    expect(computesWith(node("Gather", ["t", "i"], ["y"]), [table, fromArray("int64", [2], [0, 1])], [f32([1, 2])])).toBe(false)
    expect(computesWith(node("Gather", ["t", "i"], ["y"]), [table, fromArray("int64", [1], [2])], [f32([1e38])])).toBe(true)
    expect(computesWith(node("ReduceMean", ["t"], ["y"]), [table], [f32([2.5e37])])).toBe(true)
    expect(computesWith(node("LayerNormalization", ["t", "s"], ["y"]), [table, f32([1, 1, 1, 1])], [f32([-0.5, -0.5, 1.7, -0.5])])).toBe(true)
    expect(computesWith(node("Add", ["a", "b"], ["y"]), [f32([1]), f32([2])], [f32([3])])).toBe(false)
  })
  it("hugeValue: past 2^64 or not finite, floats only", () => {
    expect([f32([1e20]), f32([NaN]), f32([-Infinity]), f32([1e19]), fromArray("int64", [1], [2 ** 62])].map(hugeValue)).toEqual([true, true, true, false, false])
  })
})

/** y = (x - mean) / sqrt(mean((x - mean) * 2) + eps): the 'variance' is rounding noise, so y is ill-conditioned. */
const noiseVariance = makeGraph({
  opset: 18,
  inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 24] } }],
  outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 24] } }, { name: "z", type: { dtype: "float32", shape: [1, 24] } }],
  initializers: new Map([["ax", fromArray("int64", [1], [-1])], ["two", f32([2])], ["eps", f32([1e-5])]]),
  nodes: [
    node("ReduceMean", ["x", "ax"], ["m"]),
    node("Sub", ["x", "m"], ["c"]),
    node("Mul", ["c", "two"], ["c2"]),
    node("ReduceMean", ["c2", "ax"], ["v"]),
    node("Add", ["v", "eps"], ["ve"]),
    node("Sqrt", ["ve"], ["s"]),
    node("Div", ["c", "s"], ["y"]),
    node("Mul", ["x", "two"], ["z"]),
  ],
})
const feeds = new Map([["x", fromArray("float32", [1, 24], Array.from({ length: 24 }, (_, k) => Math.sin(k * 1.7) + 0.3))]])
const outputsOf = (ts: readonly Tensor[]) => new Map([["y", ts[0]], ["z", ts[1]]])
const ref = outputsOf(runGraph(noiseVariance, feeds))
const perturbed = () =>
  [1, 2].map((k) => {
    const p = perturbedFeeds(noiseVariance, feeds, k)
    return outputsOf(runGraph(p.graph, p.feeds, undefined, perturbOutputs(k + 7)))
  })
const opts = { edgeFloats: false, undefinedBy: new Map<string, string>(), hugeBy: new Map<string, string>(), perturbed }
const moved = (t: Tensor, i: number, by: (v: number) => number) => fromArray("float32", t.shape, Array.from(t.data as Float32Array, (v, k) => (k === i ? by(v) : v)))

describe("judge", () => {
  it("the interpreter's y moves under perturbation by far more than the tolerance, its z does not", () => {
    const y = Number(ref.get("y")!.data[3])
    expect(Number.isFinite(y)).toBe(true)
    const spreadY = Math.max(...perturbed().map((p) => Math.abs(Number(p.get("y")!.data[3]) - y)))
    const spreadZ = Math.max(...perturbed().map((p) => Math.abs(Number(p.get("z")!.data[3]) - Number(ref.get("z")!.data[3]))))
    expect(spreadY).toBeGreaterThan(1e-3 * (1 + Math.abs(y)))
    expect(spreadZ).toBeLessThan(1e-5)
  })
  it("a difference within the interpreter's own spread under perturbation is ill-conditioned, not wrong", () => {
    const y = Number(ref.get("y")!.data[3])
    const spread = Math.max(...perturbed().map((p) => Math.abs(Number(p.get("y")!.data[3]) - y)))
    expect(judge(ref, new Map([["y", moved(ref.get("y")!, 3, (v) => v + 2 * spread)], ["z", ref.get("z")!]]), opts).kind).toBe("ill-conditioned")
  })
  it("the same relative difference in a well-conditioned output is a wrong answer", () => {
    const j = judge(ref, new Map([["y", ref.get("y")!], ["z", moved(ref.get("z")!, 3, (v) => v * 1.05)]]), opts)
    expect(j.kind).toBe("wrong")
  })
  it("a value far outside the spread of an ill-conditioned output is still wrong", () => {
    expect(judge(ref, new Map([["y", moved(ref.get("y")!, 3, (v) => -v * 1e3 - 1e3)], ["z", ref.get("z")!]]), opts).kind).toBe("wrong")
  })
  it("an output after an undefined cast is undefined-cast; huge values count only in edge-float cases", () => {
    const got = new Map([["y", ref.get("y")!], ["z", moved(ref.get("z")!, 0, (v) => v + 1)]])
    expect(judge(ref, got, { ...opts, undefinedBy: new Map([["z", "Cast"]]) }).kind).toBe("undefined-cast")
    expect(judge(ref, got, { ...opts, hugeBy: new Map([["z", "x"]]) }).kind).toBe("wrong")
    expect(judge(ref, got, { ...opts, edgeFloats: true, hugeBy: new Map([["z", "x"]]) }).kind).toBe("edge-float")
  })
  it("agreeing outputs are ok without running the perturbation", () => {
    expect(judge(ref, ref, { ...opts, perturbed: () => expect.unreachable() as never }).kind).toBe("ok")
  })
})
