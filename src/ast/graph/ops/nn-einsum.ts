// Einsum. Two-operand contractions run as a batched MatMul between transposes; everything else
// (one or three+ operands, diagonals, broadcasting, labels summed within one operand) as a generic
// loop over every label: each input is read through one stride per label (a repeated label adds
// its strides: a diagonal; a broadcast ellipsis dim of size 1 has stride 0); output labels are the
// outer loops, summed labels the inner ones.
import { A, attrs } from "../attrs.js"
import { allocate, converter, isFloat, type DType } from "../dtype.js"
import { check, defineOp, fail, type AnyOpDef, type Dim } from "../op.js"
import { reshapeView, stridesOf, tensor, type Tensor } from "../tensor.js"
import { arity, broadcastDims, req } from "./util.js"
import { matmul } from "./nn-matmul.js"
import { transpose } from "./tensor-common.js"

/** A parsed equation: labels per input and of the output; ellipsis dims are labels "…0", "…1"... */
interface Equation {
  readonly inputs: readonly (readonly string[])[]
  readonly output: readonly string[]
}

const ELL = "…"

/** Labels of one term, its ellipsis expanded to the trailing `rank - letters` of `width` ellipsis labels. */
const termLabels = (term: string, rank: number | undefined, width: number): string[] => {
  const parts = term.split("...")
  check(parts.length <= 2, () => `term '${term}' has more than one ellipsis`)
  for (const p of parts) check(/^[A-Za-z]*$/.test(p), () => `term '${term}' has a character that is not a letter`)
  if (parts.length === 1) return [...term]
  const letters = parts[0].length + parts[1].length
  const e = rank === undefined ? width : rank - letters
  check(e >= 0, () => `term '${term}' has more labels than its input's rank ${rank}`)
  const ell = Array.from({ length: e }, (_, i) => `${ELL}${width - e + i}`)
  return [...parts[0], ...ell, ...parts[1]]
}

const parse = (equation: string, ranks: readonly number[]): Equation => {
  const eq = equation.replace(/\s+/g, "")
  const [lhs, rhs, extra] = eq.split("->")
  check(extra === undefined, () => `equation '${equation}' has more than one '->'`)
  const terms = lhs.split(",")
  check(terms.length === ranks.length, () => `equation '${equation}' has ${terms.length} terms for ${ranks.length} inputs`)
  const width = Math.max(0, ...terms.map((t, i) => (t.includes("...") ? ranks[i] - (t.length - 3) : 0)))
  const inputs = terms.map((t, i) => {
    const ls = termLabels(t, ranks[i], width)
    check(ls.length === ranks[i], () => `term '${t}' has ${ls.length} labels for an input of rank ${ranks[i]}`)
    return ls
  })
  let output: string[]
  if (rhs !== undefined) {
    output = termLabels(rhs, undefined, width)
    check(new Set(output).size === output.length, () => `output '${rhs}' repeats a label`)
    for (const l of output) check(inputs.some((ls) => ls.includes(l)), () => `output label '${l}' is not in any input`)
  } else {
    const counts = new Map<string, number>()
    for (const ls of inputs) for (const l of ls) if (!l.startsWith(ELL)) counts.set(l, (counts.get(l) ?? 0) + 1)
    const once = [...counts].filter(([, c]) => c === 1).map(([l]) => l).sort()
    output = [...Array.from({ length: width }, (_, i) => `${ELL}${i}`), ...once]
  }
  return { inputs, output }
}

/** Size of every label, broadcasting size-1 dims. */
const labelSizes = <D extends Dim>(eq: Equation, shapes: readonly (readonly D[])[]): Map<string, Dim> => {
  const sizes = new Map<string, Dim>()
  eq.inputs.forEach((ls, i) =>
    ls.forEach((l, d) => {
      const s = shapes[i][d]
      const prev = sizes.get(l)
      sizes.set(l, prev === undefined ? s : broadcastDims([prev], [s])[0])
    }),
  )
  return sizes
}

/**
 * Two operands without repeated labels and without broadcasting, whose every label is a batch
 * (both inputs and output), row (A and output), column (B and output) or contracted (A and B)
 * label: a batched MatMul between transposes.
 */
const asMatmul = (eq: Equation, ts: readonly Tensor[], sizes: ReadonlyMap<string, number>): Tensor | undefined => {
  if (ts.length !== 2) return undefined
  const [la, lb] = eq.inputs
  const out = eq.output
  if (new Set(la).size !== la.length || new Set(lb).size !== lb.length) return undefined
  if (!ts.every((t, i) => eq.inputs[i].every((l, d) => t.shape[d] === sizes.get(l)))) return undefined
  if (la.some((l) => !out.includes(l) && !lb.includes(l)) || lb.some((l) => !out.includes(l) && !la.includes(l))) return undefined
  const batch = out.filter((l) => la.includes(l) && lb.includes(l))
  const rows = out.filter((l) => la.includes(l) && !lb.includes(l))
  const cols = out.filter((l) => lb.includes(l) && !la.includes(l))
  const red = la.filter((l) => lb.includes(l) && !out.includes(l))
  const size = (ls: readonly string[]) => ls.reduce((p, l) => p * sizes.get(l)!, 1)
  const a = transpose(ts[0], [...batch, ...rows, ...red].map((l) => la.indexOf(l)))
  const b = transpose(ts[1], [...batch, ...red, ...cols].map((l) => lb.indexOf(l)))
  const y = matmul(reshapeView(a, [size(batch), size(rows), size(red)]), reshapeView(b, [size(batch), size(red), size(cols)]))
  const yl = [...batch, ...rows, ...cols]
  return transpose(reshapeView(y, yl.map((l) => sizes.get(l)!)), out.map((l) => yl.indexOf(l)))
}

const Einsum = defineOp({
  attrs: attrs({ equation: A.str() }),
  inputs: arity.variadic,
  outputs: arity.one,
  kind: "opaque",
  infer: (ctx) => {
    const types = ctx.inputs.map((t, i) => t ?? fail(`input ${i} is required`))
    const dtype = types[0].dtype
    check(types.every((t) => t.dtype === dtype), "Einsum inputs must share one type")
    const eq = parse(ctx.attrs.equation, types.map((t) => t.shape.length))
    const sizes = labelSizes(eq, types.map((t) => t.shape))
    return [{ dtype, shape: eq.output.map((l) => sizes.get(l)!) }]
  },
  kernel: ({ inputs, attrs: a }) => {
    const ts = inputs.map((_, i) => req(inputs, i, `input ${i}`))
    const dtype: DType = ts[0].dtype
    check(ts.every((t) => t.dtype === dtype), "Einsum inputs must share one type")
    const eq = parse(a.equation, ts.map((t) => t.shape.length))
    const sizes = labelSizes(eq, ts.map((t) => t.shape)) as Map<string, number>
    const product = asMatmul(eq, ts, sizes)
    if (product) return [product]
    const summed = [...sizes.keys()].filter((l) => !eq.output.includes(l))
    const loops = [...eq.output, ...summed]
    const dims = loops.map((l) => sizes.get(l)!)
    // stride of each input along each loop label (0 where absent or broadcast)
    const strides = ts.map((t, i) => {
      const st = stridesOf(t.shape)
      return loops.map((l) => eq.inputs[i].reduce((s, li, d) => (li === l && t.shape[d] !== 1 ? s + st[d] : s), 0))
    })
    const outSize = eq.output.reduce((p, l) => p * sizes.get(l)!, 1)
    const inner = summed.reduce((p, l) => p * sizes.get(l)!, 1)
    const nOut = eq.output.length
    const nIn = ts.length
    const datas = ts.map((t) => t.data as ArrayLike<number>)
    const y = new Float64Array(outSize)
    const counter = new Array<number>(loops.length).fill(0)
    const offs = new Array<number>(nIn).fill(0)
    if (inner > 0)
      for (let o = 0; o < outSize; o++) {
        let acc = 0
        for (let s = 0; s < inner; s++) {
          let v = 1
          for (let i = 0; i < nIn; i++) v *= datas[i][offs[i]]
          acc += v
          // advance the summed labels (innermost last)
          for (let d = loops.length - 1; d >= nOut; d--) {
            counter[d]++
            for (let i = 0; i < nIn; i++) offs[i] += strides[i][d]
            if (counter[d] < dims[d]) break
            for (let i = 0; i < nIn; i++) offs[i] -= strides[i][d] * counter[d]
            counter[d] = 0
          }
        }
        y[o] = acc
        for (let d = nOut - 1; d >= 0; d--) {
          counter[d]++
          for (let i = 0; i < nIn; i++) offs[i] += strides[i][d]
          if (counter[d] < dims[d]) break
          for (let i = 0; i < nIn; i++) offs[i] -= strides[i][d] * counter[d]
          counter[d] = 0
        }
      }
    const out = allocate(dtype, outSize)
    const conv = isFloat(dtype) ? (x: number) => x : converter(dtype)
    for (let i = 0; i < outSize; i++) out[i] = conv(y[i])
    return [tensor(dtype, eq.output.map((l) => sizes.get(l)!), out)]
  },
})

export const einsumOps = { Einsum } satisfies Record<string, AnyOpDef>
