// Pass 1, DMA injection (TVM's InjectDMAIntrin for VTA): a loop nest that copies elements between a
// DRAM tensor and an accelerator scope becomes LOAD / STORE statements — a 2-D strided transfer with
// pads — inside the loops the transfer cannot cover.
//
// From the innermost loop outwards, two loops are one when they are contiguous on both sides (the
// outer one's index step is the inner one's times its extent) and neither is guarded. The innermost
// (merged) loop is the transfer's x: unit steps on both sides. The next loop is its y when the SRAM
// side steps by exactly one row (x's full extent, pads included); its DRAM step is the x stride.
// A load's `valid` guard — a conjunction of bounds on the x and y variables, each ±1·var + rest
// compared with 0 — becomes the pads: the rows (columns) before the first valid one and after the
// last, clamped to the extent; the DRAM base is the first valid element. Loops left over stay loops
// around the transfer. A copy that does not fit this shape is a VtaTirError naming what is wrong.
import { add, c, max, min, sub, type Expr } from "../../../ast/te/expr.js"
import { affineIn, bindVars, sameValue } from "./affine.js"
import { isDramTensor, mapChildren, perfectNest, VtaTirError, type Ref, type VFunc, type VStmt } from "./ir.js"

const fail = (reason: string): never => {
  throw new VtaTirError({ pass: "inject-dma", reason })
}

interface Bounds {
  lo: Expr[]
  hi: Expr[]
}

/** The valid guard as lower / upper (exclusive) bounds per loop variable. */
const boundsOf = (valid: Expr | undefined, vars: readonly string[]): Map<string, Bounds> => {
  const out = new Map<string, Bounds>()
  const atoms: Expr[] = []
  const split = (e: Expr): void => {
    if (e.kind === "bin" && e.op === "and") {
      split(e.a)
      split(e.b)
    } else atoms.push(e)
  }
  if (valid) split(valid)
  for (const a of atoms) {
    if (a.kind !== "bin" || !["lt", "le", "gt", "ge"].includes(a.op)) fail(`the guard ${JSON.stringify(a.kind)} is not a bound on a loop variable`)
    const cmp = a as Expr & { kind: "bin" }
    const aff = affineIn(sub(cmp.a, cmp.b), vars)
    const used = aff ? [...aff.coef].filter(([, k]) => k !== 0) : []
    if (!aff || used.length !== 1 || Math.abs(used[0][1]) !== 1) return fail("a guard is not ±1·(one loop variable) + rest compared with 0")
    const [name, k] = used[0]
    const r = aff.rest
    const b = out.get(name) ?? { lo: [], hi: [] }
    const neg = sub(c(0), r)
    if (cmp.op === "lt") (k === 1 ? b.hi : b.lo).push(k === 1 ? neg : add(r, c(1)))
    else if (cmp.op === "le") (k === 1 ? b.hi : b.lo).push(k === 1 ? add(neg, c(1)) : r)
    else if (cmp.op === "gt") (k === 1 ? b.lo : b.hi).push(k === 1 ? add(neg, c(1)) : r)
    else (k === 1 ? b.lo : b.hi).push(k === 1 ? neg : add(r, c(1)))
    out.set(name, b)
  }
  return out
}

interface Level {
  readonly vars: readonly string[]
  readonly extent: Expr
  /** Index steps on the SRAM and the DRAM side. */
  readonly s: number
  readonly d: number
}

/** The pads and size of one transfer level under its bounds. */
const padsOf = (ext: Expr, b: Bounds | undefined): { pad0: Expr; size: Expr; pad1: Expr } => {
  if (!b) return { pad0: c(0), size: ext, pad1: c(0) }
  const lo = b.lo.reduce<Expr>((a, x) => max(a, x), c(0))
  const hi = b.hi.reduce<Expr>((a, x) => min(a, x), ext)
  const pad0 = min(lo, ext)
  const end = max(min(hi, ext), pad0)
  return { pad0, size: sub(end, pad0), pad1: sub(ext, end) }
}

const toDma = (loops: readonly { var: string; extent: Expr }[], copy: VStmt & { kind: "copy" }): VStmt => {
  const load = isDramTensor(copy.src.buf) && !isDramTensor(copy.dst.buf)
  const store = isDramTensor(copy.dst.buf) && !isDramTensor(copy.src.buf)
  if (!load && !store) fail(`a copy from ${copy.src.buf} to ${copy.dst.buf} is not between DRAM and a scope`)
  if (store && copy.valid) fail("a store with a guard has no pads to become")
  const sram: Ref = load ? copy.dst : copy.src
  const dram: Ref = load ? copy.src : copy.dst
  const vars = loops.map((l) => l.var)
  const sa = affineIn(sram.idx, vars) ?? fail(`the SRAM index of ${sram.buf} is not affine in the loops`)
  const da = affineIn(dram.idx, vars) ?? fail(`the DRAM index of ${dram.buf} is not affine in the loops`)
  const bounds = boundsOf(copy.valid, vars)
  const levels: Level[] = loops.map((l) => ({ vars: [l.var], extent: l.extent, s: sa.coef.get(l.var) ?? 0, d: da.coef.get(l.var) ?? 0 }))
  const guarded = (l: Level) => l.vars.some((x) => bounds.has(x))
  // contiguous loops merged, innermost first
  while (levels.length >= 2) {
    const i = levels[levels.length - 1]
    const o = levels[levels.length - 2]
    if (guarded(i) || guarded(o) || !sameValue(c(o.s), mul(i.s, i.extent)) || !sameValue(c(o.d), mul(i.d, i.extent))) break
    levels.splice(levels.length - 2, 2, { vars: [...o.vars, ...i.vars], extent: simplifyMul(o.extent, i.extent), s: i.s, d: i.d })
  }
  const x = levels.pop() ?? { vars: [], extent: c(1), s: 1, d: 1 }
  if (x.s !== 1 || x.d !== 1) fail(`the innermost loop steps by ${x.s} in SRAM and ${x.d} in DRAM (a transfer's rows are contiguous)`)
  const yc = levels[levels.length - 1]
  const y = yc && yc.d >= 0 && sameValue(c(yc.s), x.extent) ? levels.pop() : undefined
  for (const l of levels) if (guarded(l)) fail(`the loop ${l.vars.join("·")} is guarded but is neither the transfer's x nor its y`)
  const px = padsOf(x.extent, x.vars.length === 1 ? bounds.get(x.vars[0]) : undefined)
  const py = y ? padsOf(y.extent, y.vars.length === 1 ? bounds.get(y.vars[0]) : undefined) : { pad0: c(0), size: c(1), pad1: c(0) }
  const at0 = new Map<string, Expr | number>([...x.vars, ...(y?.vars ?? [])].map((n) => [n, 0]))
  const first = new Map<string, Expr | number>(at0)
  if (x.vars.length === 1) first.set(x.vars[0], px.pad0)
  if (y && y.vars.length === 1) first.set(y.vars[0], py.pad0)
  const dma: VStmt = {
    kind: "dma",
    op: load ? "LOAD" : "STORE",
    sram: { buf: sram.buf, idx: bindVars(sram.idx, at0) },
    dram: { buf: dram.buf, idx: bindVars(dram.idx, first) },
    f: {
      ySize: bindVars(py.size, new Map()),
      xSize: bindVars(px.size, new Map()),
      xStride: y ? c(y.d) : bindVars(px.size, new Map()),
      yPad0: bindVars(py.pad0, new Map()),
      yPad1: bindVars(py.pad1, new Map()),
      xPad0: bindVars(px.pad0, new Map()),
      xPad1: bindVars(px.pad1, new Map()),
    },
  }
  return levels.reduceRight<VStmt>((body, l) => ({ kind: "for", var: l.vars[0], extent: l.extent, body }), dma)
}

const mul = (k: number, e: Expr): Expr => bindVars({ kind: "bin", op: "mul", a: e, b: c(k), dtype: "int32" }, new Map())
const simplifyMul = (a: Expr, b: Expr): Expr => bindVars({ kind: "bin", op: "mul", a, b, dtype: "int32" }, new Map())

export const injectDma = (f: VFunc): VFunc => {
  const rec = (s: VStmt): VStmt => {
    if (s.kind === "copy" || (s.kind === "for" && !s.vthread)) {
      const { loops, leaf } = perfectNest(s)
      if (leaf.kind === "copy") return toDma(loops, leaf)
    }
    return mapChildren(s, rec)
  }
  return { ...f, body: rec(f.body) }
}
