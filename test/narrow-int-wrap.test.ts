// 8- and 16-bit integers wrap after every op inside a fused kernel, as onnxruntime and NumPy compute
// them: a float → int8 cast, an int8 Add past 127, an int8 Sub and a cast back to float, fused into
// one kernel, give the interpreter's values on js, wasm and c (the fuzzer's seed 1001431: every
// compiled target carried the unwrapped sum into the Sub, 145 where the interpreter has -111).
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { fromArray, type Tensor } from "../src/ast/graph/tensor.js"
import { cpuAttrs, type TargetKind } from "../src/ast/target.js"
import { backendOf } from "../src/backend/index.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"

const TARGETS: TargetKind[] = ["js", "wasm", "c"]

const chain = (dtype: "int8" | "uint8" | "int16" | "uint16", op: "Add" | "Sub" | "Mul") =>
  makeGraph({
    opset: 13,
    inputs: [{ name: "x", type: { dtype: "float32", shape: [6] } }],
    outputs: [{ name: "y", type: { dtype: "float32", shape: [6] } }],
    initializers: new Map<string, Tensor>([
      ["k", fromArray(dtype, [6], dtype.startsWith("u") ? [100, 200, 255, 1, 128, 77] : [100, 127, -128, 90, -100, 77])],
      ["s", fromArray(dtype, [], [30])],
    ]),
    nodes: [
      node("Cast", ["x"], ["xi"], { to: attr.int(dtype === "int8" ? 3 : dtype === "uint8" ? 2 : dtype === "int16" ? 5 : 4) }),
      node(op, ["xi", "k"], ["t"]),
      node("Sub", ["t", "s"], ["u"]),
      node("Cast", ["u"], ["y"], { to: attr.int(1) }),
    ],
  })

describe.each(["int8", "uint8", "int16", "uint16"] as const)("%s wraps after every op in a fused kernel", (dtype) => {
  it.each(["Add", "Sub", "Mul"] as const)("%s then Sub", async (op) => {
    const g = chain(dtype, op)
    const feeds = new Map([["x", fromArray("float32", [6], dtype.startsWith("u") ? [100, 100, 200, 3, 250, 1] : [100, 100, -100, 90, -60, 120])]])
    const [want] = runGraph(g, feeds)
    for (const kind of TARGETS) {
      const backend = backendOf(kind)
      if (backend.unavailable() !== undefined) continue
      const target = backend.target(cpuAttrs(), 1)
      const program = await Effect.runPromise(compileGraph(g, target))
      expect(program.kernels.every((k) => k.kind === "compiled"), kind).toBe(true)
      const exec = await Effect.runPromise(loadProgram(program, target))
      try {
        expect([...exec.run(feeds).get("y")!.data], `${kind} ${dtype} ${op}`).toEqual([...want.data])
      } finally {
        exec.module.close()
      }
    }
  }, 60_000)
})
