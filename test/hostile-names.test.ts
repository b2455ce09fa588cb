// Names from a model never reach emitted code unsanitized: a model whose node and tensor names
// are C and JS injection strings compiles, runs and gives the evaluator's answers on every target.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { prng } from "../src/ast/graph/arbitrary.js"
import { tensor } from "../src/ast/graph/tensor.js"
import { makeTarget } from "../src/ast/target.js"
import { compilerAvailable } from "../src/device/c/build.js"
import { artifactText } from "../src/lowering/program.js"
import { compileGraph, emitArtifact, loadProgram } from "../src/pipeline.js"
import { assertAllClose } from "../laws/support.js"

const HOSTILE = [
  'x"; process.exit(1); //',
  "*/ #include <stdio.h>\nint main(){}/*",
  "$(rm -rf /) `id` ${process.exit(2)}",
  "w\u2028\u2029'\\",
  "??=define a b",
  "out\n#error broken",
]

const rng = prng(11)
const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))

const graph = makeGraph({
  opset: 13,
  inputs: [{ name: HOSTILE[0], type: { dtype: "float32", shape: [1, 4, 6, 6] } }],
  outputs: [{ name: HOSTILE[5], type: { dtype: "float32", shape: [1, 4, 6, 6] } }],
  initializers: new Map([
    [HOSTILE[3], rand([4, 4, 3, 3])],
    [HOSTILE[4], rand([4])],
  ]),
  nodes: [
    node("Conv", [HOSTILE[0], HOSTILE[3], HOSTILE[4]], [HOSTILE[1]], { pads: attr.ints([1, 1, 1, 1]) }, HOSTILE[2]),
    node("Relu", [HOSTILE[1]], [HOSTILE[2]], {}, HOSTILE[1]),
    node("Add", [HOSTILE[2], HOSTILE[0]], [HOSTILE[5]], {}, HOSTILE[0]),
  ],
})
const feeds = new Map([[HOSTILE[0], rand([1, 4, 6, 6])]])
const want = runGraph(graph, feeds)

describe("hostile names", () => {
  it("js: the module text holds no model name outside comments, and runs right", async () => {
    const program = await Effect.runPromise(compileGraph(graph, makeTarget("js", { vectorLanes: 4 }), { optLevel: 3 }))
    const target = makeTarget("js", { vectorLanes: 4 })
    const src = artifactText(await Effect.runPromise(emitArtifact(program, target)), "model.js")!
    const code = src.split("\n").filter((l) => !l.trimStart().startsWith("//")).join("\n")
    for (const h of HOSTILE) expect(code.includes(h)).toBe(false)
    const got = (await Effect.runPromise(loadProgram(program, target))).run(feeds)
    assertAllClose([got.get(HOSTILE[5])!], want)
  })

  it.skipIf(!compilerAvailable())("c: builds and runs right", async () => {
    const program = await Effect.runPromise(compileGraph(graph, makeTarget("c", { vectorLanes: 16 }), { optLevel: 3 }))
    const target = makeTarget("c", { vectorLanes: 16 })
    const artifact = await Effect.runPromise(emitArtifact(program, target))
    const sources = [...artifact.files.keys()].filter((f) => f.endsWith(".c") || f.endsWith(".h")).map((f) => artifactText(artifact, f)!)
    expect(sources.length).toBeGreaterThan(2)
    for (const source of sources) expect(source.includes("#include <stdio.h>\nint main")).toBe(false)
    const got = (await Effect.runPromise(loadProgram(program, target))).run(feeds)
    assertAllClose([got.get(HOSTILE[5])!], want)
  })
})
