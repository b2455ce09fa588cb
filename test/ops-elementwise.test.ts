// The tricky corners of the elementwise ops, each on a one-node graph: half-to-even Round,
// integer Div/Mod signs, Cast's truncation and wrapping (and its single rounding to float16),
// NaN in Max/Min, exact integer Mul/Pow, pre-opset-7 broadcasting, Clip, BitShift, Dropout's mask
// and PRelu's per-channel slope; and the broadcasting zip against a plain index-map reference.
import { describe, expect, it } from "vitest"
import { attr, type Attrs } from "../src/ast/graph/attrs.js"
import { allocate, type DType } from "../src/ast/graph/dtype.js"
import { UnsupportedOpError } from "../src/ast/graph/errors.js"
import { resolveNode, runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { mapBinary } from "../src/ast/graph/ops/elementwise-kernels.js"
import { broadcastIndex, broadcastShapes, fromArray, sizeOf, toNumbers, type Tensor } from "../src/ast/graph/tensor.js"

const t = (dtype: DType, values: number[], shape = [values.length]): Tensor => fromArray(dtype, shape, values)

/** Runs `op` on one node; inputs given as undefined are omitted (""). */
const runN = (op: string, inputs: (Tensor | undefined)[], attrs: Attrs = {}, opset = 18, outputs = 1): Tensor[] => {
  const names = inputs.map((x, k) => (x ? `x${k}` : ""))
  const outs = Array.from({ length: outputs }, (_, j) => `y${j}`)
  const g = makeGraph({
    opset,
    inputs: inputs.flatMap((x, k) => (x ? [{ name: `x${k}`, type: { dtype: x.dtype, shape: x.shape } }] : [])),
    outputs: outs.map((name) => ({ name, type: { dtype: "float32" as DType, shape: [] } })),
    nodes: [node(op, names, outs, attrs)],
  })
  return runGraph(g, new Map(inputs.flatMap((x, k) => (x ? [[`x${k}`, x] as const] : []))))
}
const run = (op: string, inputs: (Tensor | undefined)[], attrs: Attrs = {}, opset = 18): Tensor => runN(op, inputs, attrs, opset)[0]

/** The op's type relation on the inputs' types, which must match what the kernel produced. */
const expectInferMatches = (op: string, inputs: Tensor[], attrs: Attrs, opset: number, outs: Tensor[]) => {
  const { def, attrs: decoded } = resolveNode(node(op, inputs.map((_, k) => `x${k}`), outs.map((_, j) => `y${j}`), attrs, "n"))
  const inferred = def.infer({ node: "n", attrs: decoded, opset, inputs: inputs.map((x) => ({ dtype: x.dtype, shape: x.shape })), values: [], outputs: outs.length })
  expect(inferred.map((v) => [v.dtype, v.shape])).toEqual(outs.map((o) => [o.dtype, o.shape]))
}

describe("Round", () => {
  it("rounds halves to even, in both signs", () => {
    const x = t("float32", [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, -3.5, 1e20])
    expect(toNumbers(run("Round", [x])).map((v) => v + 0)).toEqual([0, 2, 2, 0, -2, -2, 2, -4, Math.fround(1e20)])
  })
})

describe("integer Div and Mod", () => {
  it("Div truncates toward zero", () => {
    expect(toNumbers(run("Div", [t("int32", [7, -7, 7, -7]), t("int32", [2, 2, -2, -2])]))).toEqual([3, -3, -3, 3])
    expect(toNumbers(run("Div", [t("int64", [2 ** 52 + 1]), t("int64", [3])]))).toEqual([Math.trunc((2 ** 52 + 1) / 3)])
  })
  it("Mod with fmod=0 takes the divisor's sign; fmod=1 the dividend's (C fmod)", () => {
    const a = t("int32", [7, -7, 7, -7, 6])
    const b = t("int32", [3, 3, -3, -3, 3])
    expect(toNumbers(run("Mod", [a, b]))).toEqual([1, 2, -2, -1, 0])
    expect(toNumbers(run("Mod", [a, b], { fmod: attr.int(1) }))).toEqual([1, -1, 1, -1, 0])
    expect(toNumbers(run("Mod", [t("float32", [-5.5, 5.5]), t("float32", [2, -2])], { fmod: attr.int(1) }))).toEqual([-1.5, 1.5])
  })
  it("division and modulo of integers by zero are errors", () => {
    expect(() => run("Div", [t("int32", [1]), t("int32", [0])])).toThrow(/division by zero/)
    expect(() => run("Mod", [t("int64", [1]), t("int64", [0])])).toThrow(/modulo by zero/)
  })
})

describe("Cast", () => {
  it("float → int truncates toward zero and wraps", () => {
    const x = t("float32", [300.7, -1.9, 127.9, -129, 1e10])
    expect(toNumbers(run("Cast", [x], { to: attr.int(3) }))).toEqual([44, -1, 127, 127, 0]) // int8; 1e10 = 0x2540BE400
    expect(toNumbers(run("Cast", [t("float32", [-1, 256.5, 65.99])], { to: attr.int(2) }))).toEqual([255, 0, 65]) // uint8
    expect(toNumbers(run("Cast", [t("float64", [-2.5, 2 ** 40 + 0.5])], { to: attr.int(7) }))).toEqual([-2, 2 ** 40]) // int64
  })
  it("→ bool is x ≠ 0, NaN included", () => {
    expect(toNumbers(run("Cast", [t("float32", [0, -0, 0.1, NaN, -Infinity])], { to: attr.int(9) }))).toEqual([0, 0, 1, 1, 1])
  })
  it("float64 → float16 rounds once (through float32 it would round twice)", () => {
    // 1 + 2^-11 is halfway between float16 1 and 1 + 2^-10; x lies just above it
    const x = 1 + 2 ** -11 + 2 ** -40
    expect(toNumbers(run("Cast", [t("float64", [x, 1 + 2 ** -11])], { to: attr.int(10) }))).toEqual([1 + 2 ** -10, 1])
  })
  it("takes the Cast-1 string form of `to`, and names unsupported targets", () => {
    expect(run("Cast", [t("int32", [3])], { to: attr.str("DOUBLE") }, 1).dtype).toBe("float64")
    expect(() => run("Cast", [t("float32", [1])], { to: attr.int(17) })).toThrow(UnsupportedOpError)
    expect(() => run("Cast", [t("float32", [1])], { to: attr.int(17) })).toThrow(/float8e4m3fn/)
    expect(() => run("Cast", [t("float32", [1])], { to: attr.int(8) })).toThrow(/string/)
  })
})

describe("Max and Min", () => {
  it("propagate NaN from any input, with broadcasting", () => {
    const a = t("float32", [1, NaN, 3], [3])
    const b = t("float32", [NaN, 0, 2, 5, 1, 4], [2, 3])
    expect(toNumbers(run("Max", [a, b]))).toEqual([NaN, NaN, 3, 5, NaN, 4])
    expect(toNumbers(run("Min", [a, b]))).toEqual([NaN, NaN, 2, 1, NaN, 3])
  })
  it("Mean of integers-valued float32 computes in float64 and broadcasts three inputs", () => {
    const y = run("Mean", [t("float32", [1, 2]), t("float32", [3], [1]), t("float32", [5, 7, 9, 11], [2, 2])])
    expect(y.shape).toEqual([2, 2])
    expect(toNumbers(y)).toEqual([3, 4, 13 / 3, 16 / 3].map(Math.fround))
  })
})

describe("exact integer arithmetic", () => {
  it("int32 Mul wraps like C (low 32 bits of the exact product)", () => {
    const y = run("Mul", [t("int32", [65536, 123456789, -7]), t("int32", [65536, 1000, 3])])
    expect(toNumbers(y)).toEqual([0, Math.imul(123456789, 1000), -21])
  })
  it("integer Pow wraps past 2^53; the exponent may have another type", () => {
    expect(toNumbers(run("Pow", [t("int32", [3, 2]), t("int32", [40, 10])]))).toEqual([Number(BigInt.asIntN(32, 3n ** 40n)), 1024])
    const y = run("Pow", [t("float32", [2, 4]), t("int64", [3, -1])])
    expect(y.dtype).toBe("float32")
    expect(toNumbers(y)).toEqual([8, 0.25])
  })
  it("Pow follows C where JS differs: pow(1, NaN) = pow(NaN, 0) = 1", () => {
    expect(toNumbers(run("Pow", [t("float32", [1, NaN, -1]), t("float32", [NaN, 0, Infinity])]))).toEqual([1, 1, 1])
  })
  it("uint8 Sub and BitShift wrap", () => {
    expect(toNumbers(run("Sub", [t("uint8", [3]), t("uint8", [5])]))).toEqual([254])
    const s = run("BitShift", [t("uint8", [200, 1, 255]), t("uint8", [1, 9, 4])], { direction: attr.str("LEFT") })
    expect(toNumbers(s)).toEqual([144, 0, 240])
    const r = run("BitShift", [t("uint32", [2 ** 32 - 1, 16]), t("uint32", [4, 40])], { direction: attr.str("RIGHT") })
    expect(toNumbers(r)).toEqual([2 ** 28 - 1, 0])
  })
  it("bitwise ops on int64 beyond 32 bits go through BigInt", () => {
    expect(toNumbers(run("BitwiseAnd", [t("int64", [2 ** 40 + 5, -1]), t("int64", [2 ** 40 + 3, 2 ** 35])]))).toEqual([2 ** 40 + 1, 2 ** 35])
    expect(toNumbers(run("BitwiseNot", [t("int64", [0, -(2 ** 40)])]))).toEqual([-1, 2 ** 40 - 1])
  })
})

describe("pre-opset-7 broadcasting", () => {
  it("lines B up with A from `axis` when broadcast=1", () => {
    const a = t("float32", new Array(24).fill(0), [2, 3, 4])
    const b = t("float32", [1, 2, 3])
    const attrs = { broadcast: attr.int(1), axis: attr.int(1) }
    const y = run("Add", [a, b], attrs, 6)
    expect(y.shape).toEqual([2, 3, 4])
    expect(toNumbers(y).slice(0, 12)).toEqual([1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3])
    expectInferMatches("Add", [a, b], attrs, 6, [y])
  })
  it("PRelu's 1-D slope applies per channel before opset 7", () => {
    const x = t("float32", [-1, -1, -1, -1, 1, 1], [1, 3, 2])
    const slope = t("float32", [0.5, 2, 3])
    expect(toNumbers(run("PRelu", [x, slope], {}, 6))).toEqual([-0.5, -0.5, -2, -2, 1, 1])
    expect(() => run("PRelu", [x, slope], {}, 9)).toThrow(/does not broadcast/)
  })
})

describe("Clip", () => {
  it("takes attribute bounds before opset 11 and (optional) input bounds after, integers too", () => {
    expect(toNumbers(run("Clip", [t("float32", [-2, 0, 2, NaN])], { min: attr.float(-1), max: attr.float(1) }, 6))).toEqual([-1, 0, 1, NaN])
    expect(toNumbers(run("Clip", [t("int32", [-5, 5, 50]), undefined, t("int32", [10], [])], {}, 13))).toEqual([-5, 5, 10])
    // min > max: everything becomes max
    expect(toNumbers(run("Clip", [t("int64", [-5, 5]), t("int64", [3], []), t("int64", [1], [])], {}, 13))).toEqual([1, 1])
    expect(toNumbers(run("Clip", [t("float32", [-5, 5, NaN]), t("float32", [3], []), t("float32", [1], [])], {}, 13))).toEqual([1, 1, NaN])
  })
})

describe("Dropout", () => {
  it("is the identity in inference, with a mask of the data's type before opset 10 and bool after", () => {
    const x = t("float32", [1, 2, 3])
    for (const [opset, dtype] of [[7, "float32"], [12, "bool"]] as const) {
      const outs = runN("Dropout", [x], {}, opset, 2)
      expect(toNumbers(outs[0])).toEqual([1, 2, 3])
      expect([outs[1].dtype, toNumbers(outs[1])]).toEqual([dtype, [1, 1, 1]])
      expectInferMatches("Dropout", [x], {}, opset, outs)
    }
  })
  it("in training mode is unsupported unless the ratio is 0", () => {
    const on = t("bool", [1], [])
    expect(toNumbers(run("Dropout", [t("float32", [4]), t("float32", [0], []), on], {}, 13))).toEqual([4])
    expect(() => run("Dropout", [t("float32", [4]), t("float32", [0.5], []), on], {}, 13)).toThrow(UnsupportedOpError)
  })
})

describe("activations", () => {
  const f64 = (values: number[]) => t("float64", values)
  const one = (op: string, x: number, attrs: Attrs = {}) => toNumbers(run(op, [f64([x])], attrs, 22))[0]
  it("take the spec's defaults", () => {
    expect(one("Selu", -1)).toBeCloseTo(1.0507009873554805 * 1.6732632423543772 * Math.expm1(-1), 6)
    expect(one("HardSigmoid", 1)).toBeCloseTo(0.7, 6)
    expect(one("LeakyRelu", -1)).toBeCloseTo(-0.01, 6)
    expect([one("ThresholdedRelu", 1), one("ThresholdedRelu", 1.5)]).toEqual([0, 1.5])
    expect([one("Shrink", 0.5), one("Shrink", -0.75), one("Shrink", -0.75, { bias: attr.float(0.5) })]).toEqual([0, -0.75, -0.25])
    expect(one("Celu", -1)).toBeCloseTo(Math.expm1(-1), 12)
    expect(one("Gelu", 1)).toBeCloseTo(0.8413447460685429, 12)
    expect(one("Gelu", 1, { approximate: attr.str("tanh") })).toBeCloseTo(0.8411919906082768, 12)
    expect(one("Swish", 2)).toBeCloseTo(2 / (1 + Math.exp(-2)), 12)
  })
  it("keep NaN, and IsInf detects the signs asked for", () => {
    expect(toNumbers(run("Relu", [f64([NaN, -1, 2])]))).toEqual([NaN, 0, 2])
    expect(toNumbers(run("IsInf", [f64([Infinity, -Infinity, NaN, 1])], { detect_negative: attr.int(0) }))).toEqual([1, 0, 0, 0])
  })
})

describe("the broadcasting zip", () => {
  // a small deterministic generator: shapes of rank ≤ 4 with dims from {1, 2, 3}, sometimes dropped
  let seed = 12345
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31
    return seed % n
  }
  it("agrees with a plain index-map reference on random broadcasting shapes", () => {
    for (let trial = 0; trial < 300; trial++) {
      const rank = rand(5)
      const out = Array.from({ length: rank }, () => 1 + rand(3))
      const operand = () => out.slice(rand(rank + 1)).map((d) => (rand(3) === 0 ? 1 : d))
      const [as, bs] = [operand(), operand()]
      const a = fromArray("float64", as, Array.from({ length: sizeOf(as) }, () => rand(100)))
      const b = fromArray("float64", bs, Array.from({ length: sizeOf(bs) }, () => rand(100)))
      const got = mapBinary(a, b, (x, y) => x * 1000 + y, "float64")
      const shape = broadcastShapes(as, bs)!
      const ia = broadcastIndex(as, shape)
      const ib = broadcastIndex(bs, shape)
      const want = allocate("float64", sizeOf(shape))
      for (let i = 0; i < want.length; i++) want[i] = a.data[ia[i]] * 1000 + b.data[ib[i]]
      expect(got.shape).toEqual(shape)
      expect(toNumbers(got)).toEqual(toNumbers(fromArray("float64", shape, want)))
      // the same through Sub's written-out run
      for (let i = 0; i < want.length; i++) want[i] = a.data[ia[i]] - b.data[ib[i]]
      expect(toNumbers(run("Sub", [a, b]))).toEqual(toNumbers(fromArray("float64", shape, want)))
    }
  })
})
