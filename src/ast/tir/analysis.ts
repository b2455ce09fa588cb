// Facts about TIR that every consumer (passes, emitters, devices, the verifier) reads the same way:
// a buffer's row-major or aligned strides and the elements of storage it spans, which buffers a
// statement stores to and which it may read before writing, a function's params as a caller passes
// them, and whether a statement is straight-line code (a vector loop's body).
import type { DType } from "../graph/dtype.js"
import { stridesOf } from "../graph/tensor.js"
import { collect, type Expr } from "../te/expr.js"
import type { Buffer, PrimFunc, Stmt } from "./tir.js"

/** Row-major strides of a shape (the last dim contiguous): the graph IR's own. */
export const rowMajor: (shape: readonly number[]) => number[] = stridesOf

/** Strides with storageAlign applied: align = [axis, factor, offset] makes stride[axis] ≡ offset (mod factor). */
export const alignedStrides = (shape: readonly number[], align: readonly (readonly [number, number, number])[]): number[] => {
  const st = new Array<number>(shape.length)
  let acc = 1
  for (let i = shape.length - 1; i >= 0; i--) {
    const a = align.find(([axis]) => axis === i)
    if (a) {
      const [, factor, offset] = a
      while (((acc % factor) + factor) % factor !== ((offset % factor) + factor) % factor) acc++
    }
    st[i] = acc
    acc *= shape[i]
  }
  return st
}

/** Elements of flat storage a buffer spans through its strides (row-major unless given; at least 1). */
export const storageElements = (b: Pick<Buffer, "shape" | "strides">): number => {
  const st = b.strides ?? rowMajor(b.shape)
  return b.shape.length ? Math.max(1, b.shape.reduce((s, d, k) => s + (d - 1) * st[k], 1)) : 1
}

/** Names of the buffers `s` stores to (a store's or an intrinsic's output), added to `out`. */
export const storedBuffers = (s: Stmt, out: Set<string> = new Set()): Set<string> => {
  switch (s.kind) {
    case "store":
    case "shuffle":
      out.add(s.buffer)
      break
    case "intrinsic":
      out.add(s.output.buffer)
      break
    case "for":
    case "allocate":
    case "let":
      storedBuffers(s.body, out)
      break
    case "seq":
      s.body.forEach((b) => storedBuffers(b, out))
      break
    case "if":
      storedBuffers(s.then, out)
      if (s.else) storedBuffers(s.else, out)
      break
    default:
      break
  }
  return out
}

/** Buffers whose value on entry may matter: every buffer read, and those stored under an `if` or a loop of unknown extent (which may leave elements unwritten). */
export const seenOnEntry = (body: Stmt): Set<string> => {
  const out = new Set<string>()
  const ofExpr = (e: Expr) => collect(e, (x) => x.kind === "read").forEach((x) => x.kind === "read" && out.add(x.source))
  const rec = (s: Stmt, guarded: boolean): void => {
    switch (s.kind) {
      case "store":
        if (guarded) out.add(s.buffer)
        s.indices.forEach(ofExpr)
        ofExpr(s.value)
        return
      case "for":
        ofExpr(s.min)
        ofExpr(s.extent)
        return rec(s.body, guarded || s.extent.kind !== "const")
      case "seq":
        return s.body.forEach((b) => rec(b, guarded))
      case "if":
        ofExpr(s.cond)
        rec(s.then, true)
        if (s.else) rec(s.else, true)
        return
      case "allocate":
        return rec(s.body, guarded)
      case "let":
        ofExpr(s.value)
        return rec(s.body, guarded)
      case "evaluate":
        return ofExpr(s.value)
      case "intrinsic":
        out.add(s.output.buffer)
        s.inputs.forEach((r) => out.add(r.buffer))
        return
      case "shuffle":
        if (guarded) out.add(s.buffer)
        s.indices.forEach(ofExpr)
        ofExpr(s.value)
        return
      default:
        return
    }
  }
  rec(body, false)
  return out
}

/** A function's params as a caller passes them: dtype, elements of storage, the tensor's shape, whether written and whether seen on entry. */
export const paramsOf = (f: PrimFunc): { dtype: DType; elements: number; shape: readonly number[]; written: boolean; copyIn: boolean }[] => {
  const stored = storedBuffers(f.body)
  const seen = seenOnEntry(f.body)
  return f.params.map((p) => ({
    dtype: p.dtype,
    elements: Math.max(storageElements(p), (p.view?.shape ?? p.shape).reduce((a, d) => a * d, 1)),
    shape: p.view?.shape ?? p.shape,
    written: stored.has(p.name),
    copyIn: !stored.has(p.name) || seen.has(p.name),
  }))
}

/**
 * Straight-line code: stores, lets and evaluations only — no loop, guard, allocation, barrier or
 * intrinsic (which LowerIntrinsics turns into a loop nest). What a vectorized loop's body may be.
 */
export const isStraightLine = (s: Stmt): boolean => {
  switch (s.kind) {
    case "store":
    case "evaluate":
      return true
    case "let":
      return isStraightLine(s.body)
    case "seq":
      return s.body.every(isStraightLine)
    default:
      return false
  }
}
