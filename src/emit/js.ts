// The `js` target: PrimFuncs → one readable ES module, the portable reference backend. Pure and
// deterministic: identifiers are generated (b0, v3, …) in order of first appearance, so no name
// from a model ever reaches the emitted text; original names appear only in escaped comments.
import { isIntDtype, type BinOp, type Expr } from "../ast/te/expr.js"
import { DTYPE_INFO, type DType } from "../ast/graph/dtype.js"
import type { Buffer, PrimFunc, Stmt } from "../ast/tir/tir.js"

/** The JS typed array holding each dtype (its name, from the one dtype table). */
const jsArray = (d: DType): string => DTYPE_INFO[d].array.name

/** A comment-safe rendering of an arbitrary name. */
export const commentSafe = (s: string): string => JSON.stringify(s).replace(/\*\//g, "*\\/").replace(/[\u2028\u2029]/g, " ")

const PRELUDE = `const $floordiv = (a, b) => Math.floor(a / b);
const $floormod = (a, b) => a - Math.floor(a / b) * b;
const $round = (x) => { const r = Math.round(x); return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r; };
const $erf = (x) => {
  const t = 1 / (1 + 0.5 * Math.abs(x));
  const y = 1 - t * Math.exp(-x * x - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0 ? y : -y;
};
`

const BIN: Partial<Record<BinOp, string>> = { add: "+", sub: "-", mul: "*", eq: "===", ne: "!==", lt: "<", le: "<=", gt: ">", ge: ">=", and: "&&", or: "||" }

class Names {
  private readonly map = new Map<string, string>()
  constructor(private readonly prefix: string) {}
  get(name: string): string {
    let n = this.map.get(name)
    if (!n) {
      n = `${this.prefix}${this.map.size}`
      this.map.set(name, n)
    }
    return n
  }
}

const num = (x: number): string => (Number.isNaN(x) ? "NaN" : x === Infinity ? "Infinity" : x === -Infinity ? "-Infinity" : Object.is(x, -0) ? "-0" : String(x))

const castTo = (dtype: DType, e: string): string => {
  switch (dtype) {
    case "float32":
      return `Math.fround(${e})`
    case "float64":
    case "float16":
    case "bfloat16":
      return e
    case "bool":
      return `((${e}) ? 1 : 0)`
    case "int32":
      return `((${e}) | 0)`
    case "uint32":
      return `((${e}) >>> 0)`
    case "int8":
      return `((((${e}) | 0) << 24) >> 24)`
    case "uint8":
      return `(((${e}) | 0) & 255)`
    case "int16":
      return `((((${e}) | 0) << 16) >> 16)`
    case "uint16":
      return `(((${e}) | 0) & 65535)`
    case "int64":
    case "uint64":
      return `Math.trunc(${e})`
  }
}

const renderExpr = (e: Expr, vars: Names, bufs: Names): string => {
  const r = (x: Expr) => renderExpr(x, vars, bufs)
  switch (e.kind) {
    case "const":
      return num(e.value)
    case "var":
      return vars.get(e.name)
    case "read":
      return `${bufs.get(e.source)}[${e.indices.map(r).join(" + ")}]`
    case "select":
      return `(${r(e.cond)} ? ${r(e.t)} : ${r(e.f)})`
    case "cast":
      return castTo(e.dtype, r(e.value))
    case "reduce":
      throw new Error("a reduction reached emission: lower it first")
    case "call": {
      const a = e.args.map(r)
      switch (e.fn) {
        case "exp":
        case "log":
        case "sqrt":
        case "tanh":
        case "floor":
        case "ceil":
        case "sin":
        case "cos":
          return `Math.${e.fn}(${a[0]})`
        case "pow":
          return `Math.pow(${a[0]}, ${a[1]})`
        case "rsqrt":
          return `(1 / Math.sqrt(${a[0]}))`
        case "sigmoid":
          return `(1 / (1 + Math.exp(-(${a[0]}))))`
        case "fabs":
          return `Math.abs(${a[0]})`
        case "erf":
          return `$erf(${a[0]})`
        case "round":
          return `$round(${a[0]})`
        case "neg":
          return `(-(${a[0]}))`
        case "not":
          return `((${a[0]}) ? 0 : 1)`
      }
    }
    case "bin": {
      const a = r(e.a)
      const b = r(e.b)
      const int = isIntDtype(e.a.dtype)
      switch (e.op) {
        case "div":
          return int ? `Math.trunc(${a} / ${b})` : `(${a} / ${b})`
        case "floordiv":
          return int ? `$floordiv(${a}, ${b})` : `Math.floor(${a} / ${b})`
        case "floormod":
          return `$floormod(${a}, ${b})`
        case "min":
          return `Math.min(${a}, ${b})`
        case "max":
          return `Math.max(${a}, ${b})`
        case "eq":
        case "ne":
        case "lt":
        case "le":
        case "gt":
        case "ge":
          return `((${a} ${BIN[e.op]} ${b}) ? 1 : 0)`
        case "and":
        case "or":
          return `((${a} ${BIN[e.op]} ${b}) ? 1 : 0)`
        default:
          return `(${a} ${BIN[e.op]} ${b})`
      }
    }
  }
}

const flatSize = (b: Buffer) => b.shape.reduce((a, d) => a * d, 1)

const renderStmt = (s: Stmt, ind: string, vars: Names, bufs: Names, out: string[]): void => {
  const e = (x: Expr) => renderExpr(x, vars, bufs)
  switch (s.kind) {
    case "for": {
      const v = vars.get(s.var.name)
      const kind = s.forKind === "serial" ? "" : ` // ${s.forKind}${s.thread ? ` ${s.thread}` : ""}`
      out.push(`${ind}for (let ${v} = ${e(s.min)}, ${v}$end = ${e(s.min)} + ${e(s.extent)}; ${v} < ${v}$end; ${v}++) {${kind}`)
      renderStmt(s.body, ind + "  ", vars, bufs, out)
      out.push(`${ind}}`)
      return
    }
    case "seq":
      for (const b of s.body) renderStmt(b, ind, vars, bufs, out)
      return
    case "store": {
      const idx = s.indices.map(e).join(" + ")
      out.push(`${ind}${bufs.get(s.buffer)}[${idx}] = ${e(s.value)};`)
      return
    }
    case "if":
      out.push(`${ind}if (${e(s.cond)}) {`)
      renderStmt(s.then, ind + "  ", vars, bufs, out)
      if (s.else) {
        out.push(`${ind}} else {`)
        renderStmt(s.else, ind + "  ", vars, bufs, out)
      }
      out.push(`${ind}}`)
      return
    case "allocate":
      out.push(`${ind}{ const ${bufs.get(s.buffer.name)} = new ${jsArray(s.buffer.dtype)}(${flatSize(s.buffer)}); // ${commentSafe(s.buffer.name)} @${s.buffer.scope}`)
      renderStmt(s.body, ind + "  ", vars, bufs, out)
      out.push(`${ind}}`)
      return
    case "let":
      out.push(`${ind}{ const ${vars.get(s.var.name)} = ${e(s.value)};`)
      renderStmt(s.body, ind + "  ", vars, bufs, out)
      out.push(`${ind}}`)
      return
    case "evaluate":
      out.push(`${ind}${e(s.value)};`)
      return
    case "barrier":
      out.push(`${ind}// barrier (no-op: one thread of control)`)
      return
    case "intrinsic":
      throw new Error(`intrinsic ${s.intrin.name} reached the js emitter: run lowering.LowerIntrinsics first`)
  }
}

/** One function per PrimFunc, its params as typed arrays in order. */
export const emitJsFunction = (f: PrimFunc, exportName: string): string => {
  const vars = new Names("v")
  const bufs = new Names("b")
  const params = f.params.map((p) => bufs.get(p.name))
  const out: string[] = []
  out.push(`// ${commentSafe(f.name)}: ${f.params.map((p) => `${commentSafe(p.name)} ${p.dtype}[${(p.view?.shape ?? p.shape).join("x")}]`).join(", ")}`)
  out.push(`export function ${exportName}(${params.join(", ")}) {`)
  renderStmt(f.body, "  ", vars, bufs, out)
  out.push("}")
  return out.join("\n")
}

/** An ES module exporting each function under a generated name (k0, k1, …, in the given order). */
export const emitJsModule = (funcs: readonly { readonly name: string; readonly func: PrimFunc }[]): string => {
  for (const f of funcs) if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(f.name)) throw new Error(`kernel name '${f.name}' is not a safe identifier`)
  return [`// Generated by Tessera (js target). Do not edit.`, PRELUDE, ...funcs.map((f) => emitJsFunction(f.func, f.name)), ""].join("\n")
}
