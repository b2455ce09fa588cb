// A group's template is chosen by the tag the op library sets on its anchor compute: each tag →
// its template; a reduction without a tag → the reduction template, whatever its name or shape.
import { describe, expect, it } from "vitest"
import { node } from "../src/ast/graph/graph.js"
import { c, mul, sub } from "../src/ast/te/expr.js"
import { at, compute, COMPUTE_TAGS, placeholder, reduceAxis, sum, type ComputeTag, type ComputeTensor, type Placeholder } from "../src/ast/te/tensor.js"
import { blockedConvCase } from "../src/ast/te/arbitrary.js"
import { baseSchedule } from "../src/lowering/lower-group.js"
import { OP_COMPUTES } from "../src/lowering/op-library.js"
import { anchorStage } from "../src/lowering/templates/common.js"
import { templateFor } from "../src/lowering/templates/template-for.js"

/** The TE program of one op: its computes from the op library, the last one the output. */
const opProgram = (op: string, inputs: readonly Placeholder[], out: readonly number[], attrs: Record<string, unknown> = {}): ComputeTensor[] => {
  const made = OP_COMPUTES[op]({
    node: node(op, inputs.map((p) => p.name), ["y"]),
    attrs,
    inputs,
    outputs: [{ dtype: "float32", shape: [...out] }],
    name: (suffix) => (suffix ? `t0_${suffix}` : "t0"),
    constants: inputs.map(() => undefined),
    opset: 18,
  })
  return [made[made.length - 1]]
}

const pads = { pads: [1, 1, 1, 1], strides: [1, 1], dilations: [1, 1], group: 1 }

/** One op per tag, the tag its anchor must carry, and the template that tag selects. */
const CASES: readonly { op: string; tag: ComputeTag; template: string; outputs: () => ComputeTensor[] }[] = [
  { op: "Conv", tag: "conv2d_nchw", template: "reduction", outputs: () => opProgram("Conv", [placeholder("x", [1, 4, 6, 6]), placeholder("w", [8, 4, 3, 3])], [1, 8, 6, 6], { ...pads, kernel_shape: [3, 3] }) },
  { op: "Conv (1-D)", tag: "conv_nd", template: "reduction", outputs: () => opProgram("Conv", [placeholder("x", [1, 4, 8]), placeholder("w", [8, 4, 3])], [1, 8, 6], { kernel_shape: [3] }) },
  { op: "ConvTranspose", tag: "conv_transpose", template: "reduction", outputs: () => opProgram("ConvTranspose", [placeholder("x", [1, 4, 5, 5]), placeholder("w", [4, 2, 3, 3])], [1, 2, 7, 7], { kernel_shape: [3, 3] }) },
  {
    op: "ConvNCHWc",
    tag: "conv2d_nchwc",
    template: "conv2d_NCHWc",
    outputs: () => opProgram("ConvNCHWc", [placeholder("x", [1, 2, 6, 6, 4]), placeholder("w", [2, 2, 3, 3, 4, 4])], [1, 2, 6, 6, 4], { ...pads, kernel_shape: [3, 3] }),
  },
  {
    op: "ConvWinogradNCHWc",
    tag: "conv2d_winograd_product",
    template: "winograd_NCHWc",
    outputs: () => opProgram("ConvWinogradNCHWc", [placeholder("x", [1, 2, 8, 8, 8]), placeholder("u", [6, 6, 2, 16, 8])], [1, 2, 8, 8, 8], { in_block: 8, out_block: 8, pads: [1, 1, 1, 1] }),
  },
  { op: "Gemm", tag: "dense", template: "matmul", outputs: () => opProgram("Gemm", [placeholder("a", [2, 5]), placeholder("b", [5, 3])], [2, 3]) },
  { op: "DensePack", tag: "dense_pack", template: "reduction", outputs: () => opProgram("DensePack", [placeholder("a", [2, 8]), placeholder("w", [2, 8, 4])], [2, 8]) },
  { op: "MatMul", tag: "matmul", template: "matmul", outputs: () => opProgram("MatMul", [placeholder("a", [2, 3, 5]), placeholder("b", [5, 4])], [2, 3, 4]) },
  { op: "MatMulPacked", tag: "matmul_packed", template: "matmul", outputs: () => opProgram("MatMulPacked", [placeholder("a", [2, 3, 5]), placeholder("w", [3, 5, 4])], [2, 3, 10], { n: 10 }) },
  { op: "MaxPool", tag: "pool", template: "reduction", outputs: () => opProgram("MaxPool", [placeholder("x", [1, 2, 6, 6])], [1, 2, 3, 3], { kernel_shape: [2, 2], strides: [2, 2] }) },
  { op: "GlobalAveragePool", tag: "global_pool", template: "reduction", outputs: () => opProgram("GlobalAveragePool", [placeholder("x", [1, 2, 4, 4])], [1, 2, 1, 1]) },
  // (u8 × s8 without zero points: the VNNI layout's product)
  { op: "MatMulInteger", tag: "int8_dot", template: "int8_dot", outputs: () => opProgram("MatMulInteger", [placeholder("a", [3, 8], "uint8"), placeholder("b", [8, 20], "int8")], [3, 20]) },
  // (a 1×1 packed conv whose layout rewrite chose the pixels in the lanes)
  {
    op: "QLinearConvPacked (pixel_lanes)",
    tag: "int8_dot_px",
    template: "int8_dot_px",
    outputs: () => {
      const f = (name: string, shape: number[] = []) => placeholder(name, shape, "float32")
      const inputs = [placeholder("x", [1, 8, 4, 4], "int8"), f("xs"), placeholder("xzp", [], "int8"), placeholder("wp", [1, 2, 1, 1, 16, 4], "int8"), f("ws", [4]), placeholder("cs", [16], "int32"), f("ys"), placeholder("yzp", [], "int8")]
      const made = OP_COMPUTES.QLinearConvPacked({
        node: node("QLinearConvPacked", inputs.map((p) => p.name), ["y"]),
        attrs: { ...pads, pads: [0, 0, 0, 0], kernel_shape: [1, 1], m: 4, pixel_lanes: 1 },
        inputs,
        outputs: [{ dtype: "int8", shape: [1, 4, 4, 4] }],
        name: (suffix) => (suffix ? `t0_${suffix}` : "t0"),
        constants: inputs.map(() => undefined),
        opset: 18,
      })
      return [made[made.length - 1]]
    },
  },
  // (one group per input channel: the depthwise form)
  {
    op: "ConvInteger (depthwise)",
    tag: "int8_depthwise",
    template: "int8_depthwise",
    outputs: () => opProgram("ConvInteger", [placeholder("x", [1, 4, 6, 6], "uint8"), placeholder("w", [4, 1, 3, 3], "int8")], [1, 4, 6, 6], { ...pads, group: 4, kernel_shape: [3, 3] }),
  },
]

/** `t` with its tag (and, recursively, its inputs' tags) removed. */
const untagged = (t: ComputeTensor): ComputeTensor => {
  const { tag: _, ...rest } = t
  return { ...rest, inputs: t.inputs.map((i) => (i.kind === "compute" ? untagged(i) : i)) }
}

describe("templateFor", () => {
  it("has a case for every tag", () => {
    expect(new Set(CASES.map((k) => k.tag))).toEqual(new Set(COMPUTE_TAGS))
  })

  it.each(CASES)("$op: the op library tags its anchor $tag, which selects the $template template", ({ tag, template, outputs }) => {
    const base = baseSchedule(outputs())
    expect(anchorStage(base)?.op.tag).toBe(tag)
    expect(templateFor(base).name).toBe(template)
  })

  it("an untagged reduction takes the reduction template; one along its input's last (contiguous) axis the inner-reduction one", () => {
    const a = placeholder("a", [4, 6])
    const k = reduceAxis(6, "k")
    const rowsOfSquares = compute("t0", [4, 1], (i) => sum(mul(at(a, i, k.var), at(a, i, k.var)), [k]))
    expect(rowsOfSquares.tag).toBeUndefined()
    expect(templateFor(baseSchedule([rowsOfSquares])).name).toBe("inner-reduction")
    const r = reduceAxis(4, "r")
    const columnsOfSquares = compute("t1", [6, 1], (j) => sum(mul(at(a, r.var, j), at(a, r.var, j)), [r]))
    expect(templateFor(baseSchedule([columnsOfSquares])).name).toBe("reduction")
    // a read that does not move with the reduction (a row statistic) does not count
    const m = placeholder("m", [4])
    const centered = compute("t2", [4, 1], (i) => sum(sub(at(a, i, k.var), at(m, i)), [k]))
    expect(templateFor(baseSchedule([centered])).name).toBe("inner-reduction")
  })

  it("neither a name nor a shape selects a template: the blocked conv and the Winograd product untagged take the reduction template", () => {
    for (const op of ["ConvNCHWc", "ConvWinogradNCHWc"]) {
      const outputs = CASES.find((k) => k.op === op)!.outputs().map(untagged)
      expect(templateFor(baseSchedule(outputs)).name).toBe("reduction")
    }
  })

  it("a blocked conv whose output two stages read has no tile to compute it at: the reduction template", () => {
    const [conv] = blockedConvCase(1, { ib: 4, ob: 4, CB: 1, OB: 1, H: 4, W: 4, K: 3, stride: 1, epilogue: false }).outputs
    expect(templateFor(baseSchedule([conv])).name).toBe("conv2d_NCHWc")
    const twice = (name: string, f: number) => compute(name, conv.shape, (...i) => mul(at(conv, ...i), c(f, "float32")))
    expect(templateFor(baseSchedule([twice("a", 2), twice("b", 3)])).name).toBe("reduction")
  })
})
