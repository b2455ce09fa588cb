// TIR: the loop IR every target emits from. A PrimFunc runs statements over Buffers; loops carry
// their kind (serial, parallel, vectorized, unrolled, thread-bound, vthread).
import type { DType } from "../graph/dtype.js"
import { showExpr, type Expr, type Var } from "../te/expr.js"
import type { MemoryScope, ThreadTag } from "../schedule/schedule.js"
import type { TensorIntrinsic } from "../te/intrinsic.js"

export interface Buffer {
  readonly name: string
  readonly dtype: DType
  readonly shape: readonly number[]
  /** Row-major unless given (storageAlign pads the strides). */
  readonly strides?: readonly number[]
  readonly scope: MemoryScope
  /** For a flattened param: the tensor it holds (logical shape and strides into the flat storage). */
  readonly view?: { readonly shape: readonly number[]; readonly strides: readonly number[] }
}

export type ForKind = "serial" | "parallel" | "vectorized" | "unrolled" | "thread" | "vthread"

export type Stmt =
  | { readonly kind: "for"; readonly var: Var; readonly min: Expr; readonly extent: Expr; readonly forKind: ForKind; readonly thread?: ThreadTag; readonly body: Stmt; readonly pragmas?: readonly (readonly [string, string])[] }
  | { readonly kind: "seq"; readonly body: readonly Stmt[] }
  | { readonly kind: "store"; readonly buffer: string; readonly indices: readonly Expr[]; readonly value: Expr }
  | { readonly kind: "if"; readonly cond: Expr; readonly then: Stmt; readonly else?: Stmt }
  | { readonly kind: "allocate"; readonly buffer: Buffer; readonly body: Stmt }
  | { readonly kind: "let"; readonly var: Var; readonly value: Expr; readonly body: Stmt }
  | { readonly kind: "evaluate"; readonly value: Expr }
  | { readonly kind: "barrier" }
  /** A tensor intrinsic applied to buffer regions starting at `base` (one index per dim). */
  | { readonly kind: "intrinsic"; readonly intrin: TensorIntrinsic; readonly output: Region; readonly inputs: readonly Region[] }

export interface Region {
  readonly buffer: string
  /** One index per dim; after FlattenStorage, one flat index with the dims' `strides`. */
  readonly base: readonly Expr[]
  readonly strides?: readonly number[]
}

export interface PrimFunc {
  readonly name: string
  /** Inputs then outputs. */
  readonly params: readonly Buffer[]
  readonly body: Stmt
}

export const seq = (body: readonly Stmt[]): Stmt => {
  const flat = body.flatMap((s) => (s.kind === "seq" ? s.body : [s]))
  return flat.length === 1 ? flat[0] : { kind: "seq", body: flat }
}

const showBuffer = (b: Buffer) => `${b.name}: ${b.dtype}[${b.shape.join(", ")}]${b.scope !== "global" ? ` @${b.scope}` : ""}${b.strides ? ` strides(${b.strides.join(", ")})` : ""}`

export const printStmt = (s: Stmt, indent = "  "): string => {
  switch (s.kind) {
    case "for": {
      const kind = s.forKind === "serial" ? "for" : s.forKind === "thread" || s.forKind === "vthread" ? `for[${s.thread}]` : `for[${s.forKind}]`
      const pr = s.pragmas?.length ? ` pragma(${s.pragmas.map(([k, v]) => `${k}=${v}`).join(", ")})` : ""
      return `${indent}${kind} ${s.var.name} in [${showExpr(s.min)}, +${showExpr(s.extent)})${pr}:\n${printStmt(s.body, indent + "  ")}`
    }
    case "seq":
      return s.body.map((b) => printStmt(b, indent)).join("\n")
    case "store":
      return `${indent}${s.buffer}[${s.indices.map(showExpr).join(", ")}] = ${showExpr(s.value)}`
    case "if":
      return `${indent}if ${showExpr(s.cond)}:\n${printStmt(s.then, indent + "  ")}${s.else ? `\n${indent}else:\n${printStmt(s.else, indent + "  ")}` : ""}`
    case "allocate":
      return `${indent}allocate ${showBuffer(s.buffer)}\n${printStmt(s.body, indent)}`
    case "let":
      return `${indent}let ${s.var.name} = ${showExpr(s.value)}\n${printStmt(s.body, indent)}`
    case "evaluate":
      return `${indent}${showExpr(s.value)}`
    case "barrier":
      return `${indent}barrier()`
    case "intrinsic": {
      const r = (x: Region) => `${x.buffer}[${x.base.map(showExpr).join(", ")}]`
      return `${indent}${s.intrin.name}(${r(s.output)}${s.intrin.mode === "update" ? " +=" : " ="} ${s.inputs.map(r).join(", ")})`
    }
  }
}

export const printPrimFunc = (f: PrimFunc): string => `primfunc ${f.name}(${f.params.map(showBuffer).join(", ")}):\n${printStmt(f.body)}`

/** Rebuilds a statement bottom-up; `f` may replace any statement (after its children are rebuilt). */
export const mapStmt = (s: Stmt, f: (s: Stmt) => Stmt | undefined, g: (e: Expr) => Expr = (e) => e): Stmt => {
  const rec = (x: Stmt): Stmt => {
    let y: Stmt
    switch (x.kind) {
      case "for":
        y = { ...x, min: g(x.min), extent: g(x.extent), body: rec(x.body) }
        break
      case "seq":
        y = seq(x.body.map(rec))
        break
      case "store":
        y = { ...x, indices: x.indices.map(g), value: g(x.value) }
        break
      case "if":
        y = { ...x, cond: g(x.cond), then: rec(x.then), ...(x.else ? { else: rec(x.else) } : {}) }
        break
      case "allocate":
        y = { ...x, body: rec(x.body) }
        break
      case "let":
        y = { ...x, value: g(x.value), body: rec(x.body) }
        break
      case "evaluate":
        y = { ...x, value: g(x.value) }
        break
      case "barrier":
        y = x
        break
      case "intrinsic":
        y = { ...x, output: { ...x.output, base: x.output.base.map(g) }, inputs: x.inputs.map((r) => ({ ...r, base: r.base.map(g) })) }
        break
    }
    return f(y) ?? y
  }
  return rec(s)
}
