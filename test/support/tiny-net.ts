// The small network the cuda tests compile end to end (fp32 and fp16): each kind of group a CNN
// has — conv + BN + relu, max pool, depthwise conv + clip, 1x1 conv + residual add, global pool,
// Gemm, softmax.
import { attr } from "../../src/ast/graph/attrs.js"
import type { Graph } from "../../src/ast/graph/graph.js"
import { conv, linear, maxPool, NetBuilder, poolFlatten, relu } from "../../src/zoo/builder.js"
import { scalar } from "../../src/zoo/layers.js"

export const tinyNet = (): Graph => {
  const b = new NetBuilder(7, 13)
  let x = b.input("input", { dtype: "float32", shape: [1, 3, 16, 16] })
  x = relu(b, conv(b, x, "conv1", { cin: 3, cout: 8, k: 3, pad: 1, bias: true }), "relu1")
  x = maxPool(b, x, "pool1", 2, 2, 0)
  const dw = b.op("Clip", [conv(b, x, "dw", { cin: 8, cout: 8, k: 3, pad: 1, group: 8 }), scalar(b, "zero", 0), scalar(b, "six", 6)], "clip")
  const pw = conv(b, dw, "pw", { cin: 8, cout: 8, k: 1 })
  x = b.op("Add", [pw, x], "residual")
  const f = poolFlatten(b, x, "gap")
  const l = linear(b, f, "fc", 8, 10)
  b.op("Softmax", [l], "output", { axis: attr.int(-1) })
  return b.build("tiny", [{ name: "output", type: { dtype: "float32", shape: [1, 10] } }])
}
