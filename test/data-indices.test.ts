// Indices from data on every target (issue 19): a Gather, GatherElements, GatherND or loss whose
// index input is out of range gave a typed error on interp, but a row of NaN on js, zeros on wasm,
// heap bytes on c (and SIGSEGV at ±1e9; 2³²+1 read row 1). Now every target checks each index
// before its kernel reads by it, with the reference kernel's rule: for random in-range, negative,
// out-of-range and huge indices every target gives the interpreter's answer or its typed error
// (a NodeError naming the node, and here the input and the value).
import { Effect } from "effect"
import * as fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node, type Graph } from "../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { cpuAttrs, type TargetKind } from "../src/ast/target.js"
import { backendOf } from "../src/backend/index.js"
import type { Executor } from "../src/device/executor.js"
import { compileGraph, emitArtifact, loadProgram } from "../src/pipeline.js"
import { indexChecks } from "../src/lowering/index-checks.js"
import { targetSettings } from "../src/cli/targets.js"
import { assertAllClose, LAW_SEED } from "../laws/support.js"

const TARGETS: TargetKind[] = ["js", "wasm", "c"]
const f32 = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, k) => ((k * 37) % 23) / 7 - 1.5))

interface Case {
  readonly name: string
  readonly graph: Graph
  /** The index input: its name, shape, and the extent an index in it addresses. */
  readonly index: { readonly name: string; readonly shape: number[]; readonly bound: number }
  readonly data: ReadonlyMap<string, Tensor>
  /** The node whose error a bad index gives. */
  readonly node: string
}

const io = (name: string, dtype: "float32" | "int64", shape: number[]) => ({ name, type: { dtype, shape } })

const CASES: Case[] = [
  {
    name: "Gather axis 0, fused with a Relu after it",
    graph: makeGraph({
      opset: 13,
      inputs: [io("x", "float32", [5, 3]), io("i", "int64", [4])],
      outputs: [io("y", "float32", [4, 3])],
      nodes: [node("Gather", ["x", "i"], ["g"], {}, "gather"), node("Relu", ["g"], ["y"])],
    }),
    index: { name: "i", shape: [4], bound: 5 },
    data: new Map([["x", f32([5, 3])]]),
    node: "gather",
  },
  {
    name: "Gather axis 1 of 2-d indices",
    graph: makeGraph({
      opset: 13,
      inputs: [io("x", "float32", [2, 6, 3]), io("i", "int64", [2, 2])],
      outputs: [io("y", "float32", [2, 2, 2, 3])],
      nodes: [node("Gather", ["x", "i"], ["y"], { axis: attr.int(1) }, "gather1")],
    }),
    index: { name: "i", shape: [2, 2], bound: 6 },
    data: new Map([["x", f32([2, 6, 3])]]),
    node: "gather1",
  },
  {
    name: "GatherElements axis 1",
    graph: makeGraph({
      opset: 13,
      inputs: [io("x", "float32", [3, 4]), io("i", "int64", [3, 2])],
      outputs: [io("y", "float32", [3, 2])],
      nodes: [node("GatherElements", ["x", "i"], ["y"], { axis: attr.int(1) }, "ge")],
    }),
    index: { name: "i", shape: [3, 2], bound: 4 },
    data: new Map([["x", f32([3, 4])]]),
    node: "ge",
  },
  {
    name: "GatherND of pairs",
    graph: makeGraph({
      opset: 13,
      inputs: [io("x", "float32", [4, 4, 2]), io("i", "int64", [3, 2])],
      outputs: [io("y", "float32", [3, 2])],
      nodes: [node("GatherND", ["x", "i"], ["y"], {}, "gnd")],
    }),
    index: { name: "i", shape: [3, 2], bound: 4 },
    data: new Map([["x", f32([4, 4, 2])]]),
    node: "gnd",
  },
  {
    name: "NegativeLogLikelihoodLoss's class targets",
    graph: makeGraph({
      opset: 13,
      inputs: [io("x", "float32", [4, 5]), io("t", "int64", [4])],
      outputs: [io("y", "float32", [4])],
      nodes: [node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], { reduction: attr.str("none") }, "nll")],
    }),
    index: { name: "t", shape: [4], bound: 5 },
    data: new Map([["x", f32([4, 5])]]),
    node: "nll",
  },
  {
    name: "SoftmaxCrossEntropyLoss's class targets, ignore_index 2, mean",
    graph: makeGraph({
      opset: 13,
      inputs: [io("x", "float32", [3, 4, 2]), io("t", "int64", [3, 2])],
      outputs: [io("y", "float32", [])],
      nodes: [node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y"], { ignore_index: attr.int(2) }, "sce")],
    }),
    index: { name: "t", shape: [3, 2], bound: 4 },
    data: new Map([["x", f32([3, 4, 2])]]),
    node: "sce",
  },
  {
    name: "Gather whose indices are computed in the same group (Add → Gather)",
    graph: makeGraph({
      opset: 13,
      inputs: [io("x", "float32", [5, 3]), io("i", "int64", [4])],
      outputs: [io("y", "float32", [4, 3])],
      initializers: new Map([["one", tensor("int64", [], Float64Array.from([1]))]]),
      nodes: [node("Add", ["i", "one"], ["j"]), node("Gather", ["x", "j"], ["y"], {}, "gather_j")],
    }),
    index: { name: "i", shape: [4], bound: 4 }, // j = i + 1 addresses 5 rows
    data: new Map([["x", f32([5, 3])]]),
    node: "gather_j",
  },
]

/** Indices: mostly in range (negative ones too), some just out of range either side, some far out, 2³²+1. */
const indexValue = (bound: number) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: -bound, max: bound - 1 }) },
    { weight: 1, arbitrary: fc.integer({ min: bound, max: bound + 3 }) },
    { weight: 1, arbitrary: fc.integer({ min: -bound - 3, max: -bound - 1 }) },
    { weight: 1, arbitrary: fc.constantFrom(1e9, -1e9, 2 ** 32 + 1, -(2 ** 31), 2 ** 31) },
  )

type Outcome = { readonly ok: Tensor } | { readonly error: { readonly tag: string; readonly node: string; readonly message: string } }

const outcome = (f: () => Tensor): Outcome => {
  try {
    return { ok: f() }
  } catch (e) {
    const tagged = e as { _tag?: unknown; node?: unknown; message?: unknown }
    if (typeof tagged._tag !== "string") throw e
    return { error: { tag: tagged._tag, node: String(tagged.node), message: String(tagged.message) } }
  }
}

describe.each(CASES)("indices from data: $name", (c) => {
  const executors = new Map<TargetKind, Executor>()
  beforeAll(async () => {
    for (const kind of TARGETS) {
      const backend = backendOf(kind)
      if (backend.unavailable() !== undefined) continue
      const target = backend.target(cpuAttrs(), 1)
      const program = await Effect.runPromise(compileGraph(c.graph, target))
      // the indexing node runs in a compiled kernel (but where lowering keeps it on the host: see below)
      if (!c.name.includes("same group")) expect(program.kernels.filter((k) => k.kind === "compiled").length, kind).toBeGreaterThan(0)
      if (!c.name.includes("same group")) expect(program.kernels.filter((k) => k.kind === "fallback"), kind).toEqual([])
      executors.set(kind, await Effect.runPromise(loadProgram(program, target)))
    }
  }, 120_000)
  afterAll(() => executors.forEach((e) => e.module.close()))

  it("every target gives the interpreter's answer or its typed error, naming the node and the value", () => {
    const n = c.index.shape.reduce((a, b) => a * b, 1)
    let errors = 0
    fc.assert(
      fc.property(fc.array(indexValue(c.index.bound), { minLength: n, maxLength: n }), (values) => {
        const feeds = new Map([...c.data, [c.index.name, tensor("int64", c.index.shape, Float64Array.from(values))]])
        const want = outcome(() => runGraph(c.graph, feeds)[0])
        if ("error" in want) {
          errors++
          expect(want.error.tag).toBe("NodeError")
          expect(want.error.node).toBe(c.node)
        }
        for (const [kind, exec] of executors) {
          const got = outcome(() => exec.run(feeds).get("y")!)
          if ("ok" in want) {
            expect("ok" in got, `${kind}: ${"error" in got ? got.error.message : ""}`).toBe(true)
            if ("ok" in got) assertAllClose([got.ok], [want.ok], 1e-5, 1e-6)
          } else {
            expect("error" in got, `${kind} gave an answer where the interpreter refused: ${"error" in want ? want.error.message : ""}`).toBe(true)
            if ("error" in got) {
              expect(got.error.tag, kind).toBe(want.error.tag)
              expect(got.error.node, kind).toBe(want.error.node)
              // the offending value, as the interpreter names it
              const bad = want.error.message.match(/(-?\d+(?:e\+?\d+)?) (?:out of range|is not a class)/)?.[1]
              if (bad) expect(got.error.message, kind).toContain(bad)
            }
          }
        }
      }),
      { seed: LAW_SEED, numRuns: 60 },
    )
    expect(errors).toBeGreaterThan(0)
  })
})

describe("indices from data in ops that are never compiled (ScatterND, ScatterElements: their reference kernels)", () => {
  const scatter = (op: "ScatterND" | "ScatterElements"): Graph =>
    makeGraph({
      opset: 13,
      inputs: [io("x", "float32", [4, 3]), io("i", "int64", op === "ScatterND" ? [2, 1] : [2, 3]), io("u", "float32", [2, 3])],
      outputs: [io("y", "float32", [4, 3])],
      nodes: [node(op, ["x", "i", "u"], ["r"], op === "ScatterElements" ? { axis: attr.int(0) } : {}, "sc"), node("Relu", ["r"], ["y"])],
    })
  it.each(["ScatterND", "ScatterElements"] as const)("%s: an index out of range (4, -5, 2^32 + 1, 1e9) is the interpreter's typed error on every target, naming the node; one in range its answer", async (op) => {
    const g = scatter(op)
    const feedsWith = (bad: number) => {
      const shape = op === "ScatterND" ? [2, 1] : [2, 3]
      const n = shape.reduce((a, b) => a * b, 1)
      return new Map([
        ["x", f32([4, 3])],
        ["i", tensor("int64", shape, Float64Array.from({ length: n }, (_, k) => (k === n - 1 ? bad : 0)))],
        ["u", f32([2, 3])],
      ])
    }
    for (const kind of TARGETS) {
      const backend = backendOf(kind)
      if (backend.unavailable() !== undefined) continue
      const target = backend.target(cpuAttrs(), 1)
      const exec = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(g, target)), target))
      try {
        for (const bad of [4, -5, 2 ** 32 + 1, 1e9]) {
          const want = outcome(() => runGraph(g, feedsWith(bad))[0])
          const got = outcome(() => exec.run(feedsWith(bad)).get("y")!)
          expect("error" in want && want.error, `${kind} ${bad}`).toMatchObject({ tag: "NodeError", node: "sc" })
          expect("error" in got && got.error, `${kind} ${bad}`).toMatchObject({ tag: "NodeError", node: "sc" })
        }
        const ok = feedsWith(3)
        assertAllClose([exec.run(ok).get("y")!], [runGraph(g, ok)[0]], 1e-6, 1e-7)
      } finally {
        exec.module.close()
      }
    }
  }, 60_000)
})

describe("a constant index (ViT's class-token Gather by 0)", () => {
  const gatherBy = (k: number) =>
    makeGraph({
      opset: 13,
      inputs: [io("x", "float32", [1, 5, 3])],
      outputs: [io("y", "float32", [1, 3])],
      initializers: new Map([["i", tensor("int64", [], Float64Array.from([k]))]]),
      nodes: [node("Gather", ["x", "i"], ["y"], { axis: attr.int(1) })],
    })
  it("in range: checked once at compile time, nothing left for run time, and the cuda target takes it", async () => {
    const g = gatherBy(-1)
    expect(indexChecks(g, g.nodes[0])).toEqual([])
    const cuda = targetSettings("cuda", 1, { cudaArch: "sm_90" }).target
    const artifact = await Effect.runPromise(emitArtifact(await Effect.runPromise(compileGraph(g, cuda)), cuda))
    expect([...artifact.files.keys()]).toContain("tessera_kernels.cu")
  })
  it("out of range: the check stays, and every target gives the interpreter's typed error naming the node", async () => {
    const g = gatherBy(5)
    expect(indexChecks(g, g.nodes[0]).map((c) => c.refuse(5, 0) !== undefined)).toEqual([true])
    const feeds = new Map([["x", f32([1, 5, 3])]])
    const want = outcome(() => runGraph(g, feeds)[0])
    expect("error" in want && want.error.tag).toBe("NodeError")
    for (const kind of TARGETS) {
      const target = backendOf(kind).target(cpuAttrs(), 1)
      const exec = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(g, target)), target))
      const got = outcome(() => exec.run(feeds).get("y")!)
      exec.module.close()
      expect("error" in got && [got.error.tag, got.error.node], kind).toEqual("error" in want && [want.error.tag, want.error.node])
    }
  })
})
