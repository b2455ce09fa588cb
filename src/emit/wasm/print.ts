// A WAT-like text rendering of a module description (the goldens of the wasm target): types,
// imports, memory, then each function with its frame notes and its instructions indented by block.
// It renders the same instruction lists encoder.ts turns into bytes.
import { OPS, functionIndex, moduleTypes, type FuncType, type Instr, type WasmModule } from "./encoder.js"

const sig = (t: FuncType) => `(func${t.params.length ? ` (param ${t.params.join(" ")})` : ""}${t.results.length ? ` (result ${t.results.join(" ")})` : ""})`

const num = (x: number): string => (Number.isNaN(x) ? "nan" : x === Infinity ? "inf" : x === -Infinity ? "-inf" : Object.is(x, -0) ? "-0" : String(x))

const instrText = (i: Instr, fnIdx: ReadonlyMap<string, number>): string => {
  const imm = OPS[i.op].imm as string
  switch (imm) {
    case "none":
      return i.op
    case "block":
      return i.t ? `${i.op} (result ${i.t})` : i.op
    case "mem": {
      const parts = [i.b ? `offset=${i.b}` : "", `align=${2 ** i.a!}`].filter(Boolean)
      return `${i.op} ${parts.join(" ")}`
    }
    case "call":
      return `call ${fnIdx.get(i.sym!)} ;; ${i.sym}`
    case "shuffle":
      return `${i.op} ${(i.lanes ?? []).join(" ")}`
    case "v128":
      return `${i.op} f32x4 ${num(i.a!)} ${num(i.a!)} ${num(i.a!)} ${num(i.a!)}`
    default:
      return `${i.op} ${num(i.a!)}`
  }
}

/** The text of a module, deterministic. */
export const printWasmModule = (m: WasmModule): string => {
  const types = moduleTypes(m)
  const fnIdx = functionIndex(m)
  const typeOf = (t: FuncType) => types.findIndex((u) => sig(u) === sig(t))
  const out: string[] = ["(module"]
  types.forEach((t, k) => out.push(`  (type ${k} ${sig(t)})`))
  const mem = m.memory
  out.push(`  (import "${mem.module}" "${mem.field}" (memory ${mem.minPages}${mem.maxPages !== undefined ? ` ${mem.maxPages}` : ""}${mem.shared ? " shared" : ""}))`)
  for (const i of m.imports) out.push(`  (import "${i.module}" "${i.field}" (func ${fnIdx.get(i.name)} ${i.name} (type ${typeOf(i.type)})))`)
  for (const f of m.funcs) {
    out.push("")
    for (const n of f.notes ?? []) out.push(`  ;; ${n}`)
    const locals = f.locals.length ? ` (local ${f.locals.join(" ")})` : ""
    out.push(`  (func ${fnIdx.get(f.name)} ${f.exported ? `(export "${f.name}")` : f.name} (type ${typeOf(f.type)})${locals}`)
    let depth = 2
    for (const i of f.code) {
      if (i.op === "end" || i.op === "else") depth--
      out.push(`${"  ".repeat(depth)}${instrText(i, fnIdx)}`)
      if (i.op === "block" || i.op === "loop" || i.op === "if" || i.op === "else") depth++
    }
    out.push("  )")
  }
  out.push(")")
  return out.join("\n") + "\n"
}
