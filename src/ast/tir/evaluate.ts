// The meaning of TIR: runs a PrimFunc on typed arrays. Parallel, vectorized and unrolled loops
// run their iterations in order (their iterations are independent by construction); thread-bound
// loops whose body holds barriers run phase by phase (every thread reaches a barrier before any
// passes it); allocations are fresh per execution of their statement (so a buffer allocated inside
// a thread loop is per thread, inside a block loop per block). Every access is bounds-checked.
// A warp shuffle is CUDA's __shfl_down_sync: the lanes its mask names (threadIdx.x mod 32 of one
// warp) meet at the same shuffle statement, each reads the value of the lane `offset` above it in
// its segment of `width` lanes (its own past the segment); a lane of the mask that does not arrive,
// lanes at different shuffles, or a read of a lane outside the mask is an error (undefined
// behaviour on a GPU), as a barrier some threads skip is.
import { allocate, converter, type TypedArray } from "../graph/dtype.js"
import { sizeOf, stridesOf, tensor, type Tensor } from "../graph/tensor.js"
import { evalExpr } from "../te/eval-expr.js"
import { evaluateTE } from "../te/evaluate.js"
import type { Buffer, PrimFunc, Stmt } from "./tir.js"

export class TirEvalError extends Error {
  override readonly name = "TirEvalError"
}

type ShuffleStmt = Stmt & { readonly kind: "shuffle" }
/** What a thread yields at a shuffle: the statement, its threadIdx.x, the value it offers. */
interface ShuffleRequest {
  readonly stmt: ShuffleStmt
  readonly tid: number
  readonly value: number
}
type Yield = "barrier" | ShuffleRequest

const WARP = 32

/** The values the requests (threads at shuffles, each once) receive, warp by warp, as __shfl_down_sync gives them. */
const answerShuffles = (reqs: readonly ShuffleRequest[]): number[] => {
  const byWarp = new Map<number, ShuffleRequest[]>()
  for (const r of reqs) {
    const w = Math.floor(r.tid / WARP)
    byWarp.set(w, [...(byWarp.get(w) ?? []), r])
  }
  const answer = new Map<number, number>()
  for (const [w, group] of byWarp) {
    const s = group[0].stmt
    const mask = s.mask >>> 0
    const lanes = new Map<number, number>()
    for (const r of group) {
      if (r.stmt !== s) throw new TirEvalError(`warp ${w}: lanes at different shuffles (into ${s.buffer} and ${r.stmt.buffer}) at once`)
      const lane = r.tid % WARP
      if (!((mask >>> lane) & 1)) throw new TirEvalError(`warp ${w}: lane ${lane} shuffles into ${s.buffer} but the mask 0x${mask.toString(16)} leaves it out`)
      lanes.set(lane, r.value)
    }
    for (let lane = 0; lane < WARP; lane++)
      if ((mask >>> lane) & 1 && !lanes.has(lane)) throw new TirEvalError(`warp ${w}: lane ${lane}, named by the mask 0x${mask.toString(16)} of the shuffle into ${s.buffer}, did not reach it`)
    for (const r of group) {
      const lane = r.tid % WARP
      const src = (lane % s.width) + s.offset < s.width ? lane + s.offset : lane
      const v = lanes.get(src)
      if (v === undefined) throw new TirEvalError(`warp ${w}: lane ${lane} reads lane ${src} through the shuffle into ${s.buffer}, outside its mask 0x${mask.toString(16)}`)
      answer.set(r.tid, v)
    }
  }
  return reqs.map((r) => answer.get(r.tid)!)
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
  /** Per-thread state: loop vars, thread tags bound by enclosing thread loops, visible buffers. */
  interface Ctx {
    readonly env: Map<string, number>
    readonly tags: Map<string, number>
    readonly buffers: Map<string, Live>
    readonly inTeam: boolean
  }
  const evalIn = (ctx: Ctx, e: Parameters<typeof evalExpr>[0]) =>
    evalExpr(e, ctx.env, (source, idx) => {
      const b = ctx.buffers.get(source)
      if (!b) throw new TirEvalError(`read of unknown buffer '${source}'`)
      return b.data[offsetOf(b, idx)]
    })

  // Statements run as generators that yield at barriers and shuffles: a team of threads (a threadIdx
  // loop) runs its members round-robin, each up to its next barrier or shuffle; shuffles are
  // answered warp by warp, then every thread of a block reaches a barrier before any passes it;
  // nested thread loops form nested teams whose barriers propagate up.
  function* exec(s: Stmt, ctx: Ctx): Generator<Yield, void, number | undefined> {
    switch (s.kind) {
      case "for": {
        const min = evalIn(ctx, s.min)
        const ext = evalIn(ctx, s.extent)
        const tag = s.thread
        if (s.forKind === "thread" && tag && tag.startsWith("threadIdx")) {
          const bound = ctx.tags.get(tag)
          if (bound !== undefined) {
            // the same thread dimension as an enclosing loop: this thread's own index
            if (bound >= min && bound < min + ext) {
              const prev = ctx.env.get(s.var.name)
              ctx.env.set(s.var.name, bound)
              yield* exec(s.body, ctx)
              if (prev === undefined) ctx.env.delete(s.var.name)
              else ctx.env.set(s.var.name, prev)
            }
            return
          }
          const members = Array.from({ length: Math.max(0, ext) }, (_, i) => {
            const child: Ctx = { env: new Map(ctx.env).set(s.var.name, min + i), tags: new Map(ctx.tags).set(tag, min + i), buffers: new Map(ctx.buffers), inTeam: true }
            return exec(s.body, child)
          })
          let live = members
          let states = live.map((g) => g.next())
          for (;;) {
            const at = states.flatMap((st, k) => (!st.done && typeof st.value === "object" ? [k] : []))
            if (at.length > 0) {
              const answers = answerShuffles(at.map((k) => states[k].value as ShuffleRequest))
              const next = [...states]
              at.forEach((k, i) => (next[k] = live[k].next(answers[i])))
              states = next
              continue
            }
            const waiting = live.filter((_, k) => !states[k].done)
            if (waiting.length === 0) return
            if (waiting.length !== live.length) throw new TirEvalError(`barrier divergence in thread loop ${s.var.name}: some threads finished while others wait at a barrier`)
            if (ctx.inTeam) yield "barrier"
            live = waiting
            states = live.map((g) => g.next())
          }
        }
        const prev = ctx.env.get(s.var.name)
        for (let i = min; i < min + ext; i++) {
          ctx.env.set(s.var.name, i)
          yield* exec(s.body, ctx)
        }
        if (prev === undefined) ctx.env.delete(s.var.name)
        else ctx.env.set(s.var.name, prev)
        return
      }
      case "seq":
        for (const b of s.body) yield* exec(b, ctx)
        return
      case "store": {
        const b = ctx.buffers.get(s.buffer)
        if (!b) throw new TirEvalError(`store to unknown buffer '${s.buffer}'`)
        const idx = s.indices.map((e) => evalIn(ctx, e))
        b.data[offsetOf(b, idx)] = b.conv(evalIn(ctx, s.value))
        return
      }
      case "if":
        if (evalIn(ctx, s.cond)) yield* exec(s.then, ctx)
        else if (s.else) yield* exec(s.else, ctx)
        return
      case "allocate": {
        const prev = ctx.buffers.get(s.buffer.name)
        ctx.buffers.set(s.buffer.name, live(s.buffer))
        yield* exec(s.body, ctx)
        if (prev) ctx.buffers.set(s.buffer.name, prev)
        else ctx.buffers.delete(s.buffer.name)
        return
      }
      case "let": {
        const prev = ctx.env.get(s.var.name)
        ctx.env.set(s.var.name, evalIn(ctx, s.value))
        yield* exec(s.body, ctx)
        if (prev === undefined) ctx.env.delete(s.var.name)
        else ctx.env.set(s.var.name, prev)
        return
      }
      case "evaluate":
        evalIn(ctx, s.value)
        return
      case "barrier":
        if (ctx.inTeam) yield "barrier"
        return
      case "shuffle": {
        const tid = ctx.tags.get("threadIdx.x")
        if (!ctx.inTeam || tid === undefined) throw new TirEvalError(`a warp shuffle into ${s.buffer} outside a threadIdx.x loop`)
        if (ctx.tags.has("threadIdx.y") || ctx.tags.has("threadIdx.z")) throw new TirEvalError(`a warp shuffle into ${s.buffer} in a block of several dimensions (its lanes are threadIdx.x alone)`)
        const b = ctx.buffers.get(s.buffer)
        if (!b) throw new TirEvalError(`shuffle into unknown buffer '${s.buffer}'`)
        const idx = s.indices.map((e) => evalIn(ctx, e))
        const got = yield { stmt: s, tid, value: evalIn(ctx, s.value) }
        if (got === undefined) throw new TirEvalError(`a warp shuffle into ${s.buffer} was not answered`)
        b.data[offsetOf(b, idx)] = b.conv(got)
        return
      }
      case "intrinsic": {
        // the instruction's meaning is its TE declaration, run on the regions it covers
        const region = (buf: string, base: readonly number[], shape: readonly number[], strides?: readonly number[]) => {
          const b = ctx.buffers.get(buf)
          if (!b) throw new TirEvalError(`intrinsic ${s.intrin.name}: unknown buffer '${buf}'`)
          const offs: number[] = []
          const n = sizeOf(shape)
          const idx = new Array<number>(shape.length).fill(0)
          for (let i = 0; i < n; i++) {
            // an operand of lower rank than its buffer covers the buffer's trailing dims
            if (strides) {
              const st = strides.slice(strides.length - shape.length)
              const off = base[0] + idx.reduce((acc, x, k) => acc + x * st[k], 0)
              offs.push(offsetOf(b, [off]))
            } else {
              const extra = base.length - shape.length
              offs.push(offsetOf(b, base.map((x, k) => (k < extra ? x : x + idx[k - extra]))))
            }
            for (let k = idx.length - 1; k >= 0; k--) {
              if (++idx[k] < shape[k]) break
              idx[k] = 0
            }
          }
          return { b, offs }
        }
        const feeds = new Map<string, Tensor>()
        s.intrin.inputs.forEach((p, k) => {
          const { b, offs } = region(s.inputs[k].buffer, s.inputs[k].base.map((e) => evalIn(ctx, e)), p.shape, s.inputs[k].strides)
          feeds.set(p.name, tensor(p.dtype, p.shape, allocate(p.dtype, offs.length).map((_, i) => b.data[offs[i]])))
        })
        const [result] = evaluateTE([s.intrin.compute], feeds)
        const out = region(s.output.buffer, s.output.base.map((e) => evalIn(ctx, e)), s.intrin.compute.shape, s.output.strides)
        const body = s.intrin.compute.body
        out.offs.forEach((off, i) => {
          if (s.intrin.mode === "update" && body.kind === "reduce") {
            const cenv = new Map([
              [body.combiner.lhs.name, out.b.data[off]],
              [body.combiner.rhs.name, result.data[i]],
            ])
            out.b.data[off] = out.b.conv(evalExpr(body.combiner.result, cenv, () => 0))
          } else out.b.data[off] = out.b.conv(result.data[i])
        })
        return
      }
    }
  }
  const top = exec(f.body, { env: new Map(), tags: new Map(), buffers, inTeam: false })
  while (!top.next().done) {
    // barriers outside any thread team are no-ops
  }
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
