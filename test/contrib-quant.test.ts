// onnxruntime's com.microsoft quantized ops (QOperator format) on every target against
// onnxruntime-node on the same files: bit-exact, except the ops docs/backends.md lists as within
// 1 LSB (onnxruntime sums QLinearAveragePool's window and QLinearSoftmax's row in float32 in its
// own order, and its QLinearSigmoid table uses MLAS's logistic approximation).
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as fs from "node:fs"
import { UnsupportedOpError } from "../src/ast/graph/errors.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { MICROSOFT_DOMAIN, MICROSOFT_OPS } from "../src/ast/graph/ops/index.js"
import { fromArray, scalar } from "../src/ast/graph/tensor.js"
import { CONTRIB_QUANT } from "../src/lowering/op-library-quant-contrib.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { cpuAttrs, type TargetKind } from "../src/ast/target.js"
import { backendOf } from "../src/backend/index.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { contribCases, Q8S, runOrt, type Case } from "./support/contrib-quant-cases.js"

/** Ops onnxruntime computes with an approximation or its own float summation order: at most 1 LSB apart. */
const ONE_LSB = /^(QLinearAveragePool|QLinearSigmoid|QLinearSoftmax) /

const maxDiff = (a: readonly number[], b: readonly number[]): number => {
  expect(a.length).toBe(b.length)
  let m = 0
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]))
  return m
}

/** The bound for a case: 0 LSB, 1 LSB for the listed ops; float outputs (QGemm's) to float32 rounding. */
const check = (c: Case, got: readonly number[], want: readonly number[], what: string) => {
  const d = maxDiff(got, want)
  if (c.graph.outputs[0].type.dtype === "float32") {
    const scale = Math.max(...want.map(Math.abs), 1e-30)
    expect(d / scale, `${what}: ${c.name}`).toBeLessThan(1e-6)
  } else expect(d, `${what}: ${c.name}`).toBeLessThanOrEqual(ONE_LSB.test(c.name) ? 1 : 0)
}

const CASES = Q8S.flatMap((d) => [...contribCases(d, 7), ...contribCases(d, 1234)])

describe("com.microsoft quantized ops: the interpreter against onnxruntime-node", () => {
  it.each(CASES.map((c) => [c.name, c] as const))("%s", async (_, c) => {
    const bytes = encodeOnnx(c.graph)
    const want = await runOrt(bytes, c.feeds)
    const decoded = decodeModelSync(bytes)
    const [got] = runGraph(decoded, c.feeds)
    check(c, Array.from(got.data as ArrayLike<number>), want, "interp")
  })
})

const TARGETS: TargetKind[] = ["js", "wasm", "c"]

describe.each(TARGETS)("com.microsoft quantized ops compiled for %s against onnxruntime-node", (kind) => {
  const backend = backendOf(kind)
  const skip = backend.unavailable()
  it.skipIf(skip !== undefined)("every op compiles (no fallback) and agrees", async () => {
    const target = backend.target(cpuAttrs(), 1)
    for (const c of CASES.filter((_, k) => k % 2 === 0 || kind !== "c")) {
      const bytes = encodeOnnx(c.graph)
      const want = await runOrt(bytes, c.feeds)
      const program = await Effect.runPromise(compileGraph(decodeModelSync(bytes), target))
      expect(program.kernels.filter((k) => k.kind !== "compiled").map((k) => k.kind), `${kind}: ${c.name}`).toEqual([])
      const exec = await Effect.runPromise(loadProgram(program, target))
      try {
        check(c, Array.from(exec.run(c.feeds).get("y")!.data as ArrayLike<number>), want, kind)
      } finally {
        exec.module.close()
      }
    }
  }, 600_000)
})

describe("the com.microsoft op list", () => {
  it("every registered contrib op has a compute, and docs/backends.md lists exactly them", () => {
    expect(Object.keys(MICROSOFT_OPS).filter((op) => !(op in CONTRIB_QUANT))).toEqual([])
    const doc = fs.readFileSync(new URL("../docs/backends.md", import.meta.url), "utf8")
    const listed = /<!-- contrib-ops -->\n(.*)\n<!-- \/contrib-ops -->/.exec(doc)?.[1].split(", ")
    expect(listed).toEqual(Object.keys(MICROSOFT_OPS).sort())
  })
  it("QLinearSoftmax where onnxruntime's table overflows float (a row of one value) is an UnsupportedOpError, not a guess", () => {
    const g = makeGraph({
      opset: 13,
      inputs: [{ name: "x", type: { dtype: "uint8", shape: [3, 1] } }],
      outputs: [{ name: "y", type: { dtype: "uint8", shape: [3, 1] } }],
      initializers: new Map([["xs", scalar("float32", 0.1)], ["ys", scalar("float32", Math.fround(1 / 256))], ["yz", scalar("uint8", 0)]]),
      nodes: [node("QLinearSoftmax", ["x", "xs", "", "ys", "yz"], ["y"], { opset: { kind: "int", value: 13 } }, "sm", MICROSOFT_DOMAIN)],
    })
    expect(() => runGraph(g, new Map([["x", fromArray("uint8", [3, 1], [1, 2, 3])]]))).toThrow(UnsupportedOpError)
  })
})

describe("QLinearAdd's rounding is onnxruntime's (fused multiply-adds on the raw operands)", () => {
  // ResNet-18's layer4.0 add (onnxruntime's own quantization): the float32 sum of the two products
  // is exactly 86.5 (half to even: 86); onnxruntime's fused a·ra + (b·rb + fixed) is 86.500008 → 87
  const addGraph = (sa: number[], sb: number[], out: number[]) =>
    makeGraph({
      opset: 13,
      inputs: [{ name: "a", type: { dtype: "uint8", shape: sa } }, { name: "b", type: { dtype: "uint8", shape: sb } }],
      outputs: [{ name: "y", type: { dtype: "uint8", shape: out } }],
      initializers: new Map([
        ["sa", scalar("float32", 0.017599141225218773)], ["za", scalar("uint8", 119)],
        ["sb", scalar("float32", 0.07913351058959961)], ["zb", scalar("uint8", 132)],
        ["sc", scalar("float32", 0.03883591294288635)], ["zc", scalar("uint8", 0)],
      ]),
      nodes: [node("QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"], {}, "add", MICROSOFT_DOMAIN)],
    })
  const size = (s: number[]) => s.reduce((x, y) => x * y, 1)
  const run = async (sa: number[], sb: number[], out: number[], want: number) => {
    const g = addGraph(sa, sb, out)
    const feeds = new Map([["a", fromArray("uint8", sa, new Array(size(sa)).fill(157))], ["b", fromArray("uint8", sb, new Array(size(sb)).fill(166))]])
    const ort = await runOrt(encodeOnnx(g), feeds)
    expect(ort, "onnxruntime").toEqual(new Array(size(out)).fill(want))
    expect([...runGraph(g, feeds)[0].data], "interp").toEqual(ort)
    for (const kind of TARGETS) {
      const backend = backendOf(kind)
      if (backend.unavailable() !== undefined) continue
      const target = backend.target(cpuAttrs(), 1)
      const exec = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(g, target)), target))
      try {
        expect([...exec.run(feeds).get("y")!.data], kind).toEqual(ort)
      } finally {
        exec.module.close()
      }
    }
  }
  it.each([
    [[3], [3], [3], 87],
    [[33], [33], [33], 87],
    [[5], [1], [5], 87],
    [[2, 1], [2, 3], [2, 3], 86],
  ] as const)("a=157, b=166 at layer4.0.add's params, %j + %j → %j: onnxruntime's %i on every target", (sa, sb, out, want) => run([...sa], [...sb], [...out], want), 120_000)
  it.each([
    [[1], [1], [1]],
    [[1], [5], [5]],
    [[2, 1], [1, 3], [2, 3]],
  ] as const)("and where A is the scalar of its span, %j + %j → %j (operands swapped: the fixed part fuses B's term): 86", (sa, sb, out) => run([...sa], [...sb], [...out], 86), 120_000)
})
