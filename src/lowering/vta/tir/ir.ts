// VTA's TIR: the loop IR a conv2d schedule lowers to before it is an instruction stream, and the
// forms its passes lower it through (TVM's VTA path: the schedule's TIR, then InjectDMAIntrin,
// the ALU matching, FoldUopLoop, InjectVirtualThread, CoProcSync, and the host code that emits
// the instructions). Every index counts *elements* of the buffer it names (an input element is
// BATCH×BLOCK_IN int8, a weight element BLOCK_OUT×BLOCK_IN, an accumulator element BATCH×BLOCK_OUT
// int32, an output element BATCH×BLOCK_OUT int8), as VTA's SRAM and DRAM addresses do. Buffers are
// the DRAM tensors (data, kernel, bias, out: the packed layouts) and allocations in the
// accelerator's scopes (inp, wgt, acc). Scalars (indices, extents, instruction fields) are TE
// expressions over the loop variables, evaluated when the stream is emitted.
//
// The forms, from the schedule down:
//   copy  — one element copied between a DRAM tensor and a scope (zero where `valid` is false)
//   ew    — one accumulator element set to an elementwise expression (the requantize epilogue)
//   gemm  — the tensorized GEMM intrinsic on one element of each operand (or its reset, the init)
//   dma   — a 2-D strided LOAD/STORE with pads (pass 1, DMA injection, from a copy loop nest)
//   alu   — one ALU op on one accumulator element, in place (pass 2, ALU matching, from an ew)
//   gemmKernel / aluKernel — a micro-op kernel and its two loop levels (pass 3, micro-op folding)
// Pass 4 (virtual threads) removes the vthread loops; flatten.ts unrolls the rest into
// instructions, tokens.ts inserts the dependency tokens.
import { Data } from "effect"
import { showExpr, type Expr } from "../../../ast/te/expr.js"
import type { VtaAluOp } from "../../../ast/vta/isa.js"

export type VtaScope = "inp" | "wgt" | "acc"

/** A DRAM tensor of the layer, and the VTA element kind its region holds. */
export const DRAM_TENSORS = { data: "inp", kernel: "wgt", bias: "acc", out: "out" } as const
export type DramTensor = keyof typeof DRAM_TENSORS
export const isDramTensor = (name: string): name is DramTensor => name in DRAM_TENSORS

/** An element of a buffer: an allocation or a DRAM tensor, at an element index. */
export interface Ref {
  readonly buf: string
  readonly idx: Expr
}

export interface DmaFields {
  readonly ySize: Expr
  readonly xSize: Expr
  readonly xStride: Expr
  readonly yPad0: Expr
  readonly yPad1: Expr
  readonly xPad0: Expr
  readonly xPad1: Expr
}

/** Two loop levels with constant index factors (out, in), as GEMM and ALU instructions have. */
export interface UopLoops {
  readonly iterOut: Expr
  readonly iterIn: Expr
  readonly dstFactor: readonly [number, number]
  readonly srcFactor: readonly [number, number]
}

export type VStmt =
  | { readonly kind: "for"; readonly var: string; readonly extent: Expr; readonly vthread?: boolean; readonly body: VStmt }
  | { readonly kind: "seq"; readonly body: readonly VStmt[] }
  | { readonly kind: "if"; readonly cond: Expr; readonly then: VStmt }
  | { readonly kind: "alloc"; readonly name: string; readonly scope: VtaScope; readonly elems: number; readonly body: VStmt }
  | { readonly kind: "copy"; readonly dst: Ref; readonly src: Ref; readonly valid?: Expr }
  | { readonly kind: "ew"; readonly dst: Ref; readonly value: Expr }
  | { readonly kind: "gemm"; readonly reset: boolean; readonly acc: Ref; readonly inp?: Ref; readonly wgt?: Ref }
  | { readonly kind: "dma"; readonly op: "LOAD" | "STORE"; readonly sram: Ref; readonly dram: Ref; readonly f: DmaFields }
  | { readonly kind: "alu"; readonly op: VtaAluOp; readonly dst: Ref; readonly src?: Ref; readonly imm?: number }
  | ({ readonly kind: "gemmKernel"; readonly reset: boolean; readonly wgtFactor: readonly [number, number]; readonly uops: readonly { readonly dst: Ref; readonly src?: Ref; readonly wgt?: Ref }[] } & UopLoops)
  | ({ readonly kind: "aluKernel"; readonly op: VtaAluOp; readonly imm?: number; readonly uops: readonly { readonly dst: Ref; readonly src?: Ref }[] } & UopLoops)

/** A program: its body and the element counts of its DRAM tensors. */
export interface VFunc {
  readonly name: string
  readonly tensors: ReadonlyMap<DramTensor, number>
  readonly body: VStmt
}

/** A statement a pass cannot lower (the typed error at each pass's boundary). */
export class VtaTirError extends Data.TaggedError("VtaTirError")<{ readonly pass: string; readonly reason: string }> {
  override get message(): string {
    return `VTA TIR ${this.pass}: ${this.reason}`
  }
}

export const vseq = (body: readonly VStmt[]): VStmt => {
  const flat = body.flatMap((s) => (s.kind === "seq" ? s.body : [s]))
  return flat.length === 1 ? flat[0] : { kind: "seq", body: flat }
}

/** `s` with `rec` applied to its child statements (loops, allocations, guards, sequences); leaves as they are: the passes' shared walk. */
export const mapChildren = (s: VStmt, rec: (c: VStmt) => VStmt): VStmt => {
  switch (s.kind) {
    case "for":
    case "alloc":
      return { ...s, body: rec(s.body) }
    case "if":
      return { ...s, then: rec(s.then) }
    case "seq":
      return vseq(s.body.map(rec))
    default:
      return s
  }
}

/** Rebuilds a statement bottom-up; `f` may replace any statement after its children are rebuilt. */
export const mapVStmt = (s: VStmt, f: (s: VStmt) => VStmt | undefined): VStmt => {
  const rec = (x: VStmt): VStmt => {
    let y: VStmt = x
    if (x.kind === "for" || x.kind === "alloc") y = { ...x, body: rec(x.body) }
    else if (x.kind === "seq") y = vseq(x.body.map(rec))
    else if (x.kind === "if") y = { ...x, then: rec(x.then) }
    return f(y) ?? y
  }
  return rec(s)
}

/** A perfect loop nest ending in a statement of kind `k`: its loops (outer first) and that statement. */
export const perfectNest = (s: VStmt): { loops: { var: string; extent: Expr }[]; leaf: VStmt } => {
  const loops: { var: string; extent: Expr }[] = []
  let x = s
  while (x.kind === "for" && !x.vthread) {
    loops.push({ var: x.var, extent: x.extent })
    x = x.body
  }
  return { loops, leaf: x }
}

const ref = (r: Ref | undefined) => (r ? `${r.buf}[${showExpr(r.idx)}]` : "_")
const pair = (p: readonly [number, number]) => `${p[0]}/${p[1]}`

export const printVStmt = (s: VStmt, indent = ""): string => {
  switch (s.kind) {
    case "for":
      return `${indent}for${s.vthread ? "[vthread]" : ""} ${s.var} < ${showExpr(s.extent)}:\n${printVStmt(s.body, indent + "  ")}`
    case "seq":
      return s.body.map((b) => printVStmt(b, indent)).join("\n")
    case "if":
      return `${indent}if ${showExpr(s.cond)}:\n${printVStmt(s.then, indent + "  ")}`
    case "alloc":
      return `${indent}alloc ${s.name} @${s.scope} [${s.elems}]\n${printVStmt(s.body, indent)}`
    case "copy":
      return `${indent}${ref(s.dst)} = ${s.valid ? `${showExpr(s.valid)} ? ${ref(s.src)} : 0` : ref(s.src)}`
    case "ew":
      return `${indent}${ref(s.dst)} = ${showExpr(s.value)}`
    case "gemm":
      return s.reset ? `${indent}${ref(s.acc)} = 0  (gemm reset)` : `${indent}${ref(s.acc)} += gemm(${ref(s.inp)}, ${ref(s.wgt)})`
    case "dma": {
      const f = s.f
      return `${indent}${s.op} ${ref(s.sram)} ${s.op === "LOAD" ? "<-" : "->"} ${ref(s.dram)}  y ${showExpr(f.ySize)} pad [${showExpr(f.yPad0)}, ${showExpr(f.yPad1)}]  x ${showExpr(f.xSize)} stride ${showExpr(f.xStride)} pad [${showExpr(f.xPad0)}, ${showExpr(f.xPad1)}]`
    }
    case "alu":
      return `${indent}${ref(s.dst)} = ${s.op}(${ref(s.dst)}, ${s.imm !== undefined ? s.imm : ref(s.src)})  (alu)`
    case "gemmKernel":
      return `${indent}GEMM${s.reset ? " RESET" : ""} loop ${showExpr(s.iterOut)} × ${showExpr(s.iterIn)} dst ${pair(s.dstFactor)} src ${pair(s.srcFactor)} wgt ${pair(s.wgtFactor)} uops [${s.uops.map((u) => `(${ref(u.dst)}, ${ref(u.src)}, ${ref(u.wgt)})`).join(", ")}]`
    case "aluKernel":
      return `${indent}ALU ${s.op}${s.imm !== undefined ? ` imm ${s.imm}` : ""} loop ${showExpr(s.iterOut)} × ${showExpr(s.iterIn)} dst ${pair(s.dstFactor)} src ${pair(s.srcFactor)} uops [${s.uops.map((u) => `(${ref(u.dst)}, ${ref(u.src)})`).join(", ")}]`
  }
}

/** Rewrites every scalar expression and buffer reference of one statement (not its children). */
export const mapLeaf = (s: VStmt, fe: (e: Expr) => Expr, fr: (r: Ref) => Ref): VStmt => {
  const r = (x: Ref): Ref => fr({ buf: x.buf, idx: fe(x.idx) })
  const ro = (x: Ref | undefined): Ref | undefined => (x ? r(x) : undefined)
  const loops = (x: UopLoops) => ({ iterOut: fe(x.iterOut), iterIn: fe(x.iterIn) })
  switch (s.kind) {
    case "for":
      return { ...s, extent: fe(s.extent) }
    case "if":
      return { ...s, cond: fe(s.cond) }
    case "seq":
    case "alloc":
      return s
    case "copy":
      return { ...s, dst: r(s.dst), src: r(s.src), ...(s.valid ? { valid: fe(s.valid) } : {}) }
    case "ew":
      return { ...s, dst: r(s.dst), value: fe(s.value) }
    case "gemm":
      return { ...s, acc: r(s.acc), ...(s.inp ? { inp: r(s.inp) } : {}), ...(s.wgt ? { wgt: r(s.wgt) } : {}) }
    case "dma":
      return { ...s, sram: r(s.sram), dram: r(s.dram), f: Object.fromEntries(Object.entries(s.f).map(([k, e]) => [k, fe(e)])) as unknown as DmaFields }
    case "alu":
      return { ...s, dst: r(s.dst), ...(s.src ? { src: r(s.src) } : {}) }
    case "gemmKernel":
      return { ...s, ...loops(s), uops: s.uops.map((u) => ({ dst: r(u.dst), ...(u.src ? { src: ro(u.src)! } : {}), ...(u.wgt ? { wgt: ro(u.wgt)! } : {}) })) }
    case "aluKernel":
      return { ...s, ...loops(s), uops: s.uops.map((u) => ({ dst: r(u.dst), ...(u.src ? { src: ro(u.src)! } : {}) })) }
  }
}

/** Rewrites a statement and all its children's expressions and references. */
export const mapDeep = (s: VStmt, fe: (e: Expr) => Expr, fr: (r: Ref) => Ref): VStmt => mapVStmt(s, (x) => mapLeaf(x, fe, fr))
