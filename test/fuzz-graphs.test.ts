// The fuzzer past the decoder (scripts/fuzz.ts, issue 19) and the bugs it found, each a named
// regression: every compiled target agrees with the interpreter or fails with a typed error.
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node, type Graph } from "../src/ast/graph/graph.js"
import { fromArray, type Tensor } from "../src/ast/graph/tensor.js"
import { targetSettings } from "../src/cli/targets.js"
import { compilerAvailable } from "../src/device/c/build.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { ROOT, script } from "./support/dist.js"

const TARGETS = ["js", "wasm", ...(compilerAvailable() ? (["c"] as const) : [])] as const

/** Each target's outputs against the interpreter's (rtol 1e-4, atol 1e-5). */
const agreesOnEveryTarget = async (g: Graph, feeds: ReadonlyMap<string, Tensor>) => {
  const want = runGraph(g, feeds)
  for (const kind of TARGETS) {
    const { target } = targetSettings(kind)
    const exec = await Effect.runPromise(Effect.flatMap(compileGraph(g, target), (p) => loadProgram(p, target)))
    const got = exec.run(feeds)
    g.outputs.forEach((o, k) => {
      const have = got.get(o.name)!
      expect(have.shape, `${kind} ${o.name}`).toEqual(want[k].shape)
      const off = (a: number, w: number) => (Number.isNaN(a) || Number.isNaN(w) ? Number.isNaN(a) !== Number.isNaN(w) : Math.abs(a - w) > 1e-5 + 1e-4 * Math.abs(w))
      const diffs = Array.from(want[k].data as ArrayLike<number>).flatMap((w, i) => (off(Number(have.data[i]), Number(w)) ? [`[${i}] ${Number(have.data[i])} vs ${Number(w)}`] : []))
      expect(diffs, `${kind} ${o.name}`).toEqual([])
    })
  }
}

describe("fuzz regressions: flag attributes mean what the interpreter says (any value but 0 is on)", () => {
  const shape = [1, 2, 4, 5]
  const x = fromArray("float32", shape, Array.from({ length: 40 }, (_, k) => Math.sin(k)))
  // seed 1000036 of `npm run fuzz -- --seed 1`: ReduceSum keepdims=5 over a leading axis, then
  // elementwise ops: inference kept the dim (keepdims != 0), the op library dropped it (=== 1), and
  // the fused kernel indexed the reduced tensor as if it had one dim fewer: 39 of 40 wrong, exit 0
  it.each([5, -1, 2])("ReduceSum / ReduceMax / ArgMax with keepdims=%i keep the axis on every target", async (keepdims) => {
    for (const axis of [0, 1, 2]) {
      const out = shape.map((d, j) => (j === axis ? 1 : d))
      const g = makeGraph({
        opset: 18,
        inputs: [{ name: "x", type: { dtype: "float32", shape } }],
        outputs: [
          { name: "s", type: { dtype: "float32", shape: out } },
          { name: "m", type: { dtype: "float32", shape: out } },
          { name: "a", type: { dtype: "int64", shape: out } },
        ],
        initializers: new Map([["ax", fromArray("int64", [1], [axis])]]),
        nodes: [
          node("ReduceSum", ["x", "ax"], ["r"], { keepdims: attr.int(keepdims) }),
          node("Tanh", ["r"], ["s"]),
          node("ReduceMax", ["x", "ax"], ["q"], { keepdims: attr.int(keepdims) }),
          node("Neg", ["q"], ["m"]),
          node("ArgMax", ["x"], ["a"], { axis: attr.int(axis), keepdims: attr.int(keepdims) }),
        ],
      })
      await agreesOnEveryTarget(g, new Map([["x", x]]))
    }
  }, 60_000)

  // seed 1000005: AveragePool count_include_pad=7 divided by the window inside the image only
  it("AveragePool with count_include_pad=7 counts the padding, as with 1", async () => {
    const g = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype: "float32", shape } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 2, 4, 5] } }],
      initializers: new Map(),
      nodes: [node("AveragePool", ["x"], ["p"], { kernel_shape: attr.ints([3, 3]), pads: attr.ints([1, 1, 1, 1]), count_include_pad: attr.int(7) }), node("Relu", ["p"], ["y"])],
    })
    await agreesOnEveryTarget(g, new Map([["x", x]]))
  }, 60_000)
})

describe("fuzz regressions: NaN bounds", () => {
  // seeds 2000264 and 2000226 of `npm run fuzz -- --seed 2`: a Clip whose constant min was NaN (a
  // mutated initializer) made every element NaN on js and wasm (their min / max propagate NaN),
  // where the evaluator's comparisons leave x as it is
  const x = fromArray("float32", [2, 5], [-3, -1, -0.5, 0, 0.25, 0.5, 1, 2, Number.NaN, 7])
  it.each([
    ["min NaN", Number.NaN, 1],
    ["max NaN", -1, Number.NaN],
    ["both NaN", Number.NaN, Number.NaN],
    ["neither", -1, 1],
  ])("Clip with constant bounds (%s) agrees with the interpreter on every target", async (_, lo, hi) => {
    const g = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [2, 5] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [2, 5] } }],
      initializers: new Map([
        ["lo", fromArray("float32", [], [lo])],
        ["hi", fromArray("float32", [], [hi])],
      ]),
      nodes: [node("Clip", ["x", "lo", "hi"], ["c"]), node("Neg", ["c"], ["y"])],
    })
    await agreesOnEveryTarget(g, new Map([["x", x]]))
  }, 60_000)

  it("Clip with bounds read at run time (NaN among them) agrees with the interpreter on every target", async () => {
    const g = makeGraph({
      opset: 18,
      inputs: [
        { name: "x", type: { dtype: "float32", shape: [2, 5] } },
        { name: "lo", type: { dtype: "float32", shape: [] } },
        { name: "hi", type: { dtype: "float32", shape: [] } },
      ],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [2, 5] } }],
      initializers: new Map(),
      nodes: [node("Clip", ["x", "lo", "hi"], ["y"])],
    })
    for (const [lo, hi] of [
      [Number.NaN, 1],
      [-1, Number.NaN],
      [-0.5, 0.5],
    ])
      await agreesOnEveryTarget(g, new Map([["x", x], ["lo", fromArray("float32", [], [lo])], ["hi", fromArray("float32", [], [hi])]]))
  }, 60_000)
})

describe("fuzz regressions: checks the targets lacked", () => {
  // seed 2000143 of `npm run fuzz -- --seed 2`: a Conv whose kernel_shape (2147483647, 3) did not
  // match its 3x3 weight: the evaluator refused it, js and wasm compiled the weight's kernel and answered
  it("a Conv whose kernel_shape is not its weight's is a NodeError at bind, on every target", async () => {
    const g = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 2, 6, 6] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 4, 4, 4] } }],
      initializers: new Map([["w", fromArray("float32", [4, 2, 3, 3], Array.from({ length: 72 }, (_, k) => Math.cos(k)))]]),
      nodes: [node("Conv", ["x", "w"], ["y"], { kernel_shape: attr.ints([2147483647, 3]) })],
    })
    const x = fromArray("float32", [1, 2, 6, 6], Array.from({ length: 72 }, (_, k) => Math.sin(k)))
    expect(() => runGraph(g, new Map([["x", x]]))).toThrow(/kernel_shape \[2147483647, 3\] does not match the weight's \[3, 3\]/)
    for (const kind of TARGETS) {
      const { target } = targetSettings(kind)
      const exit = await Effect.runPromiseExit(compileGraph(g, target))
      expect(exit._tag, kind).toBe("Failure")
      const err = exit._tag === "Failure" ? (exit.cause.reasons[0] as { error?: { _tag?: string; message?: string } }).error : undefined
      expect(err?._tag, kind).toBe("NodeError")
      expect(err?.message, kind).toMatch(/kernel_shape \[2147483647, 3\] does not match the weight's \[3, 3\]/)
    }
  }, 60_000)
})

/** The evaluator and every compiled target refuse `g` with a NodeError matching `re`. */
const refusedEverywhere = async (g: Graph, feeds: ReadonlyMap<string, Tensor>, re: RegExp) => {
  expect(() => runGraph(g, feeds)).toThrow(re)
  for (const kind of TARGETS) {
    const { target } = targetSettings(kind)
    const exit = await Effect.runPromiseExit(compileGraph(g, target))
    expect(exit._tag, kind).toBe("Failure")
    const err = exit._tag === "Failure" ? (exit.cause.reasons[0] as { error?: { _tag?: string; message?: string } }).error : undefined
    expect(err?._tag, kind).toBe("NodeError")
    expect(err?.message, kind).toMatch(re)
  }
}

describe("fuzz regressions: type checks at bind that only the evaluator's kernels made", () => {
  // seeds 3000313 and 3000397 of `npm run fuzz -- --seed 3`: an input widened from [2, 8] to
  // [2, 9] before a Gemm with an [8, N] weight: the evaluator refused, js and wasm read past rows
  it("a Gemm whose inner dims differ (or whose C does not broadcast) is refused on every target", async () => {
    const gemm = (xShape: number[], cShape: number[]) =>
      makeGraph({
        opset: 18,
        inputs: [{ name: "x", type: { dtype: "float32", shape: xShape } }],
        outputs: [{ name: "y", type: { dtype: "float32", shape: [2, 4] } }],
        initializers: new Map([
          ["w", fromArray("float32", [8, 4], Array.from({ length: 32 }, (_, k) => k / 32))],
          ["c", fromArray("float32", cShape, new Array(cShape.reduce((a, b) => a * b, 1)).fill(1))],
        ]),
        nodes: [node("Gemm", ["x", "w", "c"], ["y"])],
      })
    const feed = (shape: number[]) => new Map([["x", fromArray("float32", shape, new Array(shape[0] * shape[1]).fill(0.5))]])
    await refusedEverywhere(gemm([2, 9], [4]), feed([2, 9]), /Gemm inner dims differ: 9 and 8/)
    await refusedEverywhere(gemm([2, 8], [3]), feed([2, 8]), /C of shape \[3\] does not broadcast to \[2, 4\]/)
  }, 60_000)

  // seed 3000037: a Cast's `to` mutated to int8 before a Mul with an int64 constant
  it("a binary op on two dtypes is refused on every target", async () => {
    const g = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [4] } }],
      outputs: [{ name: "y", type: { dtype: "int8", shape: [4] } }],
      initializers: new Map([["k", fromArray("int64", [4], [1, 2, 3, 4])]]),
      nodes: [node("Cast", ["x"], ["i"], { to: attr.int(3) }), node("Mul", ["i", "k"], ["y"])],
    })
    await refusedEverywhere(g, new Map([["x", fromArray("float32", [4], [1, 2, 3, 4])]]), /inputs have different types: int8 and int64/)
  }, 60_000)
})

describe("fuzz regressions: more checks at bind (npm run fuzz -- --seed 1)", () => {
  // seed 1001711: a Cast to int64 before Tanh and Exp: the evaluator rounded each result to an
  // integer (exp(tanh(2)) -> exp(0) = 1), js and wasm kept the fraction (2.62) in an int64 output;
  // ONNX types these ops on floats only, and so does Tessera now
  it.each(["Tanh", "Exp", "Sqrt", "Erf"])("%s of an int64 tensor is refused on every target", async (op) => {
    const g = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [4] } }],
      outputs: [{ name: "y", type: { dtype: "int64", shape: [4] } }],
      initializers: new Map(),
      nodes: [node("Cast", ["x"], ["i"], { to: attr.int(7) }), node(op, ["i"], ["y"])],
    })
    await refusedEverywhere(g, new Map([["x", fromArray("float32", [4], [1, 2, 3, 4])]]), /input of type int64 is not accepted/)
  }, 60_000)

  // seed 1000180: an input narrowed from 4 channels to 1 before a BatchNormalization of 4
  it("a BatchNormalization whose parameters do not have the input's channel count is refused on every target", async () => {
    const p = (v: number) => fromArray("float32", [4], [v, v, v, v])
    const g = makeGraph({
      opset: 15,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 1, 3, 6] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 1, 3, 6] } }],
      initializers: new Map([["s", p(1)], ["b", p(0)], ["m", p(0)], ["v", p(1)]]),
      nodes: [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
    })
    await refusedEverywhere(g, new Map([["x", fromArray("float32", [1, 1, 3, 6], new Array(18).fill(0.5))]]), /scale has 4 values for 1 channels/)
  }, 60_000)

  // seeds 1000559, 1001039 and 1001118: an input widened from [1, 48] to [1, 49] before a
  // LayerNormalization with a scale of 48
  it("a LayerNormalization whose scale does not broadcast to its input is refused on every target", async () => {
    const g = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 49] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 49] } }],
      initializers: new Map([["s", fromArray("float32", [48], new Array(48).fill(1))]]),
      nodes: [node("LayerNormalization", ["x", "s"], ["y"])],
    })
    await refusedEverywhere(g, new Map([["x", fromArray("float32", [1, 49], Array.from({ length: 49 }, (_, k) => k))]]), /scale of shape \[48\] does not broadcast to \[1, 49\]/)
  }, 60_000)
})

describe("fuzz regressions: empty attribute lists", () => {
  // seed 1005638 of `npm run fuzz -- --seed 1`: AveragePool with strides=[] (the evaluator reads an
  // empty list as ones): js answered NaN and wasm failed untyped ("uleb: NaN is not a u32")
  it.each([
    ["AveragePool", { kernel_shape: attr.ints([2, 2]), strides: attr.ints([]) }],
    ["MaxPool", { kernel_shape: attr.ints([2, 2]), dilations: attr.ints([]) }],
  ] as const)("%s with an empty strides or dilations list agrees with the interpreter on every target", async (op, attrs) => {
    const g = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 4, 6, 5] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 4, 5, 4] } }],
      initializers: new Map(),
      nodes: [node(op, ["x"], ["y"], attrs)],
    })
    await agreesOnEveryTarget(g, new Map([["x", fromArray("float32", [1, 4, 6, 5], Array.from({ length: 120 }, (_, k) => Math.sin(k)))]]))
  }, 60_000)

  it("Conv with empty strides and dilations lists agrees with the interpreter on every target", async () => {
    const g = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 2, 6, 6] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 4, 4, 4] } }],
      initializers: new Map([["w", fromArray("float32", [4, 2, 3, 3], Array.from({ length: 72 }, (_, k) => Math.cos(k)))]]),
      nodes: [node("Conv", ["x", "w"], ["y"], { strides: attr.ints([]), dilations: attr.ints([]) })],
    })
    await agreesOnEveryTarget(g, new Map([["x", fromArray("float32", [1, 2, 6, 6], Array.from({ length: 72 }, (_, k) => Math.sin(k)))]]))
  }, 60_000)
})

describe("fuzz regressions: variadic ops' dtypes checked at bind", () => {
  // seed 1008509 of `npm run fuzz -- --seed 1` (after the fixes above): an Add swapped for Max
  // between an int8 Cast and a float32 value: the evaluator refused, js and wasm answered
  it.each(["Max", "Min", "Sum", "Mean"])("%s of int8 and float32 is refused on every target", async (op) => {
    const g = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [4] } }],
      outputs: [{ name: "y", type: { dtype: "int8", shape: [4] } }],
      initializers: new Map(),
      nodes: [node("Cast", ["x"], ["i"], { to: attr.int(3) }), node(op, ["i", "x"], ["y"])],
    })
    await refusedEverywhere(g, new Map([["x", fromArray("float32", [4], [1, 2, 3, 4])]]), /inputs have different types: int8, float32/)
  }, 60_000)
})

describe("fuzz regressions: index shapes checked at bind", () => {
  // seed 7000022 of `npm run fuzz -- --seed 7`: GatherElements with indices [12, 3, 2, 1] on data
  // [1, 3, 8, 1] along axis 2: the evaluator refused (12 rows of indices for 1 of data on axis 0),
  // js and wasm read past the data
  it("GatherElements whose indices exceed the data on another axis is refused on every target", async () => {
    const g = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 3, 8, 1] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [12, 3, 2, 1] } }],
      initializers: new Map([["i", fromArray("int64", [12, 3, 2, 1], new Array(72).fill(1))]]),
      nodes: [node("GatherElements", ["x", "i"], ["y"], { axis: attr.int(2) })],
    })
    const x = fromArray("float32", [1, 3, 8, 1], Array.from({ length: 24 }, (_, k) => k))
    await refusedEverywhere(g, new Map([["x", x]]), /indices shape \[12, 3, 2, 1\] exceeds data shape \[1, 3, 8, 1\] on axis 0/)
  }, 60_000)
})

describe("fuzz regressions: empty outputs with a huge axis", () => {
  // seed 3000462 of `npm run fuzz -- --seed 3` (reported as a hang): Tile of a [32, 32] constant by
  // [0, 2^20] is an empty [0, 33554432] tensor, but the evaluator built a 2^25-entry index map per
  // axis first (Array.from with a callback): 4 s to evaluate, 10 s to compile (constant folding)
  it.each(["Tile", "Pad"])("%s to an empty output with a 2^25 axis evaluates and compiles at once", async (op) => {
    const x = fromArray("float32", [32, 32], new Array(1024).fill(1))
    const big = op === "Tile" ? fromArray("int64", [2], [0, 1 << 20]) : fromArray("int64", [4], [0, 0, -32, (1 << 25) - 32])
    const g = makeGraph({
      opset: 18,
      inputs: [],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [0, 1 << 25] } }],
      initializers: new Map([
        ["x", x],
        ["r", big],
      ]),
      nodes: [node(op, ["x", "r"], ["y"])],
    })
    let t0 = performance.now()
    const [y] = runGraph(g, new Map())
    expect(y.shape).toEqual([0, 1 << 25])
    expect(performance.now() - t0).toBeLessThan(1000)
    t0 = performance.now()
    await Effect.runPromise(compileGraph(g, targetSettings("js").target))
    expect(performance.now() - t0).toBeLessThan(1000)
  }, 60_000)
})

describe("fuzz regressions at 10,000 cases (npm run fuzz -- --cases 10000, seed 1)", () => {
  // seeds 1005778 and 1008878: Pow of an int8 base by an int8 exponent; the targets took a double
  // pow and cast it back (-3^45 is past 2^53, and C's cast of an out-of-range double is undefined):
  // 0.5 where the interpreter, as NumPy, wraps modulo 2^8 (-83); integer Pow now runs on the
  // reference kernel on every target
  it.each(["int8", "int32", "uint8", "int16"] as const)("Pow of %s wraps like repeated multiplication on every target", async (dtype) => {
    const base = dtype === "uint8" ? [3, 15, 16, 2, 7, 1] : [-3, 15, -16, 2, 7, -1]
    const exp = [45, 17, 35, 7, 40, -3]
    const g = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype, shape: [6] } }],
      outputs: [{ name: "y", type: { dtype, shape: [6] } }],
      initializers: new Map([["e", fromArray(dtype === "uint8" ? "int8" : dtype, [6], exp)]]),
      nodes: [node("Pow", ["x", "e"], ["p"]), node("Neg", ["p"], ["n"]), node("Neg", ["n"], ["y"])],
    })
    const bits = { int8: 8, uint8: 8, int16: 16, int32: 32 }[dtype]
    const wrap = (v: bigint) => Number(dtype === "uint8" ? BigInt.asUintN(bits, v) : BigInt.asIntN(bits, v))
    const want = base.map((b, k) => (exp[k] < 0 ? (b === 1 ? 1 : b === -1 ? (exp[k] % 2 ? -1 : 1) : 0) : wrap(BigInt(b) ** BigInt(exp[k]))))
    const feeds = new Map([["x", fromArray(dtype, [6], base)]])
    expect(Array.from(runGraph(g, feeds)[0].data)).toEqual(want)
    await agreesOnEveryTarget(g, feeds)
  }, 60_000)

  // seeds 1002217 and 1005444: Pow of negative values by a fractional exponent (NaN) before a
  // MaxPool; the interpreter's MaxPool kept a NaN only when it came first in the window (NumPy,
  // the onnx reference, GlobalMaxPool and every compiled target propagate it)
  it("MaxPool propagates a NaN anywhere in the window, on the interpreter as on every target", async () => {
    const g = makeGraph({
      opset: 18,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 1, 2, 6] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 1, 2, 7] } }],
      initializers: new Map(),
      nodes: [node("MaxPool", ["x"], ["y"], { kernel_shape: attr.ints([1, 2]), pads: attr.ints([0, 1, 0, 1]) })],
    })
    const feeds = new Map([["x", fromArray("float32", [1, 1, 2, 6], [0.5, NaN, 1, 2, NaN, NaN, NaN, 3, -1, 4, 5, NaN])]])
    const y = Array.from(runGraph(g, feeds)[0].data as Float32Array)
    expect(y).toEqual([0.5, NaN, NaN, 2, NaN, NaN, NaN, NaN, NaN, 3, 4, 5, NaN, NaN])
    await agreesOnEveryTarget(g, feeds)
  }, 60_000)

  // seed 1004710: an input widened from 1 channel to 2 before a BatchNormalization whose
  // parameters hold one value each (bind and the interpreter apply it to every channel); the
  // compiled kernel read each parameter at the channel index: 0 or NaN for channel 1
  it("a BatchNormalization with one-value parameters applies them to every channel on every target", async () => {
    const one = (v: number) => fromArray("float32", [1], [v])
    const g = makeGraph({
      opset: 15,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [2, 2, 2, 5] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [2, 2, 2, 5] } }],
      initializers: new Map([["s", one(1.5)], ["b", one(0.25)], ["m", one(-0.5)], ["v", one(2)]]),
      nodes: [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
    })
    const feeds = new Map([["x", fromArray("float32", [2, 2, 2, 5], Array.from({ length: 40 }, (_, k) => Math.sin(k)))]])
    const y = Array.from(runGraph(g, feeds)[0].data as Float32Array)
    expect(y[10]).toBeCloseTo(((Math.sin(10) + 0.5) * 1.5) / Math.sqrt(2 + 1e-5) + 0.25, 5)
    await agreesOnEveryTarget(g, feeds)
  }, 60_000)
})

describe("npm run fuzz", () => {
  // (the script as `npm run fuzz` runs it: bundled into dist/ once for the run (test/support/dist.ts),
  // cases in child processes with a deadline each; c on every 100th case where gcc is here)
  const FUZZ = script("fuzz")
  it("a few hundred seeded cases: no crash, hang, untyped error, wrong answer or target more lenient than the interpreter", () => {
    expect(existsSync(FUZZ), FUZZ).toBe(true)
    const r = spawnSync(process.execPath, [FUZZ, "--cases", "240", "--seed", "7", "--jobs", "2", "--c-every", "100", "--json"], { cwd: ROOT, encoding: "utf8", timeout: 170_000 })
    const summary = JSON.parse(r.stdout.trim().split("\n").at(-1)!)
    expect(summary.findings).toEqual([])
    expect([summary.crashes, summary.hangs, summary.untyped, summary.wrong, summary.lenient]).toEqual([0, 0, 0, 0, 0])
    expect(r.status).toBe(0)
    // the cases reach past the decoder: most run on every target, many are refused with typed errors
    expect(summary.outcomes["js ok"]).toBeGreaterThan(100)
    expect(summary.outcomes["wasm ok"]).toBeGreaterThan(100)
    expect(summary.outcomes["js typed"]).toBeGreaterThan(20)
  }, 180_000)

  // the 17 seeds of the wrong answers at 10,000 cases (seed 1), replayed on js, wasm and c: the
  // bugs among them fixed (tests above), the rest classed for the reason fuzz-judge.ts gives
  it("the seeds of the 10,000-case run's wrong answers: fixed, or classed as undefined casts, ill-conditioned or edge floats", () => {
    expect(existsSync(FUZZ), FUZZ).toBe(true)
    const seeds = [1002217, 1005444, 1005778, 1008878, 1004710, 1005599, 1002253, 1004499, 1004511, 1000887, 1006642, 1007012, 1003814, 1003818, 1005573, 1004957, 1002098]
    const targets = compilerAvailable() ? "js,wasm,c" : "js,wasm"
    const r = spawnSync(process.execPath, [FUZZ, "--seeds", seeds.join(","), "--targets", targets, "--c-every", "0", "--jobs", "2", "--json"], { cwd: ROOT, encoding: "utf8", timeout: 170_000 })
    const summary = JSON.parse(r.stdout.trim().split("\n").at(-1)!)
    expect(summary.findings).toEqual([])
    expect(summary.cases).toBe(17)
    // the five bugs: every target agrees (Pow of integers, MaxPool's NaN, one-value BatchNormalization)
    expect(summary.outcomes["js ok"]).toBeGreaterThanOrEqual(5)
    // seeds 1000887, 1004499, 1006642: a float → int8 Cast of ~1e37 (undefined in ONNX) on wasm
    expect(summary.outcomes["wasm undefined-cast"]).toBe(3)
    // seeds 1005599 and 1007012: a variance that is rounding noise (Pow swapped for Mul or Add)
    expect(summary.outcomes["js ill-conditioned"]).toBe(2)
    expect(summary.outcomes["js edge-float"]).toBeGreaterThanOrEqual(6)
  }, 180_000)
})
