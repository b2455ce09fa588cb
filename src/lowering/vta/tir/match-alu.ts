// Pass 2, ALU intrinsic matching (TVM's VTA ALU marking and its InjectALUIntrin): an elementwise
// statement on an accumulator element — acc[i] = e — becomes the sequence of VTA ALU operations
// that computes e in place, each a pass over the same loop nest: e is peeled from the outside in
// down to a read of acc[i] itself, each layer one two-operand op whose other operand is an
// immediate (16-bit signed) or another accumulator-scope element:
//   min(e, k) → MIN k     max(e, k) → MAX k     e + k → ADD k     e + b[j] → ADD b[j]
//   floordiv(e, 2^s) → SHR s (an arithmetic shift is a floor division by a power of two); none for
//   s = 0, and s > 15 as several SHRs of at most 15 (shrStepsOf: one SHR's amount is a signed 5-bit
//   operand, 16..31 would shift left)
// The loops are elementwise (no element reads another's result), so one pass per op over the nest
// computes the same values. Anything else is a VtaTirError naming the expression.
import { showExpr, type Expr } from "../../../ast/te/expr.js"
import type { VtaAluOp } from "../../../ast/vta/isa.js"
import { shrStepsOf } from "../conv2d-layer.js"
import { sameValue } from "./affine.js"
import { mapChildren, perfectNest, vseq, VtaTirError, type Ref, type VFunc, type VStmt } from "./ir.js"

type Op = { readonly op: VtaAluOp; readonly imm?: number; readonly src?: Ref }

const fail = (reason: string): never => {
  throw new VtaTirError({ pass: "match-alu", reason })
}

const isDst = (e: Expr, dst: Ref): boolean => e.kind === "read" && e.source === dst.buf && e.indices.length === 1 && sameValue(e.indices[0], dst.idx)
const mentionsDst = (e: Expr, dst: Ref): boolean => {
  if (isDst(e, dst)) return true
  if (e.kind === "bin") return mentionsDst(e.a, dst) || mentionsDst(e.b, dst)
  return e.kind === "cast" ? mentionsDst(e.value, dst) : false
}
const imm16 = (e: Expr): number | undefined => (e.kind === "const" && Number.isInteger(e.value) && e.value >= -32768 && e.value <= 32767 ? e.value : undefined)

/** The ALU ops, innermost first, that turn acc[dst] into e. */
const opsOf = (e: Expr, dst: Ref): Op[] => {
  if (isDst(e, dst)) return []
  if (e.kind === "cast" && e.dtype === "int32") return opsOf(e.value, dst)
  if (e.kind === "bin") {
    if (e.op === "floordiv") {
      const k = e.b.kind === "const" ? Math.log2(e.b.value) : NaN
      if (Number.isInteger(k) && k >= 0 && k < 32) return [...opsOf(e.a, dst), ...shrStepsOf(k).map((imm): Op => ({ op: "SHR", imm }))]
      return fail(`${showExpr(e)}: a floor division by other than a power of two`)
    }
    if (e.op === "min" || e.op === "max" || e.op === "add") {
      const [chain, other] = mentionsDst(e.a, dst) ? [e.a, e.b] : [e.b, e.a]
      const op: VtaAluOp = e.op === "min" ? "MIN" : e.op === "max" ? "MAX" : "ADD"
      const k = imm16(other)
      if (k !== undefined) return [...opsOf(chain, dst), { op, imm: k }]
      if (other.kind === "read" && other.indices.length === 1 && !mentionsDst(other, dst)) return [...opsOf(chain, dst), { op, src: { buf: other.source, idx: other.indices[0] } }]
      return fail(`${showExpr(e)}: the second operand is neither a 16-bit immediate nor an accumulator element`)
    }
  }
  return fail(`${showExpr(e)} is not an ALU operation on ${dst.buf}`)
}

export const matchAlu = (f: VFunc): VFunc => {
  const rec = (s: VStmt): VStmt => {
    if (s.kind === "ew" || (s.kind === "for" && !s.vthread)) {
      const { loops, leaf } = perfectNest(s)
      if (leaf.kind === "ew") {
        const ops = opsOf(leaf.value, leaf.dst)
        return vseq(ops.map((o) => loops.reduceRight<VStmt>((body, l) => ({ kind: "for", var: l.var, extent: l.extent, body }), { kind: "alu", op: o.op, dst: leaf.dst, ...(o.imm !== undefined ? { imm: o.imm } : { src: o.src! }) })))
      }
    }
    return mapChildren(s, rec)
  }
  return { ...f, body: rec(f.body) }
}
