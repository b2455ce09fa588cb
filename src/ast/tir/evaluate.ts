// The meaning of TIR: runs a PrimFunc on typed arrays. Parallel, vectorized and unrolled loops
// run their iterations in order (their iterations are independent by construction); thread-bound
// loops whose body holds barriers run phase by phase (every thread reaches a barrier before any
// passes it); allocations are fresh per execution of their statement (so a buffer allocated inside
// a thread loop is per thread, inside a block loop per block). Every access is bounds-checked.
import { allocate, converter, type TypedArray } from "../graph/dtype.js"
import { sizeOf, stridesOf, tensor, type Tensor } from "../graph/tensor.js"
import { evalExpr } from "../te/eval-expr.js"
import type { Buffer, PrimFunc, Stmt } from "./tir.js"

export class TirEvalError extends Error {
  override readonly name = "TirEvalError"
}

interface Live {
  readonly buffer: Buffer
  readonly data: TypedArray
  readonly strides: readonly number[]
  readonly conv: (x: number) => number
}

const offsetOf = (b: Live, idx: readonly number[]): number => {
  if (idx.length !== b.buffer.shape.length) throw new TirEvalError(`${b.buffer.name} has rank ${b.buffer.shape.length}, accessed with ${idx.length} indices`)
  let off = 0
  for (let k = 0; k < idx.length; k++) {
    const i = idx[k]
    if (!(Number.isInteger(i) && i >= 0 && i < b.buffer.shape[k]))
      throw new TirEvalError(`out-of-bounds access ${b.buffer.name}[${idx.join(", ")}] (shape [${b.buffer.shape.join(", ")}])`)
    off += i * b.strides[k]
  }
  return off
}

const live = (buffer: Buffer, data?: TypedArray): Live => {
  const strides = buffer.strides ?? stridesOf(buffer.shape)
  const span = buffer.shape.length ? buffer.shape.reduce((s, d, k) => s + (d - 1) * strides[k], 1) : 1
  return { buffer, data: data ?? allocate(buffer.dtype, Math.max(span, sizeOf(buffer.shape))), strides, conv: converter(buffer.dtype) }
}

/** Visits a param's elements in row-major order of its logical shape with their storage offsets. */
const forEachOffset = (b: Live, p: Buffer, f: (i: number, off: number) => void): void => {
  const shape = p.view?.shape ?? p.shape
  const strides = p.view?.strides ?? b.strides
  const n = sizeOf(shape)
  const idx = new Array<number>(shape.length).fill(0)
  for (let i = 0; i < n; i++) {
    let off = 0
    for (let k = 0; k < idx.length; k++) off += idx[k] * strides[k]
    if (off >= b.data.length) throw new TirEvalError(`param ${p.name}: element ${i} lies outside its storage`)
    f(i, off)
    for (let k = idx.length - 1; k >= 0; k--) {
      if (++idx[k] < shape[k]) break
      idx[k] = 0
    }
  }
}

/** Runs `f` with its params bound by name; returns the output params (those not given) and the given ones as written. */
export const evaluatePrimFunc = (f: PrimFunc, args: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
  const buffers = new Map<string, Live>()
  for (const p of f.params) {
    const t = args.get(p.name)
    if (t) {
      const logical = p.view?.shape ?? p.shape
      if (t.shape.join(",") !== logical.join(",")) throw new TirEvalError(`param ${p.name} is [${logical}], given [${t.shape}]`)
      const b = live(p)
      forEachOffset(b, p, (i, off) => (b.data[off] = t.data[i]))
      buffers.set(p.name, b)
    } else buffers.set(p.name, live(p))
  }
  const env = new Map<string, number>()
  const read = (source: string, idx: readonly number[]) => {
    const b = buffers.get(source)
    if (!b) throw new TirEvalError(`read of unknown buffer '${source}'`)
    return b.data[offsetOf(b, idx)]
  }
  const ev = (e: Parameters<typeof evalExpr>[0]) => evalExpr(e, env, read)

  const hasBarrier = (s: Stmt): boolean =>
    s.kind === "barrier" || (s.kind === "seq" && s.body.some(hasBarrier)) || ((s.kind === "for" || s.kind === "allocate" || s.kind === "let") && hasBarrier(s.body)) || (s.kind === "if" && (hasBarrier(s.then) || (!!s.else && hasBarrier(s.else))))

  const run = (s: Stmt): void => {
    switch (s.kind) {
      case "for": {
        const min = ev(s.min)
        const ext = ev(s.extent)
        const prev = env.get(s.var.name)
        if (s.forKind === "thread" && s.body.kind === "seq" && s.body.body.some((x) => x.kind === "barrier")) {
          // phase by phase: every thread runs up to the barrier before any goes on
          const phases: Stmt[][] = [[]]
          for (const x of s.body.body) (x.kind === "barrier" ? phases.push([]) : phases[phases.length - 1].push(x))
          for (const phase of phases)
            for (let i = min; i < min + ext; i++) {
              env.set(s.var.name, i)
              phase.forEach(run)
            }
        } else if (s.forKind === "thread" && hasBarrier(s.body)) {
          throw new TirEvalError(`barrier nested below the top level of thread loop ${s.var.name} is not supported by the evaluator`)
        } else
          for (let i = min; i < min + ext; i++) {
            env.set(s.var.name, i)
            run(s.body)
          }
        if (prev === undefined) env.delete(s.var.name)
        else env.set(s.var.name, prev)
        return
      }
      case "seq":
        s.body.forEach(run)
        return
      case "store": {
        const b = buffers.get(s.buffer)
        if (!b) throw new TirEvalError(`store to unknown buffer '${s.buffer}'`)
        const idx = s.indices.map(ev)
        b.data[offsetOf(b, idx)] = b.conv(ev(s.value))
        return
      }
      case "if":
        if (ev(s.cond)) run(s.then)
        else if (s.else) run(s.else)
        return
      case "allocate": {
        const prev = buffers.get(s.buffer.name)
        buffers.set(s.buffer.name, live(s.buffer))
        run(s.body)
        if (prev) buffers.set(s.buffer.name, prev)
        else buffers.delete(s.buffer.name)
        return
      }
      case "let": {
        const prev = env.get(s.var.name)
        env.set(s.var.name, ev(s.value))
        run(s.body)
        if (prev === undefined) env.delete(s.var.name)
        else env.set(s.var.name, prev)
        return
      }
      case "evaluate":
        ev(s.value)
        return
      case "barrier":
        return
    }
  }
  run(f.body)
  const out = new Map<string, Tensor>()
  for (const p of f.params) {
    const b = buffers.get(p.name)!
    const logical = p.view?.shape ?? p.shape
    const data = allocate(p.dtype, sizeOf(logical))
    forEachOffset(b, p, (i, off) => (data[i] = b.data[off]))
    out.set(p.name, tensor(p.dtype, logical, data))
  }
  return out
}
