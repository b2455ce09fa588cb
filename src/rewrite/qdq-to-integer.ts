// rewrite.QdqToInteger (TVM's FakeQuantizationToInteger, onnxruntime's QDQ transformer): the float
// ops of a QDQ model — DequantizeLinear → op → QuantizeLinear — become integer ops on the 8-bit
// tensors, in the standard ONNX domain:
//   DQ(x), DQ(w) [, DQ(b)] → Conv → Q        ⇒ QLinearConv (b: int32, scale x_scale·w_scale, zp 0 → B)
//   DQ(a), DQ(b) → MatMul → Q                ⇒ QLinearMatMul
//   DQ(a), DQ(b) → Gemm → Q                  ⇒ QLinearMatMul; with a bias DQ(c): MatMulInteger → Add
//                                              (int32 c) → QuantizeLinear (int32 in, scale y_scale /
//                                              (a_scale·b_scale) per column): exact in the standard ops
//   … → Relu / Clip → Q                      ⇒ folded into the output range: Clip on the 8-bit
//                                              output at q(lo), q(hi) (q(relu(y)) = max(q(y), zp) by
//                                              monotonicity), dropped where the type's range is inside;
//                                              after Conv / MatMul / Gemm and after the com.microsoft
//                                              ops with two operands (a residual Add → Relu → Q: the
//                                              QLinearAdd, then the clamp)
//   DQ → MaxPool/Reshape/Flatten/Transpose/Squeeze/Unsqueeze/Concat/Slice/Pad/Relu/Clip → Q, all with
//   the same scale and zero point            ⇒ the op on the 8-bit tensor (Pad fills the zero point)
//   DQ(a), DQ(b) → Add / Mul → Q             ⇒ com.microsoft QLinearAdd / QLinearMul
//   DQ → AveragePool / GlobalAveragePool → Q ⇒ com.microsoft QLinearAveragePool / QLinearGlobalAveragePool
//   DQ → Sigmoid / LeakyRelu → Q             ⇒ com.microsoft QLinearSigmoid / QLinearLeakyRelu (a table)
//                                              (what onnxruntime's QDQ transformer makes of them; the
//                                              contrib ops requantize once, in float32, so each is within
//                                              1 LSB of the ONNX meaning; the encoder imports the
//                                              com.microsoft domain wherever a node uses it)
//   Q(constant)                              ⇒ folded
// Every condition is checked (constant per-tensor activation scales, weight scales per tensor or per
// output channel, the bias scale equal to x_scale·w_scale within float32 rounding, single consumers
// of the float values that disappear); a pattern that does not qualify stays, and
// `qdqToIntegerReport` says why, per node. The contrib ops need per-tensor constant params and one
// 8-bit type for all their operands and output (onnxruntime's kernels take one); otherwise, and for
// ops with no integer form, DQ → op → Q stays.
// The law (laws/rewrite/qdq-to-integer.law.ts) states and tests the rounding bound.
import { attr } from "../ast/graph/attrs.js"
import { resolveNode } from "../ast/graph/evaluate.js"
import type { Graph, Node } from "../ast/graph/graph.js"
import { MICROSOFT_DOMAIN } from "../ast/graph/ops/contrib-quant-common.js"
import { clipBounds } from "../ast/graph/ops/elementwise-convert.js"
import { fromArray, type Tensor } from "../ast/graph/tensor.js"
import { eliminateDeadCodeSync } from "./eliminate-dead-code.js"
import { graphPass } from "./pass.js"
import { dqParams, no, ok, perTensor, quantizeValue, quantParams, rankOf, sameParams, scalarScale, scalarZp, type Checked, type QParams } from "./qdq-params.js"
import { rewriteToFixedPoint, type Replacement, type Rule, type RuleCtx } from "./rules.js"

/** What the pass made of one float op (or one constant QuantizeLinear). */
export interface QdqDecision {
  readonly node: string
  readonly op: string
  /** integer: an integer op with requantization (standard or com.microsoft); int8: the same op on the 8-bit tensor; folded; kept. */
  readonly outcome: "integer" | "int8" | "folded" | "kept"
  /** What it became (ops), or why it stayed. */
  readonly detail: string
}

const INTEGER_OPS = new Set(["Conv", "MatMul", "Gemm"])
/** Ops exact on the 8-bit tensor when their input and output share scale and zero point. */
const INT8_OPS = new Set(["MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Slice", "Pad", "Relu", "Clip"])
/** Ops whose quantized form is a com.microsoft contrib op (onnxruntime's QOperator ops). */
const CONTRIB: Record<string, string> = {
  Add: "QLinearAdd",
  Mul: "QLinearMul",
  AveragePool: "QLinearAveragePool",
  GlobalAveragePool: "QLinearGlobalAveragePool",
  Sigmoid: "QLinearSigmoid",
  LeakyRelu: "QLinearLeakyRelu",
}

const isContrib = (op: string): boolean => Object.hasOwn(CONTRIB, op)

/**
 * Ops a Relu / Clip before the Q folds into (its clamp on their 8-bit output): the integer ops, and
 * the contrib ops whose QLinear form takes no activation of its own (a residual Add, a Mul).
 */
const CLAMPS_INTO = new Set([...INTEGER_OPS, "Add", "Mul"])

type Found = { readonly decision: QdqDecision; readonly replacement?: Replacement }

const kept = (n: Node, reason: string): Found => ({ decision: { node: n.name, op: n.op, outcome: "kept", detail: reason } })

/** The one reader of `v` is `reader`, and `v` is no graph output. */
const onlyReader = (ctx: RuleCtx, v: string, reader: Node): boolean => {
  const cs = ctx.consumers(v)
  return cs.length === 1 && cs[0] === reader && !ctx.isOutput(v)
}

/** Fresh constants, named after `base`, collected for a replacement. */
const constantsFor = (ctx: RuleCtx, base: string) => {
  const map = new Map<string, Tensor>()
  return {
    map,
    add: (what: string, t: Tensor): string => {
      const name = ctx.fresh(`${base}_${what}`)
      map.set(name, t)
      return name
    },
  }
}

const mk = (ctx: RuleCtx, base: string, op: string, inputs: readonly string[], outputs: readonly string[], attrs: Node["attrs"] = {}, domain = ""): Node => ({
  name: ctx.fresh(`${base}_${op.toLowerCase()}`),
  op,
  domain,
  inputs,
  outputs,
  attrs,
})

/**
 * The clamp an activation between the op and its Q puts on the 8-bit output: [q(lo), q(hi)] under
 * the output's params, or undefined where the type's range lies inside it (no node needed).
 */
const clampOf = (act: Node, ctx: RuleCtx, y: QParams): Checked<readonly [number, number] | undefined> => {
  const [tlo, thi] = y.dtype === "int8" ? [-128, 127] : [0, 255]
  let lo: number
  let hi: number
  if (act.op === "Relu") [lo, hi] = [quantizeValue(0, y), thi]
  else {
    const bounds = act.inputs.slice(1).map((v) => (v === "" ? undefined : ctx.constant(v)))
    if (act.inputs.slice(1).some((v, k) => v !== "" && !bounds[k])) return no(`Clip ${act.name}'s bounds are not constants`)
    const [flo, fhi] = clipBounds(ctx.opset, resolveNode(act).attrs as { min?: number; max?: number }, [undefined, ...bounds])
    if (Number.isNaN(flo) || Number.isNaN(fhi)) return no(`Clip ${act.name} has a NaN bound`)
    lo = flo === -Infinity ? tlo : quantizeValue(flo, y)
    hi = fhi === Infinity ? thi : quantizeValue(fhi, y)
  }
  if (lo <= tlo && hi >= thi) return ok(undefined)
  if (ctx.opset < 12) return no(`opset ${ctx.opset} has no 8-bit Clip (from opset 12)`)
  return ok([lo, hi] as const)
}

/** The nodes that put `clamp` on `from` into `to` (an 8-bit Clip), or none. */
const clampNodes = (ctx: RuleCtx, base: string, consts: ReturnType<typeof constantsFor>, clamp: readonly [number, number] | undefined, y: QParams, from: string, to: string): Node[] =>
  clamp ? [mk(ctx, base, "Clip", [from, consts.add("clip_lo", fromArray(y.dtype, [], [clamp[0]])), consts.add("clip_hi", fromArray(y.dtype, [], [clamp[1]]))], [to])] : []

/**
 * The int32 bias of a DequantizeLinear of a constant whose scale is `expected[c]` (x_scale·w_scale
 * per channel, exactly as reals) within float32 rounding (2⁻²³ relative: one ulp), zero point 0;
 * `channels` values along the bias's last axis.
 */
const biasOf = (ctx: RuleCtx, v: string, expected: (c: number) => number, channels: number): Checked<string> => {
  const dq = ctx.producer(v)
  if (!dq || dq.op !== "DequantizeLinear") return no("the bias is not a DequantizeLinear of int32")
  const b = ctx.constant(dq.inputs[0])
  if (!b || b.dtype !== "int32") return no("the bias is not a DequantizeLinear of an int32 constant")
  if (b.data.length !== channels || b.shape[b.shape.length - 1] !== channels) return no(`the bias has shape [${b.shape.join(", ")}], not ${channels} values along its last axis`)
  const a = resolveNode(dq).attrs as { axis: number; block_size: number; output_dtype: number }
  const s = ctx.constant(dq.inputs[1])
  if (!s || s.dtype !== "float32") return no("the bias scale is not a float32 constant")
  if (a.block_size !== 0 || (a.output_dtype !== 0 && a.output_dtype !== 1)) return no("the bias DequantizeLinear is blocked or not float32")
  if (s.data.length !== 1 && (s.data.length !== channels || (a.axis < 0 ? a.axis + b.shape.length : a.axis) !== b.shape.length - 1)) return no("the bias scale is neither per tensor nor per channel")
  const z = dq.inputs[2] ? ctx.constant(dq.inputs[2]) : undefined
  if (dq.inputs[2] && (!z || !(z.data as Int32Array).every((x) => x === 0))) return no("the bias zero point is not a constant 0")
  for (let c = 0; c < channels; c++) {
    const got = s.data[s.data.length === 1 ? 0 : c] as number
    const want = expected(c)
    if (!(Math.abs(got - want) <= 2 ** -23 * want)) return no(`the bias scale ${got} of channel ${c} is not x_scale·w_scale = ${want} within float32 rounding`)
  }
  return ok(dq.inputs[0])
}

interface Anchor {
  readonly q: Node
  readonly y: QParams
  readonly core: Node
  readonly act: Node | undefined
}

/** Conv → QLinearConv. */
const convToInteger = ({ q, y, core, act }: Anchor, ctx: RuleCtx, clamp: readonly [number, number] | undefined): Found => {
  const x = dqParams(ctx, core.inputs[0], "the input")
  if (!x.ok) return kept(core, x.reason)
  if (!perTensor(x.value.params)) return kept(core, "the input's scale is per axis (QLinearConv takes one)")
  const w = dqParams(ctx, core.inputs[1], "the weight")
  if (!w.ok) return kept(core, w.reason)
  const wp = w.value.params
  const M = ctx.type(core.inputs[1])?.shape[0]
  if (typeof M !== "number") return kept(core, "the number of filters is not static")
  if (!perTensor(wp) && (wp.axis !== 0 || wp.scale.data.length !== M)) return kept(core, `the weight scale is per axis ${wp.axis}, not per output channel (axis 0)`)
  const sx = x.value.params.scale.data[0] as number
  const sw = (c: number) => wp.scale.data[perTensor(wp) ? 0 : c] as number
  const bias = core.inputs[2] ? biasOf(ctx, core.inputs[2], (c) => sx * sw(c), M) : ok("")
  if (!bias.ok) return kept(core, bias.reason)
  const consts = constantsFor(ctx, core.name)
  const out = clamp ? ctx.fresh(`${q.outputs[0]}_unclamped`) : q.outputs[0]
  const inputs = [
    x.value.node.inputs[0], consts.add("x_scale", scalarScale(x.value.params)), consts.add("x_zero_point", scalarZp(x.value.params)),
    w.value.node.inputs[0], consts.add("w_scale", perTensor(wp) ? scalarScale(wp) : wp.scale), consts.add("w_zero_point", perTensor(wp) ? scalarZp(wp) : wp.zp),
    consts.add("y_scale", scalarScale(y)), consts.add("y_zero_point", scalarZp(y)),
    ...(bias.value ? [bias.value] : []),
  ]
  const nodes = [mk(ctx, core.name, "QLinearConv", inputs, [out], core.attrs), ...clampNodes(ctx, core.name, consts, clamp, y, out, q.outputs[0])]
  return {
    decision: { node: core.name, op: core.op, outcome: "integer", detail: nodes.map((n) => n.op).join(" → ") + (act ? ` (${act.op} ${act.name} folded)` : "") },
    replacement: { nodes, outputs: q.outputs, constants: consts.map },
  }
}

/** MatMul → QLinearMatMul; Gemm → QLinearMatMul, or MatMulInteger → Add → QuantizeLinear with a bias. */
const matmulToInteger = ({ q, y, core, act }: Anchor, ctx: RuleCtx, clamp: readonly [number, number] | undefined): Found => {
  const gemm = core.op === "Gemm"
  const g = gemm ? (resolveNode(core).attrs as { alpha: number; beta: number; transA: number; transB: number }) : { alpha: 1, beta: 1, transA: 0, transB: 0 }
  if (g.alpha !== 1) return kept(core, `Gemm's alpha is ${g.alpha}, not 1`)
  if (gemm && core.inputs[2] && g.beta !== 1) return kept(core, `Gemm's beta is ${g.beta}, not 1`)
  const a = dqParams(ctx, core.inputs[0], "A")
  if (!a.ok) return kept(core, a.reason)
  if (!perTensor(a.value.params)) return kept(core, "A's scale is per axis (one scale for A only)")
  const b = dqParams(ctx, core.inputs[1], "B")
  if (!b.ok) return kept(core, b.reason)
  const bp = b.value.params
  const bType = ctx.type(core.inputs[1])
  if (!bType) return kept(core, "B's type is unknown")
  const nAxis = gemm && g.transB ? 0 : bType.shape.length - 1
  const N = bType.shape[nAxis]
  if (!perTensor(bp) && (bType.shape.length !== 2 || bp.axis !== nAxis || bp.scale.data.length !== N)) return kept(core, `B's scale is per axis ${bp.axis}, not per column of a 2-D B`)
  const consts = constantsFor(ctx, core.name)
  const nodes: Node[] = []
  const transpose = (v: string, what: string) => {
    const t = ctx.fresh(`${v}_t`)
    nodes.push(mk(ctx, `${core.name}_${what}`, "Transpose", [v], [t], { perm: attr.ints([1, 0]) }))
    return t
  }
  const aq = g.transA ? transpose(a.value.node.inputs[0], "a") : a.value.node.inputs[0]
  const bq = g.transB ? transpose(b.value.node.inputs[0], "b") : b.value.node.inputs[0]
  const ap = a.value.params
  const sa = ap.scale.data[0] as number
  const sb = (c: number) => bp.scale.data[perTensor(bp) ? 0 : c] as number
  const bScale = perTensor(bp) ? scalarScale(bp) : fromArray("float32", [N as number], bp.scale.data as Float32Array)
  const bZp = perTensor(bp) ? scalarZp(bp) : fromArray(bp.dtype, [N as number], bp.zp.data as ArrayLike<number>)
  const out = clamp ? ctx.fresh(`${q.outputs[0]}_unclamped`) : q.outputs[0]
  if (!gemm || !core.inputs[2]) {
    nodes.push(mk(ctx, core.name, "QLinearMatMul", [
      aq, consts.add("a_scale", scalarScale(ap)), consts.add("a_zero_point", scalarZp(ap)),
      bq, consts.add("b_scale", bScale), consts.add("b_zero_point", bZp),
      consts.add("y_scale", scalarScale(y)), consts.add("y_zero_point", scalarZp(y)),
    ], [out]))
  } else {
    if (typeof N !== "number") return kept(core, "Gemm's N is not static")
    const bias = biasOf(ctx, core.inputs[2], (c) => sa * sb(c), N)
    if (!bias.ok) return kept(core, bias.reason)
    if (!perTensor(bp) && ctx.opset < 13) return kept(core, `opset ${ctx.opset}: a per-column requantizing QuantizeLinear needs opset 13`)
    // int32 sums, the int32 bias, then x / (y_scale / (a_scale·b_scale)) rounded by QuantizeLinear
    const acc = ctx.fresh(`${core.outputs[0]}_acc`)
    const sum = ctx.fresh(`${core.outputs[0]}_biased`)
    const f = Math.fround
    const ys = y.scale.data[0] as number
    const requant = perTensor(bp) ? fromArray("float32", [], [f(ys / f(sa * sb(0)))]) : fromArray("float32", [N], Array.from({ length: N }, (_, c) => f(ys / f(sa * sb(c)))))
    const yzp = perTensor(bp) ? scalarZp(y) : fromArray(y.dtype, [N], new Array<number>(N).fill(y.zp.data[0] as number))
    nodes.push(
      mk(ctx, core.name, "MatMulInteger", [aq, bq, consts.add("a_zero_point", scalarZp(ap)), consts.add("b_zero_point", bZp)], [acc]),
      mk(ctx, core.name, "Add", [acc, bias.value], [sum]),
      mk(ctx, core.name, "QuantizeLinear", [sum, consts.add("requant_scale", requant), consts.add("y_zero_point", yzp)], [out], perTensor(bp) ? {} : { axis: attr.int(1) }),
    )
  }
  nodes.push(...clampNodes(ctx, core.name, consts, clamp, y, out, q.outputs[0]))
  return {
    decision: { node: core.name, op: core.op, outcome: "integer", detail: nodes.map((n) => n.op).join(" → ") + (act ? ` (${act.op} ${act.name} folded)` : "") },
    replacement: { nodes, outputs: q.outputs, constants: consts.map },
  }
}

/** DQ → op → Q with one scale and zero point ⇒ the op on the 8-bit tensor. */
const int8Op = (q: Node, y: QParams, p: Node, ctx: RuleCtx): Found => {
  const data = p.op === "Concat" ? p.inputs.map((_, k) => k) : [0]
  const sources: string[] = []
  for (const k of data) {
    const d = dqParams(ctx, p.inputs[k], `input ${k}`)
    if (!d.ok) return kept(p, d.reason)
    if (!sameParams(d.value.params, y)) return kept(p, `input ${k}'s scale and zero point differ from the output's (a requantization, not a move)`)
    sources.push(d.value.node.inputs[0])
  }
  const consts = constantsFor(ctx, p.name)
  const inputs = p.inputs.map((v, k) => (data.includes(k) ? sources[data.indexOf(k)] : v))
  let node: Node
  if (p.op === "Relu" || p.op === "Clip") {
    const clamp = clampOf(p, ctx, y)
    if (!clamp.ok) return kept(p, clamp.reason)
    const nodes = clampNodes(ctx, p.name, consts, clamp.value, y, sources[0], q.outputs[0])
    // (a clamp the type already holds is the identity: the 8-bit input is the output)
    return {
      decision: { node: p.name, op: p.op, outcome: "int8", detail: clamp.value ? "Clip on the 8-bit tensor" : "nothing: the 8-bit range is inside the clamp" },
      replacement: { nodes, outputs: nodes.length ? q.outputs : [sources[0]], constants: consts.map },
    }
  }
  if (p.op === "MaxPool") {
    if (p.outputs.length > 1 && p.outputs[1] !== "") return kept(p, "its Indices output is used")
    if (ctx.opset < 12) return kept(p, `opset ${ctx.opset} has no 8-bit MaxPool (from opset 12)`)
    node = mk(ctx, p.name, p.op, inputs, [q.outputs[0]], p.attrs)
  } else if (p.op === "Pad") {
    if (ctx.opset < 11) return kept(p, `opset ${ctx.opset} has no 8-bit Pad (from opset 11)`)
    const mode = (resolveNode(p).attrs as { mode: string }).mode
    const cv = p.inputs[2] ? ctx.constant(p.inputs[2]) : undefined
    if (p.inputs[2] && (!cv || cv.data[0] !== 0)) return kept(p, "the padding value is not a constant 0 (its quantized value is not the zero point)")
    const padded = [...inputs]
    if (mode === "constant") padded[2] = consts.add("pad_value", scalarZp(y))
    else if (padded.length > 2) padded[2] = ""
    node = mk(ctx, p.name, p.op, padded, [q.outputs[0]], p.attrs)
  } else node = mk(ctx, p.name, p.op, inputs, [q.outputs[0]], p.attrs)
  return { decision: { node: p.name, op: p.op, outcome: "int8", detail: `${p.op} on the 8-bit tensor` }, replacement: { nodes: [node], outputs: q.outputs, constants: consts.map } }
}

/**
 * DQ → Add / Mul / AveragePool / GlobalAveragePool / Sigmoid / LeakyRelu → Q ⇒ the com.microsoft
 * QLinear op: every operand a DequantizeLinear with per-tensor constant params of the output's
 * 8-bit type (onnxruntime's kernels take one type), the op's attributes in the contrib op's range.
 */
const contribOp = (q: Node, y: QParams, p: Node, ctx: RuleCtx, act?: Node): Found => {
  const op = CONTRIB[p.op]
  const data = p.op === "Add" || p.op === "Mul" ? [0, 1] : [0]
  const params: { node: Node; params: QParams }[] = []
  for (const k of data) {
    const d = dqParams(ctx, p.inputs[k], `input ${k}`)
    if (!d.ok) return kept(p, `${d.reason} (for com.microsoft.${op})`)
    if (!perTensor(d.value.params)) return kept(p, `input ${k} is quantized per axis (com.microsoft.${op} takes one scale)`)
    if (d.value.params.dtype !== y.dtype) return kept(p, `input ${k} is ${d.value.params.dtype} and the output ${y.dtype} (com.microsoft.${op} takes one type)`)
    params.push(d.value)
  }
  const consts = constantsFor(ctx, p.name)
  const quantized = (d: { node: Node; params: QParams }, what: string) => [d.node.inputs[0], consts.add(`${what}_scale`, scalarScale(d.params)), consts.add(`${what}_zero_point`, scalarZp(d.params))]
  const out = [consts.add("y_scale", scalarScale(y)), consts.add("y_zero_point", scalarZp(y))]
  let attrs: Node["attrs"] = {}
  if (p.op === "AveragePool") {
    const a = resolveNode(p).attrs as { dilations?: readonly number[] }
    if (a.dilations && a.dilations.some((d) => d !== 1)) return kept(p, `dilations ${a.dilations.join(",")} (com.microsoft.QLinearAveragePool has none)`)
    const { dilations: _, ...rest } = p.attrs
    attrs = rest
  } else if (p.op === "LeakyRelu") attrs = p.attrs
  if ((p.op === "AveragePool" || p.op === "GlobalAveragePool") && (rankOf(ctx, p.inputs[0]) ?? 0) < 3) return kept(p, "its input has rank < 3")
  // a Relu / Clip between the op and its Q: the clamp on the 8-bit output, exact by monotonicity of Q
  const clamp = act ? clampOf(act, ctx, y) : ok(undefined)
  if (!clamp.ok) return kept(p, `${clamp.reason}, so ${act!.op} ${act!.name} cannot be folded into com.microsoft.${op}'s output range`)
  const inputs = data.flatMap((k) => quantized(params[k], ["a", "b"][k])).concat(out)
  const result = clamp.value ? ctx.fresh(`${q.outputs[0]}_unclamped`) : q.outputs[0]
  const nodes = [mk(ctx, p.name, op, inputs, [result], attrs, MICROSOFT_DOMAIN), ...clampNodes(ctx, p.name, consts, clamp.value, y, result, q.outputs[0])]
  const detail = `${MICROSOFT_DOMAIN}.${op}${clamp.value ? " → Clip" : ""}${act ? ` (${act.op} ${act.name} folded)` : ""}`
  return { decision: { node: p.name, op: p.op, outcome: "integer", detail }, replacement: { nodes, outputs: q.outputs, constants: consts.map } }
}

/** What to make of the QuantizeLinear `q` and the float op before it (undefined: no candidate). */
const qdqCase = (q: Node, ctx: RuleCtx): Found | undefined => {
  const p = ctx.producer(q.inputs[0])
  if (!p || p.domain !== "") return undefined
  const before = ctx.producer(p.inputs[0] ?? "")
  const readsDq = (n: Node) => n.inputs.some((v) => ctx.producer(v)?.op === "DequantizeLinear")
  // (a contrib op only where it reads a DequantizeLinear: a float Add → Relu → Q stays as it was)
  const folded = (p.op === "Relu" || p.op === "Clip") && before && before.domain === "" && CLAMPS_INTO.has(before.op) && (INTEGER_OPS.has(before.op) || readsDq(before))
  const core = folded ? before : p
  const act = folded ? p : undefined
  const fromDq = readsDq(core)
  if (!INTEGER_OPS.has(core.op) && !INT8_OPS.has(core.op) && !isContrib(core.op)) return fromDq ? kept(core, `no integer form of ${core.op}`) : undefined
  if (isContrib(core.op) && !fromDq) return undefined
  const rank = rankOf(ctx, q.inputs[0])
  if (rank === undefined) return kept(core, "the rank of its output is unknown")
  const y = quantParams(q, ctx, rank)
  if (!y.ok) return kept(core, y.reason)
  if (!perTensor(y.value)) return kept(core, "the output is quantized per axis")
  if (!onlyReader(ctx, q.inputs[0], q)) return kept(core, `its float output ${q.inputs[0]} has readers besides ${q.name}`)
  if (act && !onlyReader(ctx, core.outputs[0], act)) return kept(core, `its float output ${core.outputs[0]} has readers besides ${act.name}`)
  if (isContrib(core.op)) return contribOp(q, y.value, core, ctx, act)
  if (!INTEGER_OPS.has(core.op)) return int8Op(q, y.value, core, ctx)
  const clamp = act ? clampOf(act, ctx, y.value) : ok(undefined)
  if (!clamp.ok) return kept(core, clamp.reason)
  const anchor = { q, y: y.value, core, act }
  return core.op === "Conv" ? convToInteger(anchor, ctx, clamp.value) : matmulToInteger(anchor, ctx, clamp.value)
}

/** QuantizeLinear of constants ⇒ the constant (its reference kernel). */
const foldQuantize = (q: Node, ctx: RuleCtx): Found | undefined => {
  const ins = q.inputs.map((v) => (v === "" ? undefined : ctx.constant(v)))
  if (ins.some((t, k) => !t && q.inputs[k] !== "")) return undefined
  const { def, attrs } = resolveNode(q)
  const [t] = def.kernel({ node: q.name, attrs, opset: ctx.opset, inputs: ins, outputs: 1, runSubgraph: () => [] })
  const name = ctx.fresh(`${q.outputs[0]}_const`)
  return { decision: { node: q.name, op: q.op, outcome: "folded", detail: "a constant" }, replacement: { nodes: [], outputs: [name], constants: new Map([[name, t]]) } }
}

/** The pass's rules, each reporting its decisions to `log`. */
const qdqRules = (log: Map<string, QdqDecision>): Rule[] => {
  const logged = (f: Found | undefined) => {
    if (f) log.set(f.decision.node, f.decision)
    return f?.replacement
  }
  return [
    { name: "fold-quantize-constant", apply: (n, ctx) => (n.op === "QuantizeLinear" && n.domain === "" ? logged(foldQuantize(n, ctx)) : undefined) },
    { name: "qdq-to-integer", apply: (n, ctx) => (n.op === "QuantizeLinear" && n.domain === "" ? logged(qdqCase(n, ctx)) : undefined) },
  ]
}

/** The rewritten graph and, per float op met, what became of it. */
export const qdqToIntegerWithReport = (graph: Graph): { readonly graph: Graph; readonly report: readonly QdqDecision[] } => {
  const log = new Map<string, QdqDecision>()
  // (both rules start at an ONNX QuantizeLinear: a graph without one is left as it is, unbound —
  // the fixed point's first step, a bind of the whole graph, cost DenseNet-121's light model a
  // tenth of its compile, its 836 ConstantOfShape weights evaluated once more)
  const quantizes = graph.nodes.some((n) => n.op === "QuantizeLinear" && n.domain === "")
  const rewritten = quantizes ? rewriteToFixedPoint(graph, qdqRules(log), 4) : undefined
  const out = !rewritten || (rewritten.stop === "Saturated" && rewritten.fired.size === 0) ? graph : eliminateDeadCodeSync(rewritten.graph)
  // a Conv, MatMul or Gemm never met: its output is not quantized
  for (const n of out.nodes)
    if (INTEGER_OPS.has(n.op) && n.domain === "" && !log.has(n.name)) {
      const readers = out.nodes.filter((m) => m.inputs.includes(n.outputs[0])).map((m) => m.op)
      log.set(n.name, { node: n.name, op: n.op, outcome: "kept", detail: `its output is not quantized (read by ${readers.join(", ") || "the graph's outputs"})` })
    }
  return { graph: out, report: [...log.values()] }
}

export const qdqToIntegerSync = (graph: Graph): Graph => qdqToIntegerWithReport(graph).graph

/** The report as text, one line per node. */
export const qdqReportText = (report: readonly QdqDecision[]): string =>
  report.map((d) => `${d.outcome.padEnd(7)} ${d.op} ${d.node}: ${d.detail}`).join("\n")

/** On at opt level 2, as onnxruntime's QDQ transformer is at its level 2 (on by default). */
export const qdqToInteger = graphPass("rewrite.QdqToInteger", 2, qdqToIntegerSync)
