// bindSync's memo across one fixed point's binds (BindMemo): a node kept from the last bind, with
// inputs of equal types and the same constants, gets what it got then; one whose input type or
// constant changed is inferred again.
import { describe, expect, it } from "vitest"
import { makeGraph, node, type Graph } from "../src/ast/graph/graph.js"
import { bindMemo, bindSync, propagatedOutputs } from "../src/ast/graph/infer.js"
import { fromArray } from "../src/ast/graph/tensor.js"
import { zooGraph } from "../src/zoo/index.js"
import { rewriteToFixedPoint } from "../src/rewrite/rules.js"
import { simplifyInferenceRules } from "../src/rewrite/simplify-inference.js"

// x [1, 4] → Reshape(x, shape + zero) → y → Relu → z: the shape is computed (propagated), not read
const add = node("Add", ["shape", "zero"], ["s"])
const reshape = node("Reshape", ["x", "s"], ["y"])
const relu = node("Relu", ["y"], ["z"])
const graphWith = (shape: number[], nodes = [add, reshape, relu]): Graph =>
  makeGraph({
    opset: 18,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 4] } }],
    outputs: [{ name: "z", type: { dtype: "float32", shape: [] } }],
    initializers: new Map([
      ["shape", fromArray("int64", [2], shape)],
      ["zero", fromArray("int64", [2], [0, 0])],
    ]),
    nodes,
  })

const typesOf = (g: Graph) => [...g.valueTypes].map(([k, t]) => `${k}: ${t.dtype}[${t.shape.join(",")}]`)

describe("bindSync's memo (BindMemo)", () => {
  it("a kept node with the same inputs is not inferred again: its types are the objects of the last bind", () => {
    const memo = bindMemo()
    const g = graphWith([2, 2])
    const first = bindSync(g, undefined, { memo })
    const again = bindSync({ ...g, valueTypes: new Map() }, undefined, { memo })
    expect(again.valueTypes.get("z")).toBe(first.valueTypes.get("z"))
    expect(typesOf(again)).toEqual(typesOf(bindSync(g)))
  })

  it("a kept node whose input constant changed (same name, same type) is inferred again, and so are its readers", () => {
    const memo = bindMemo()
    bindSync(graphWith([2, 2]), undefined, { memo })
    // the same node objects; the shape constant now [4, 1]: s, y and z change
    const changed = graphWith([4, 1])
    const rebound = bindSync(changed, undefined, { memo })
    expect(rebound.valueTypes.get("z")).toEqual({ dtype: "float32", shape: [4, 1] })
    expect(typesOf(rebound)).toEqual(typesOf(bindSync(changed)))
  })

  it("a kept node whose input type changed is inferred again", () => {
    const memo = bindMemo()
    bindSync(graphWith([2, 2]), undefined, { memo })
    // Reshape replaced by another node writing y (a new object); Relu kept, y now [1, 4]
    const changed = graphWith([2, 2], [add, node("Identity", ["x"], ["y"]), relu])
    const rebound = bindSync(changed, undefined, { memo })
    expect(rebound.valueTypes.get("z")).toEqual({ dtype: "float32", shape: [1, 4] })
    expect(typesOf(rebound)).toEqual(typesOf(bindSync(changed)))
  })

  it("propagatedOutputs hands out the constants a bind computed for a node only for the same input tensors (FoldConstants reuses them)", () => {
    const memo = bindMemo()
    const g = graphWith([2, 2])
    bindSync(g, undefined, { memo })
    const [shape, zero] = [g.initializers.get("shape")!, g.initializers.get("zero")!]
    expect(Array.from(propagatedOutputs(memo, add, [shape, zero])![0].data)).toEqual([2, 2])
    // equal values in another tensor: not the inputs the bind saw
    expect(propagatedOutputs(memo, add, [fromArray("int64", [2], [4, 1]), zero])).toBeUndefined()
    expect(propagatedOutputs(memo, relu, [undefined])).toBeUndefined()
  })

  it("a fixed point over ResNet-18 binds to the types a bind without the memo gives", () => {
    const { graph } = rewriteToFixedPoint(zooGraph("resnet18"), simplifyInferenceRules)
    expect(typesOf(graph)).toEqual(typesOf(bindSync(graph)))
  })
})
