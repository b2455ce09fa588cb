// lowering.FlattenStorage: every multi-dimensional access becomes one flat index through its
// buffer's strides (row-major, or padded by storageAlign); allocations take their flat size;
// params keep their logical shape and strides in `view` (callers see tensors) over flat storage;
// intrinsic regions take a flat base and the strides of their buffer.
//
// Opt level 0: the c, js and wasm emitters address flat storage only.
import { add, c, mapExpr, mul, type Expr } from "../../ast/te/expr.js"
import { simplify } from "../../ast/te/simplify.js"
import { alignedStrides, storageElements } from "../../ast/tir/analysis.js"
import { mapStmt, type Buffer, type Stmt } from "../../ast/tir/tir.js"
import { tirPass, type TirPass } from "./tir-pass.js"

/** storageAlign per buffer: [axis, factor, offset] makes stride[axis] ≡ offset (mod factor). */
export type StorageAligns = ReadonlyMap<string, readonly (readonly [number, number, number])[]>

const stripUndefinedStrides = (s: Stmt): Stmt =>
  mapStmt(s, (x) => {
    if (x.kind !== "allocate" || x.buffer.strides !== undefined) return undefined
    const { strides: _, ...rest } = x.buffer
    return { ...x, buffer: rest }
  })

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
      const flat = (name: string, idx: readonly Expr[]): Expr[] => {
        const st = strides.get(name)
        if (!st || idx.length === 1) return [...idx]
        return [simplify(idx.reduce<Expr>((acc, e, k) => add(acc, mul(e, c(st[k]))), c(0)))]
      }
      const g = (e: Expr): Expr => mapExpr(e, (x) => (x.kind === "read" && strides.has(x.source) && x.indices.length !== 1 ? { ...x, indices: flat(x.source, x.indices.map(g)) } : undefined))
      const body = mapStmt(
        f.body,
        (x) => {
          if (x.kind === "store") return { ...x, indices: flat(x.buffer, x.indices) }
          if (x.kind === "intrinsic") {
            const r = (reg: (typeof x)["output"]) =>
              reg.strides || !strides.has(reg.buffer) ? reg : { buffer: reg.buffer, base: flat(reg.buffer, reg.base), strides: strides.get(reg.buffer)! }
            return { ...x, output: r(x.output), inputs: x.inputs.map(r) }
          }
          if (x.kind === "allocate") return { ...x, buffer: { ...x.buffer, shape: [sizes.get(x.buffer.name)!], strides: undefined } }
          return undefined
        },
        g,
      )
      // params keep their logical shape (callers see tensors) but are accessed flat through strides
      const params = f.params.map((p) => (p.shape.length === 1 && !p.view ? p : { ...p, shape: [sizes.get(p.name)!], view: { shape: p.shape, strides: strides.get(p.name)! } }))
      return { ...f, params, body: stripUndefinedStrides(body) }
    },
    { flat: true },
  )
