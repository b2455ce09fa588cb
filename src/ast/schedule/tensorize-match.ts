// Does a stage's loop nest from a leaf axis inwards compute what a tensor intrinsic declares?
// The inner leaf axes must be the intrinsic's axes (data then reduce, same extents, no guards),
// the dtypes the same (the stage's, and of every value and operand read), and the stage's
// expression must equal the intrinsic's with each read's index equal to the
// intrinsic's index (inner leaf vars for the intrinsic's axis vars) plus an offset that only
// depends on the outer loops.
import { c, showExpr, substitute, v, type Expr } from "../te/expr.js"
import type { TensorIntrinsic } from "../te/intrinsic.js"
import { simplify } from "../te/simplify.js"
import type { Stage } from "./stage.js"

/** Root axis values in terms of leaf vars (as lowering derives them), and whether any split leaves a guard. */
export const leafRootValues = (st: Stage): { values: Map<string, Expr>; guarded: boolean } => {
  const values = new Map<string, Expr>(st.leaf.map((a) => [a, v(a)]))
  let guarded = false
  for (let k = st.relations.length - 1; k >= 0; k--) {
    const r = st.relations[k]
    if (r.kind === "split") {
      values.set(r.parent, { kind: "bin", op: "add", a: { kind: "bin", op: "mul", a: values.get(r.outer)!, b: c(r.factor), dtype: "int32" }, b: values.get(r.inner)!, dtype: "int32" })
      if (st.axes.get(r.parent)!.extent % r.factor !== 0) guarded = true
    } else {
      const inner = st.axes.get(r.inner)!.extent
      const f = values.get(r.fused)!
      values.set(r.outer, { kind: "bin", op: "floordiv", a: f, b: c(inner), dtype: "int32" })
      values.set(r.inner, { kind: "bin", op: "floormod", a: f, b: c(inner), dtype: "int32" })
    }
  }
  // (a reduce axis over [min, min + extent) loops from 0, as lowering has it)
  if (st.op.body.kind === "reduce") for (const a of st.op.body.axes) if (a.dom.min !== 0) values.set(a.var.name, { kind: "bin", op: "add", a: values.get(a.var.name)!, b: c(a.dom.min), dtype: "int32" })
  return { values, guarded }
}

/** The regions of a match: per intrinsic input (in its order), the tensor read and its base index; and the output base. */
export interface IntrinsicMatch {
  readonly output: readonly Expr[]
  readonly inputs: readonly { readonly tensor: string; readonly base: readonly Expr[] }[]
}

export const matchIntrinsicRegions = (st: Stage, axis: string, intrin: TensorIntrinsic): IntrinsicMatch | string => {
  const pos = st.leaf.indexOf(axis)
  const inner = st.leaf.slice(pos)
  const ic = intrin.compute
  const iAxes = [...ic.axes.map((a) => ({ name: a.var.name, extent: a.dom.extent, type: "data" })), ...(ic.body.kind === "reduce" ? ic.body.axes.map((a) => ({ name: a.var.name, extent: a.dom.extent, type: "reduce" })) : [])]
  if (inner.length !== iAxes.length) return `the nest has ${inner.length} inner loops, the intrinsic ${iAxes.length}`
  for (let k = 0; k < inner.length; k++) {
    const a = st.axes.get(inner[k])!
    if (a.extent !== iAxes[k].extent || a.type !== iAxes[k].type)
      return `loop ${inner[k]} (${a.type}, ${a.extent}) is not the intrinsic's ${iAxes[k].name} (${iAxes[k].type}, ${iAxes[k].extent})`
  }
  const { values, guarded } = leafRootValues(st)
  if (guarded) return "a split does not divide its axis (the nest would need guards)"
  // the instruction reads and writes its operands as its declared dtypes
  if (st.op.dtype !== ic.dtype) return `the stage computes ${st.op.dtype}, the intrinsic ${ic.dtype}`
  const body = st.op.body
  if ((body.kind === "reduce") !== (ic.body.kind === "reduce")) return "one is a reduction and the other is not"
  if (body.kind === "reduce" && ic.body.kind === "reduce" && body.combiner.name !== ic.body.combiner.name) return `combiner ${body.combiner.name} is not ${ic.body.combiner.name}`
  const src = body.kind === "reduce" ? body.source : body
  const isrc = ic.body.kind === "reduce" ? ic.body.source : ic.body
  // the stage expression in leaf vars; the intrinsic's with its axis vars renamed to the inner leaf vars
  const stageE = substitute(src, values)
  const rename = new Map<string, Expr>(iAxes.map((a, k) => [a.name, v(inner[k])]))
  const intrE = substitute(isrc, rename)
  const zero = new Map<string, Expr>(inner.map((a) => [a, c(0)]))
  // per intrinsic input, the tensor region it is: every read of the input must be of that one region
  const regions = new Map<string, { tensor: string; base: Expr[]; at: string }>()
  const walk = (a: Expr, b: Expr): string | undefined => {
    if (a.dtype !== b.dtype) return `${showExpr(a)} is ${a.dtype}, the intrinsic's ${showExpr(b)} is ${b.dtype}`
    if (a.kind === "read" && b.kind === "read") {
      const prev = regions.get(b.source)
      if (prev && prev.tensor !== a.source) return `${b.source} would be both ${prev.tensor} and ${a.source}`
      // the tensor may have more (leading) dims than the intrinsic's operand: those stay fixed
      const extra = a.indices.length - b.indices.length
      if (extra < 0) return `${a.source} has rank ${a.indices.length}, lower than ${b.source}'s ${b.indices.length}`
      const base: Expr[] = []
      for (let k = 0; k < a.indices.length; k++) {
        const baseK = simplify(substitute(a.indices[k], zero))
        const rel = simplify({ kind: "bin", op: "sub", a: a.indices[k], b: baseK, dtype: "int32" })
        const want = k < extra ? c(0) : simplify(b.indices[k - extra])
        if (showExpr(rel) !== showExpr(want)) return `${a.source} index ${k} is ${showExpr(a.indices[k])}, the intrinsic reads ${b.source} at ${showExpr(want)}`
        base.push(baseK)
      }
      // (one operand of the instruction is one region: two reads of it at two places are two operands)
      const at = base.map(showExpr).join()
      if (prev && prev.at !== at) return `${b.source} would be ${a.source} at both [${prev.at}] and [${at}]`
      regions.set(b.source, { tensor: a.source, base, at })
      return undefined
    }
    if (a.kind !== b.kind) return `${showExpr(a)} is not of the form ${showExpr(b)}`
    // (from here b is of a's kind, and of its dtype)
    switch (a.kind) {
      case "bin": {
        const y = b as typeof a
        if (a.op !== y.op) return `${showExpr(a)} is not ${showExpr(b)}`
        return walk(a.a, y.a) ?? walk(a.b, y.b)
      }
      case "cast":
        return walk(a.value, (b as typeof a).value)
      case "call": {
        const y = b as typeof a
        if (a.fn !== y.fn || a.args.length !== y.args.length) return `${showExpr(a)} is not ${showExpr(b)}`
        for (let k = 0; k < a.args.length; k++) {
          const p = walk(a.args[k], y.args[k])
          if (p) return p
        }
        return undefined
      }
      case "const":
        return a.value === (b as typeof a).value ? undefined : `${showExpr(a)} is not ${showExpr(b)}`
      default:
        return `${showExpr(a)} is not of the form ${showExpr(b)}`
    }
  }
  const problem = walk(stageE, intrE)
  if (problem) return problem
  // the regions in the intrinsic's input order
  const ordered = intrin.inputs.map((p) => regions.get(p.name))
  if (ordered.some((x) => !x)) return "some intrinsic input is not read"
  const output = st.op.axes.map((a) => simplify(substitute(values.get(a.var.name)!, zero)))
  const extraOut = st.op.axes.length - ic.axes.length
  if (extraOut < 0) return `the stage has rank ${st.op.axes.length}, lower than the intrinsic's ${ic.axes.length}`
  for (let d = 0; d < st.op.axes.length; d++) {
    const rel = simplify({ kind: "bin", op: "sub", a: values.get(st.op.axes[d].var.name)!, b: output[d], dtype: "int32" })
    const want = d < extraOut ? c(0) : v(inner[d - extraOut])
    if (showExpr(rel) !== showExpr(want)) return `output dim ${d} moves with ${showExpr(rel)}, the intrinsic's with ${showExpr(want)}`
  }

  return { output, inputs: ordered as { tensor: string; base: Expr[] }[] }
}

/** undefined when the nest matches; otherwise what does not. */
export const matchIntrinsic = (st: Stage, axis: string, intrin: TensorIntrinsic): string | undefined => {
  const m = matchIntrinsicRegions(st, axis, intrin)
  return typeof m === "string" ? m : undefined
}
