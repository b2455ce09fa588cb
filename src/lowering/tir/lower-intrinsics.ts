// lowering.LowerIntrinsics: an intrinsic statement becomes the loop nest its TE declaration
// describes, over the regions it covers (for targets without the instruction, and to check a
// tensorized program loop by loop).
//
// Opt level 0: the js and wasm emitters have no intrinsics, and the c emitter only its gemm calls.
import { Data } from "effect"
import { add, c, mapExpr, mul, substitute, v, type Expr } from "../../ast/te/expr.js"
import { simplify } from "../../ast/te/simplify.js"
import { mapStmt, type PrimFunc, type Region, type Stmt } from "../../ast/tir/tir.js"
import { tryTyped } from "../../rewrite/pass.js"
import type { TirPass } from "./tir-pass.js"

/** An intrinsic whose declaration cannot be lowered as it is applied (a reduction stored, not updated). */
export class IntrinsicModeError extends Data.TaggedError("IntrinsicModeError")<{ readonly intrinsic: string; readonly reason: string }> {
  override get message(): string {
    return `intrinsic ${this.intrinsic}: ${this.reason}`
  }
}

const lowerOne = (x: Stmt & { kind: "intrinsic" }): Stmt => {
  const ic = x.intrin.compute
  const body = ic.body
  const vars = ic.axes.map((_, k) => v(`${x.output.buffer}.t${k}`))
  const env = new Map<string, Expr>(ic.axes.map((a, k) => [a.var.name, vars[k]]))
  // an operand of lower rank than its buffer covers the buffer's trailing dims
  const at = (r: Region, idx: readonly Expr[]): Expr[] => {
    if (r.strides) {
      const st = r.strides.slice(r.strides.length - idx.length)
      return [simplify(idx.reduce<Expr>((acc, e, k) => add(acc, mul(e, c(st[k]))), r.base[0]))]
    }
    const extra = r.base.length - idx.length
    return r.base.map((b, k) => (k < extra ? b : simplify(add(b, idx[k - extra]))))
  }
  const mapReads = (e: Expr): Expr =>
    mapExpr(e, (y) => {
      if (y.kind !== "read") return undefined
      const k = x.intrin.inputs.findIndex((p) => p.name === y.source)
      return k < 0 ? undefined : { kind: "read", source: x.inputs[k].buffer, indices: at(x.inputs[k], y.indices.map(mapReads)), dtype: y.dtype }
    })
  const outIdx = at(x.output, vars)
  const outRead: Expr = { kind: "read", source: x.output.buffer, indices: outIdx, dtype: ic.dtype }
  let inner: Stmt
  if (body.kind === "reduce") {
    if (x.intrin.mode === "store") throw new IntrinsicModeError({ intrinsic: x.intrin.name, reason: "a reduction must be an update" })
    const rvars = body.axes.map((_, k) => v(`${x.output.buffer}.r${k}`))
    const renv = new Map<string, Expr>([...env, ...body.axes.map((a, k) => [a.var.name, rvars[k]] as const)])
    const src = mapReads(substitute(body.source, renv))
    const value = substitute(body.combiner.result, new Map([[body.combiner.lhs.name, outRead], [body.combiner.rhs.name, src]]))
    inner = body.axes.reduceRight<Stmt>((acc, a, k) => ({ kind: "for", var: rvars[k], min: c(a.dom.min), extent: c(a.dom.extent), forKind: "serial", body: acc }), {
      kind: "store",
      buffer: x.output.buffer,
      indices: outIdx,
      value,
    })
  } else inner = { kind: "store", buffer: x.output.buffer, indices: outIdx, value: mapReads(substitute(body, env)) }
  return ic.axes.reduceRight<Stmt>((acc, a, k) => ({ kind: "for", var: vars[k], min: c(0), extent: c(a.dom.extent), forKind: "serial", body: acc }), inner)
}

const lower = (f: PrimFunc, keep: ReadonlySet<string>): PrimFunc => ({ ...f, body: mapStmt(f.body, (x) => (x.kind === "intrinsic" && !keep.has(x.intrin.name) ? lowerOne(x) : undefined)) })

export const lowerIntrinsics: TirPass<IntrinsicModeError> = {
  name: "lowering.LowerIntrinsics",
  optLevel: 0,
  run: (f) => tryTyped(() => lower(f, new Set()), (e): e is IntrinsicModeError => e instanceof IntrinsicModeError),
  ensures: { noIntrinsics: true },
}

/**
 * LowerIntrinsics for a target that emits some intrinsics itself (the c target's VNNI dot where
 * its record has the instruction): those named in `keep` stay intrinsic statements, the rest
 * become their loop nests.
 */
export const lowerIntrinsicsExcept = (keep: ReadonlySet<string>): TirPass<IntrinsicModeError> =>
  keep.size === 0
    ? lowerIntrinsics
    : {
        name: "lowering.LowerIntrinsics",
        optLevel: 0,
        run: (f) => tryTyped(() => lower(f, keep), (e): e is IntrinsicModeError => e instanceof IntrinsicModeError),
      }
