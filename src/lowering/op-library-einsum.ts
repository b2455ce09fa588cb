// Einsum as one compute: output labels are the data axes, labels summed away are reduce axes,
// each operand read through its labels (a repeated label reads a diagonal; a size-1 dim under a
// larger label broadcasts). The equation is parsed as the reference (nn-einsum.ts) does.
import { c, mul, type Expr } from "../ast/te/expr.js"
import { at, compute, reduceAxis, sum } from "../ast/te/tensor.js"
import { none, shapeOf, type OpCompute } from "./op-library-common.js"

const ELL = "…"

const termLabels = (term: string, rank: number | undefined, width: number): string[] => {
  const parts = term.split("...")
  if (parts.length > 2 || parts.some((p) => !/^[A-Za-z]*$/.test(p))) return none(`Einsum term '${term}'`)
  if (parts.length === 1) return [...term]
  const e = rank === undefined ? width : rank - (parts[0].length + parts[1].length)
  if (e < 0) return none(`Einsum term '${term}'`)
  return [...parts[0], ...Array.from({ length: e }, (_, i) => `${ELL}${width - e + i}`), ...parts[1]]
}

const parse = (equation: string, ranks: readonly number[]): { inputs: string[][]; output: string[] } => {
  const [lhs, rhs, extra] = equation.replace(/\s+/g, "").split("->")
  const terms = lhs.split(",")
  if (extra !== undefined || terms.length !== ranks.length) return none(`Einsum equation '${equation}'`)
  const width = Math.max(0, ...terms.map((t, i) => (t.includes("...") ? ranks[i] - (t.length - 3) : 0)))
  const inputs = terms.map((t, i) => termLabels(t, ranks[i], width))
  if (inputs.some((ls, i) => ls.length !== ranks[i])) return none(`Einsum equation '${equation}'`)
  if (rhs !== undefined) return { inputs, output: termLabels(rhs, undefined, width) }
  const counts = new Map<string, number>()
  for (const ls of inputs) for (const l of ls) if (!l.startsWith(ELL)) counts.set(l, (counts.get(l) ?? 0) + 1)
  const once = [...counts].filter(([, n]) => n === 1).map(([l]) => l).sort()
  return { inputs, output: [...Array.from({ length: width }, (_, i) => `${ELL}${i}`), ...once] }
}

export const einsum: OpCompute = (ctx) => {
  const xs = ctx.inputs.map((t, k) => t ?? none(`input ${k} is missing`))
  const eq = parse((ctx.attrs.equation as string | undefined) ?? "", xs.map((t) => t.shape.length))
  const sizes = new Map<string, number>()
  eq.inputs.forEach((ls, i) => ls.forEach((l, d) => sizes.set(l, Math.max(sizes.get(l) ?? 1, xs[i].shape[d]))))
  const summed = [...sizes.keys()].filter((l) => !eq.output.includes(l))
  const rs = summed.map((l, k) => reduceAxis(sizes.get(l)!, `${ctx.name()}.s${k}`))
  const dtype = ctx.outputs[0].dtype
  return [
    compute(ctx.name(), shapeOf(ctx.outputs[0]), (...o) => {
      const env = new Map<string, Expr>([...eq.output.map((l, k) => [l, o[k]] as const), ...summed.map((l, k) => [l, rs[k].var] as const)])
      const reads = xs.map((t, i) => at(t, ...eq.inputs[i].map((l, d) => (t.shape[d] === 1 && sizes.get(l)! > 1 ? c(0) : env.get(l)!))))
      const body = reads.length === 1 ? reads[0] : reads.slice(1).reduce<Expr>((a, b) => mul(a, b), reads[0])
      return rs.length ? sum(body, rs) : body
    }, dtype),
  ]
}
