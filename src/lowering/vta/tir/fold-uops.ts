// Pass 3, micro-op loop folding (TVM's FoldUopLoop and the micro-op kernel it builds): a loop nest
// around a GEMM or ALU intrinsic becomes ONE instruction — a micro-op kernel and its two loop
// levels. Adjacent loops contiguous in every operand (the outer one's step is the inner one's
// times its constant extent) are first merged; the two outermost loops are then the instruction's
// iter_out / iter_in, their steps in each operand its dst / src / wgt factors (constant, ≥ 0); the
// loops inside them (constant extents) are enumerated into the kernel, one micro-op per iteration,
// in loop order. A loop whose step is not a constant is a VtaTirError.
import { c, type Expr } from "../../../ast/te/expr.js"
import { affineIn, bindVars, constOf, type Affine } from "./affine.js"
import { mapChildren, perfectNest, VtaTirError, type Ref, type VFunc, type VStmt } from "./ir.js"

const fail = (reason: string): never => {
  throw new VtaTirError({ pass: "fold-uops", reason })
}

interface Level {
  readonly vars: readonly string[]
  readonly extents: readonly Expr[]
  readonly extent: Expr
  /** The step of each operand's index. */
  readonly steps: readonly number[]
}

const fold = (loops: readonly { var: string; extent: Expr }[], leaf: VStmt & { kind: "gemm" | "alu" }): VStmt => {
  const operands: (Ref | undefined)[] = leaf.kind === "gemm" ? [leaf.acc, leaf.inp, leaf.wgt] : [leaf.dst, leaf.src]
  const vars = loops.map((l) => l.var)
  const affs: (Affine | undefined)[] = operands.map((r) => (r ? affineIn(r.idx, vars) ?? fail(`the index of ${r.buf} is not affine in the loops around the intrinsic`) : undefined))
  let levels: Level[] = loops.map((l) => ({ vars: [l.var], extents: [l.extent], extent: l.extent, steps: affs.map((a) => a?.coef.get(l.var) ?? 0) }))
  for (let merged = true; merged; ) {
    merged = false
    for (let k = levels.length - 2; k >= 0; k--) {
      const o = levels[k]
      const i = levels[k + 1]
      const n = constOf(i.extent)
      if (n === undefined || !o.steps.every((s, j) => s === i.steps[j] * n)) continue
      levels = [...levels.slice(0, k), { vars: [...o.vars, ...i.vars], extents: [...o.extents, ...i.extents], extent: bindVars({ kind: "bin", op: "mul", a: o.extent, b: c(n), dtype: "int32" }, new Map()), steps: i.steps }, ...levels.slice(k + 2)]
      merged = true
      break
    }
  }
  const one: Level = { vars: [], extents: [], extent: c(1), steps: operands.map(() => 0) }
  const [outer, inner, ...rest] = levels.length >= 2 ? levels : levels.length === 1 ? [one, levels[0]] : [one, one]
  for (const s of [...outer.steps, ...inner.steps]) if (s < 0) fail(`a loop steps an operand by ${s}; the instruction's factors are unsigned`)
  // the kernel: every iteration of the loops inside the two levels, in order
  const innerVars = rest.flatMap((l) => l.vars.map((v, j) => ({ v, extent: constOf(l.extents[j]) ?? fail(`the loop ${v} inside the micro-op kernel has no constant extent`) })))
  const points: Map<string, number>[] = [new Map()]
  for (const { v, extent } of innerVars) {
    const next: Map<string, number>[] = []
    for (const p of points) for (let i = 0; i < extent; i++) next.push(new Map(p).set(v, i))
    points.splice(0, points.length, ...next)
  }
  // the values of merged level variables are recovered from the level's single counter: at 0 all are 0
  const zero = new Map<string, number>([...outer.vars, ...inner.vars].map((v) => [v, 0]))
  const at = (r: Ref | undefined, p: ReadonlyMap<string, number>): Ref | undefined => (r ? { buf: r.buf, idx: bindVars(r.idx, new Map([...zero, ...p])) } : undefined)
  const f = (l: Level, j: number) => l.steps[j] ?? 0
  const loopsOf = { iterOut: outer.extent, iterIn: inner.extent, dstFactor: [f(outer, 0), f(inner, 0)] as const, srcFactor: [f(outer, 1), f(inner, 1)] as const }
  if (leaf.kind === "gemm") {
    return {
      kind: "gemmKernel", reset: leaf.reset, ...loopsOf, wgtFactor: [f(outer, 2), f(inner, 2)],
      uops: points.map((p) => ({ dst: at(leaf.acc, p)!, ...(leaf.inp ? { src: at(leaf.inp, p)! } : {}), ...(leaf.wgt ? { wgt: at(leaf.wgt, p)! } : {}) })),
    }
  }
  return {
    kind: "aluKernel", op: leaf.op, ...(leaf.imm !== undefined ? { imm: leaf.imm } : {}), ...loopsOf,
    uops: points.map((p) => ({ dst: at(leaf.dst, p)!, ...(leaf.src ? { src: at(leaf.src, p)! } : {}) })),
  }
}

export const foldUops = (f: VFunc): VFunc => {
  const rec = (s: VStmt): VStmt => {
    if (s.kind === "gemm" || s.kind === "alu" || (s.kind === "for" && !s.vthread)) {
      const { loops, leaf } = perfectNest(s)
      if (leaf.kind === "gemm" || leaf.kind === "alu") return fold(loops, leaf)
    }
    return mapChildren(s, rec)
  }
  return { ...f, body: rec(f.body) }
}
