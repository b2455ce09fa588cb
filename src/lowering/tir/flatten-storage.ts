// lowering.FlattenStorage: every multi-dimensional access becomes one flat index through its
// buffer's strides (row-major, or padded by storageAlign); allocations take their flat size;
// params keep their logical shape and strides in `view` (callers see tensors) over flat storage;
// intrinsic regions take a flat base and the strides of their buffer.
//
// Opt level 0: the c, js and wasm emitters address flat storage only.
import { add, c, mapExpr, mul, type Expr } from "../../ast/te/expr.js"
import { simplify, simplifyMemo } from "../../ast/te/simplify.js"
import { alignedStrides, storageElements } from "../../ast/tir/analysis.js"
import { mapStmt, type Buffer } from "../../ast/tir/tir.js"
import { tirPass, type TirPass } from "./tir-pass.js"

/** storageAlign per buffer: [axis, factor, offset] makes stride[axis] ≡ offset (mod factor). */
export type StorageAligns = ReadonlyMap<string, readonly (readonly [number, number, number])[]>

/** Strides of a buffer not given its own come from `aligns` (row-major where it says nothing). */
export const flattenStorage = (aligns: StorageAligns = new Map()): TirPass =>
  tirPass(
    "lowering.FlattenStorage",
    0,
    (f) => {
      const strides = new Map<string, number[]>()
      const sizes = new Map<string, number>()
      const register = (b: Buffer) => {
        const st = b.strides ? [...b.strides] : alignedStrides(b.shape, aligns.get(b.name) ?? [])
        strides.set(b.name, st)
        sizes.set(b.name, storageElements({ shape: b.shape, strides: st }))
      }
      f.params.forEach(register)
      mapStmt(f.body, (x) => {
        if (x.kind === "allocate") register(x.buffer)
        return undefined
      })
      // (every buffer accessed is a param or allocated around the access: registered above; an
      // access of one index is flat already and keeps it)
      const memo = simplifyMemo()
      const flat = (name: string, idx: readonly Expr[]): readonly Expr[] => {
        if (idx.length === 1) return idx
        const st = strides.get(name)!
        return [simplify(idx.reduce<Expr>((acc, e, k) => add(acc, mul(e, c(st[k]))), c(0)), new Map(), memo)]
      }
      // (a read replaced is not descended into: its indices, which may read too, are mapped here)
      const g = (e: Expr): Expr => mapExpr(e, (x) => (x.kind === "read" && x.indices.length !== 1 ? { ...x, indices: flat(x.source, x.indices.map(g)) } : undefined))
      const body = mapStmt(
        f.body,
        (x) => {
          if (x.kind === "store") return { ...x, indices: flat(x.buffer, x.indices) }
          if (x.kind === "intrinsic") {
            const r = (reg: (typeof x)["output"]) =>
              reg.strides ? reg : { buffer: reg.buffer, base: flat(reg.buffer, reg.base), strides: strides.get(reg.buffer)! }
            return { ...x, output: r(x.output), inputs: x.inputs.map(r) }
          }
          if (x.kind === "allocate") {
            const { strides: _, ...buffer } = x.buffer
            return { ...x, buffer: { ...buffer, shape: [sizes.get(x.buffer.name)!] } }
          }
          return undefined
        },
        g,
      )
      // params keep their logical shape (callers see tensors) but are accessed flat through strides;
      // one of rank 1, or flattened already (its view says what callers see), is kept as it is
      const params = f.params.map((p) => (p.shape.length === 1 ? p : { ...p, shape: [sizes.get(p.name)!], view: { shape: p.shape, strides: strides.get(p.name)! } }))
      return { ...f, params, body }
    },
    { flat: true },
  )
