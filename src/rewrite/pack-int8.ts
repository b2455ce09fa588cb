// The layout rewrite of an int8 convolution's constant weights, a rule of rewrite.AlterLayout (as
// pack-dense.ts is for float products): a QLinearConv the blocked VNNI form computes (2-D, group 1,
// x's zero point per tensor, w's zero point the one that makes w − w_zp an s8 value: 0 for int8
// weights, 128 for uint8, every channel alike) over constant weights becomes QLinearConvPacked, its
// weights packed [⌈M/16⌉, ⌈C/4⌉, kh, kw, 16, 4] and their column sums computed here, once, instead
// of by a stage of the kernel on every run (O(weights): ResNet-18's 11 M weights, twice).
import { attr } from "../ast/graph/attrs.js"
import { resolveNode } from "../ast/graph/evaluate.js"
import type { Node } from "../ast/graph/graph.js"
import type { ValueType } from "../ast/graph/op.js"
import { packInt8Conv } from "../ast/graph/ops/int8-packed.js"
import { TESSERA_DOMAIN } from "../ast/graph/ops/index.js"
import type { Tensor } from "../ast/graph/tensor.js"
import type { Rule } from "./rules.js"

/** The shift that makes a QLinearConv's constant weights s8 (0 or 128), where the rule applies; undefined where it does not. */
export const int8PackShift = (n: Node, type: (v: string) => ValueType | undefined, constant: (v: string) => Tensor | undefined): number | undefined => {
  if (n.op !== "QLinearConv" || n.domain !== "") return undefined
  const a = resolveNode(n).attrs as { group: number }
  if (a.group !== 1) return undefined
  const x = type(n.inputs[0])
  const w = constant(n.inputs[3])
  if (!x || !w || x.shape.length !== 4 || typeof x.shape[1] !== "number" || w.shape.length !== 4) return undefined
  const xzp = n.inputs[2] ? type(n.inputs[2]) : undefined
  if (xzp && !xzp.shape.every((d) => d === 1)) return undefined
  const shift = w.dtype === "int8" ? 0 : w.dtype === "uint8" ? 128 : undefined
  if (shift === undefined) return undefined
  if (!n.inputs[5]) return shift === 0 ? 0 : undefined
  const zp = constant(n.inputs[5])
  return zp && Array.from(zp.data as ArrayLike<number>).every((z) => Number(z) === shift) ? shift : undefined
}

/** QLinearConv over constant weights → QLinearConvPacked over them packed for the VNNI dot, with their column sums. */
export const int8ConvToPacked: Rule = {
  name: "int8-conv-to-packed",
  apply: (n, ctx) => {
    const shift = int8PackShift(n, ctx.type, ctx.constant)
    if (shift === undefined) return undefined
    const w = ctx.constant(n.inputs[3])!
    const { packed, colsum } = packInt8Conv(w, shift)
    const wName = ctx.fresh(`${n.inputs[3]}_vnni`)
    const csName = ctx.fresh(`${n.inputs[3]}_colsum`)
    const y = ctx.fresh(`${n.outputs[0]}_packed`)
    const inputs = [...n.inputs]
    inputs[3] = wName
    inputs[5] = csName
    return {
      nodes: [{ name: ctx.fresh(`${n.name}_packed`), op: "QLinearConvPacked", domain: TESSERA_DOMAIN, inputs, outputs: [y], attrs: { ...n.attrs, m: attr.int(w.shape[0]) } }],
      outputs: [y],
      constants: new Map([[wName, packed], [csName, colsum]]),
    }
  },
}
