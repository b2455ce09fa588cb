// Hand-built QOperator models (onnxruntime's com.microsoft quantized ops), one op each, int8 and
// uint8, with seeded inputs; and the helper that runs an encoded model in onnxruntime-node.
import * as ort from "onnxruntime-node"
import { attr } from "../../src/ast/graph/attrs.js"
import type { DType } from "../../src/ast/graph/dtype.js"
import { makeGraph, node, type Graph } from "../../src/ast/graph/graph.js"
import { MICROSOFT_DOMAIN } from "../../src/ast/graph/ops/index.js"
import { fromArray, scalar, sizeOf, type Tensor } from "../../src/ast/graph/tensor.js"

export type Q8 = "int8" | "uint8"
export const Q8S: readonly Q8[] = ["int8", "uint8"]

/** A seeded generator (mulberry32). */
export const rng = (seed: number) => {
  let a = seed >>> 0
  return (): number => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export const range8 = (d: Q8): [number, number] => (d === "int8" ? [-128, 127] : [0, 255])

/** Uniform 8-bit values of `dtype` over the whole range. */
export const randQ = (r: () => number, dtype: Q8, shape: readonly number[]): Tensor => {
  const [lo, hi] = range8(dtype)
  return fromArray(dtype, shape, Array.from({ length: sizeOf(shape) }, () => lo + Math.floor(r() * (hi - lo + 1))))
}

const f32 = Math.fround
/** A scale in [lo, hi), float32. */
export const randScale = (r: () => number, lo = 0.002, hi = 0.2): number => f32(lo + r() * (hi - lo))
export const randZp = (r: () => number, dtype: Q8): number => {
  const [lo, hi] = range8(dtype)
  return lo + 40 + Math.floor(r() * (hi - lo - 80))
}

export interface Case {
  readonly name: string
  readonly graph: Graph
  readonly feeds: ReadonlyMap<string, Tensor>
}

const ms = (op: string, inputs: readonly string[], outputs: readonly string[], attrs = {}) => node(op, inputs, outputs, attrs, outputs[0], MICROSOFT_DOMAIN)

/** The per-tensor params of a quantized value as initializers: `${p}_s` and `${p}_z`. */
const params = (init: Map<string, Tensor>, p: string, dtype: Q8, s: number, z: number) => {
  init.set(`${p}_s`, scalar("float32", s))
  init.set(`${p}_z`, scalar(dtype, z))
}

const graphOf = (name: string, ins: { name: string; t: Tensor }[], out: { dtype: DType; shape: number[] }, init: Map<string, Tensor>, nodes: ReturnType<typeof node>[]): Case => ({
  name,
  graph: makeGraph({
    name,
    opset: 13,
    inputs: ins.map((i) => ({ name: i.name, type: { dtype: i.t.dtype, shape: [...i.t.shape] } })),
    outputs: [{ name: "y", type: { dtype: out.dtype, shape: out.shape } }],
    initializers: init,
    nodes,
  }),
  feeds: new Map(ins.map((i) => [i.name, i.t])),
})

/** The op cases for one seed and dtype. */
export const contribCases = (dtype: Q8, seed: number): Case[] => {
  const r = rng(seed)
  const cases: Case[] = []
  for (const op of ["QLinearAdd", "QLinearMul"]) {
    for (const [sa, sb] of [[[2, 3, 4, 5], [2, 3, 4, 5]], [[2, 3, 4, 5], [3, 1, 5]], [[4, 1], [1, 7]]] as const) {
      const init = new Map<string, Tensor>()
      const [sa0, sb0] = [randScale(r), randScale(r)]
      params(init, "a", dtype, sa0, randZp(r, dtype))
      params(init, "b", dtype, sb0, randZp(r, dtype))
      // C's scale keeps most results inside the type (a product of two shifted values reaches 2^14)
      params(init, "c", dtype, op === "QLinearAdd" ? randScale(r, 0.01, 0.3) : f32(sa0 * sb0 * (20 + r() * 60)), randZp(r, dtype))
      const a = randQ(r, dtype, sa)
      const b = randQ(r, dtype, sb)
      const shape: number[] = sa.length >= sb.length ? [...sa] : [...sb]
      if (sa.length === sb.length) shape.forEach((_, k) => (shape[k] = Math.max(sa[k], sb[k])))
      else shape.splice(shape.length - sb.length, sb.length, ...sb.map((d, k) => Math.max(d, sa[sa.length - sb.length + k])))
      cases.push(graphOf(`${op} ${dtype} [${sa}]·[${sb}]`, [{ name: "a", t: a }, { name: "b", t: b }], { dtype, shape }, init, [
        ms(op, ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["y"]),
      ]))
    }
  }
  for (const [op, attrs] of [["QLinearSigmoid", {}], ["QLinearLeakyRelu", { alpha: attr.float(0.1) }]] as const) {
    const init = new Map<string, Tensor>()
    params(init, "x", dtype, randScale(r, 0.01, 0.1), randZp(r, dtype))
    params(init, "y", dtype, op === "QLinearSigmoid" ? f32(1 / 256) : randScale(r, 0.01, 0.1), op === "QLinearSigmoid" ? range8(dtype)[0] : randZp(r, dtype))
    // every value of the type once, so the whole table is compared
    const [lo] = range8(dtype)
    const x = fromArray(dtype, [4, 64], Array.from({ length: 256 }, (_, k) => lo + k))
    cases.push(graphOf(`${op} ${dtype}`, [{ name: "x", t: x }], { dtype, shape: [4, 64] }, init, [ms(op, ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], attrs)]))
  }
  for (const last of [0, 1]) {
    const init = new Map<string, Tensor>()
    params(init, "x", dtype, randScale(r), randZp(r, dtype))
    params(init, "y", dtype, randScale(r), randZp(r, dtype))
    const shape = last ? [2, 7, 7, 16] : [2, 16, 7, 7]
    const x = randQ(r, dtype, shape)
    cases.push(graphOf(`QLinearGlobalAveragePool ${dtype} channels_last=${last}`, [{ name: "x", t: x }], { dtype, shape: last ? [2, 1, 1, 16] : [2, 16, 1, 1] }, init, [
      ms("QLinearGlobalAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], { channels_last: attr.int(last) }),
    ]))
  }
  for (const [last, k, s, p, cip] of [[0, 3, 2, 1, 0], [0, 2, 2, 0, 0], [1, 3, 1, 1, 1], [0, 3, 1, 1, 1]] as const) {
    const init = new Map<string, Tensor>()
    params(init, "x", dtype, randScale(r), randZp(r, dtype))
    params(init, "y", dtype, randScale(r), randZp(r, dtype))
    const shape = last ? [1, 9, 9, 8] : [1, 8, 9, 9]
    const o = Math.floor((9 + 2 * p - k) / s) + 1
    const x = randQ(r, dtype, shape)
    cases.push(graphOf(`QLinearAveragePool ${dtype} k${k} s${s} p${p} cip${cip} channels_last=${last}`, [{ name: "x", t: x }], { dtype, shape: last ? [1, o, o, 8] : [1, 8, o, o] }, init, [
      ms("QLinearAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], {
        kernel_shape: attr.ints([k, k]), strides: attr.ints([s, s]), pads: attr.ints([p, p, p, p]), count_include_pad: attr.int(cip), channels_last: attr.int(last),
      }),
    ]))
  }
  {
    const init = new Map<string, Tensor>()
    params(init, "y", dtype, randScale(r), randZp(r, dtype))
    params(init, "a", dtype, randScale(r), randZp(r, dtype))
    init.set("b_s", init.get("y_s")!) // one input with the output's params: copied as is
    init.set("b_z", init.get("y_z")!)
    params(init, "c", dtype, randScale(r), randZp(r, dtype))
    const a = randQ(r, dtype, [2, 3, 4])
    const b = randQ(r, dtype, [2, 5, 4])
    const c = randQ(r, dtype, [2, 1, 4])
    cases.push(graphOf(`QLinearConcat ${dtype}`, [{ name: "a", t: a }, { name: "b", t: b }, { name: "c", t: c }], { dtype, shape: [2, 9, 4] }, init, [
      ms("QLinearConcat", ["y_s", "y_z", "a", "a_s", "a_z", "b", "b_s", "b_z", "c", "c_s", "c_z"], ["y"], { axis: attr.int(1) }),
    ]))
  }
  {
    const init = new Map<string, Tensor>()
    params(init, "x", dtype, randScale(r), randZp(r, dtype))
    params(init, "y", dtype, randScale(r), randZp(r, dtype))
    params(init, "z", dtype, randScale(r), randZp(r, dtype))
    const cond = fromArray("bool", [3, 1], [1, 0, 1])
    cases.push(graphOf(`QLinearWhere ${dtype}`, [{ name: "cond", t: cond }, { name: "x", t: randQ(r, dtype, [3, 6]) }, { name: "yy", t: randQ(r, dtype, [6]) }], { dtype, shape: [3, 6] }, init, [
      ms("QLinearWhere", ["cond", "x", "x_s", "x_z", "yy", "y_s", "y_z", "z_s", "z_z"], ["y"]),
    ]))
  }
  for (const [opset, axis, shape] of [[13, -1, [3, 10]], [13, 1, [2, 6, 3]], [11, 1, [2, 3, 4]], [13, -1, [4, 2]]] as const) {
    // y_scale 1/256 and the type's lowest zero point: the tool's fixed output params for Softmax
    const init = new Map<string, Tensor>()
    params(init, "x", dtype, randScale(r, 0.02, 0.2), randZp(r, dtype))
    params(init, "y", dtype, f32(1 / 256), range8(dtype)[0])
    cases.push(graphOf(`QLinearSoftmax ${dtype} opset=${opset} axis=${axis} [${shape}]`, [{ name: "x", t: randQ(r, dtype, shape) }], { dtype, shape: [...shape] }, init, [
      ms("QLinearSoftmax", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], { opset: attr.int(opset), axis: attr.int(axis) }),
    ]))
  }
  for (const [tA, tB, perCol, bias, floatOut] of [[0, 0, 0, 1, 0], [0, 1, 1, 1, 0], [1, 0, 0, 0, 0], [0, 1, 1, 1, 1]] as const) {
    // onnxruntime's QGemm takes uint8 A with int8 or uint8 B, int8 A with int8 B
    const M = 5
    const K = 37
    const N = 6
    const init = new Map<string, Tensor>()
    init.set("a_s", scalar("float32", randScale(r, 0.01, 0.05)))
    init.set("a_z", scalar(dtype, randZp(r, dtype)))
    const bd: Q8 = "int8"
    init.set("b", randQ(r, bd, tB ? [N, K] : [K, N]))
    init.set("b_s", fromArray("float32", perCol ? [N] : [], Array.from({ length: perCol ? N : 1 }, () => randScale(r, 0.002, 0.01))))
    init.set("b_z", fromArray(bd, perCol ? [N] : [], Array.from({ length: perCol ? N : 1 }, () => 0)))
    if (bias) init.set("bias", fromArray("int32", [N], Array.from({ length: N }, () => Math.floor(r() * 4000) - 2000)))
    if (!floatOut) params(init, "y", dtype, randScale(r, 0.02, 0.2), randZp(r, dtype))
    const ins = ["a", "a_s", "a_z", "b", "b_s", "b_z", bias ? "bias" : "", ...(floatOut ? [] : ["y_s", "y_z"])]
    while (ins[ins.length - 1] === "") ins.pop()
    cases.push(graphOf(`QGemm ${dtype} transA=${tA} transB=${tB} perColumn=${perCol} bias=${bias} ${floatOut ? "float" : "quantized"} output`, [{ name: "a", t: randQ(r, dtype, tA ? [K, M] : [M, K]) }], { dtype: floatOut ? "float32" : dtype, shape: [M, N] }, init, [
      ms("QGemm", ins, ["y"], { alpha: attr.float(1), transA: attr.int(tA), transB: attr.int(tB) }),
    ]))
  }
  return cases
}

const ORT_TYPES: Partial<Record<DType, ort.Tensor.Type>> = { int8: "int8", uint8: "uint8", float32: "float32", bool: "bool", int32: "int32" }

/** Runs encoded model bytes in onnxruntime-node (its CPU provider, 1 thread) and returns output `y`'s values. */
export const runOrt = async (bytes: Uint8Array, feeds: ReadonlyMap<string, Tensor>): Promise<number[]> => {
  const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1, interOpNumThreads: 1 })
  try {
    const f: Record<string, ort.Tensor> = {}
    for (const [name, t] of feeds) {
      const type = ORT_TYPES[t.dtype]
      if (!type) throw new Error(`no onnxruntime type for ${t.dtype}`)
      const data = t.dtype === "bool" ? Uint8Array.from(t.data as ArrayLike<number>) : t.data
      f[name] = new ort.Tensor(type, data as never, [...t.shape])
    }
    const out = await session.run(f)
    return Array.from(out.y.data as ArrayLike<number>, Number)
  } finally {
    await session.release()
  }
}
