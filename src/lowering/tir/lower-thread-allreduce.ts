// lowering.LowerThreadAllreduce (TVM's lower_thread_allreduce): the cross-thread reduction rule's
// last step — each output row summed from the T partials a block's threads left in shared memory —
// done by the whole block with warp shuffles instead of one thread's serial loop over T partials.
//
// It rewrites a serial loop marked with the pragma `thread_allreduce` (the rule sets it) of the form
//   for kk in [0, T): [if c:] X[i] = X[i] ⊕ rf[kk·S + e]      (⊕ add, max or min; c, i, e free of kk)
// where rf is a shared buffer of T·S elements (T partials of S rows) and T is the extent of the
// launch's threadIdx.x loops, a multiple of the warp (32) and a power of two. Before the thread loop
// that holds it, it adds one of T threads (t):
//   v[j] = rf[t·S + j]                              j < S, in registers
//   v[j] = v[j] ⊕ shfl_down(v[j], o)                o = 16, 8, 4, 2, 1: lane 0 of each warp has its warp's
//   barrier; if t % 32 == 0: rf[(t/32)·S + j] = v[j]; barrier
//   if T > 32: if t < 32: v[j] = rf[t·S + j]; v[j] = v[j] ⊕ shfl_down(v[j], o) for o = W/2 … 1 (W = T/32 warps);
//              if t == 0: rf[j] = v[j]; barrier
// and the marked loop becomes its body at kk = 0: X[i] = X[i] ⊕ rf[e], the row's total. Rows past
// the output (S rounded up) are reduced too and never read. A marked loop of another form stays the
// serial loop it is (its pragma is a comment in the emitted code). Pure.
import { add, bin, c, eq, exprKey, floordiv, floormod, freeVars, lt, mul, read, substitute, v, type BinOp, type Expr } from "../../ast/te/expr.js"
import { simplify } from "../../ast/te/simplify.js"
import { mapStmt, seq, substituteStmt, type Buffer, type PrimFunc, type Stmt } from "../../ast/tir/tir.js"
import { tirPass } from "./tir-pass.js"

/** The pragma the cross-thread rule puts on the reduction over a block's partials (templates/gpu/cross-thread-reduction.ts). */
export const THREAD_ALLREDUCE_PRAGMA = "thread_allreduce"

const WARP = 32
const FULL_MASK = 0xffffffff
/** Rows of partials a thread holds in registers through the shuffles, at most (the rule's rows knob stops at a warp). */
const MAX_ROWS = 32

type ForStmt = Stmt & { readonly kind: "for" }
type StoreStmt = Stmt & { readonly kind: "store" }

interface Match {
  readonly loop: ForStmt
  readonly op: BinOp
  readonly rf: Buffer
  readonly threads: number
  readonly rows: number
}

const isPow2 = (n: number) => n > 0 && (n & (n - 1)) === 0

/** The marked loop's form, when it is the one this pass rewrites. */
const matchLoop = (s: ForStmt, allocs: ReadonlyMap<string, Buffer>): Match | undefined => {
  if (s.forKind !== "serial" || !(s.pragmas ?? []).some(([k]) => k === THREAD_ALLREDUCE_PRAGMA)) return undefined
  if (s.min.kind !== "const" || s.min.value !== 0 || s.extent.kind !== "const") return undefined
  const T = s.extent.value
  if (T % WARP !== 0 || !isPow2(T)) return undefined
  const kk = s.var.name
  const uses = (e: Expr) => freeVars(e).has(kk)
  let st: Stmt = s.body
  if (st.kind === "if" && !st.else && !uses(st.cond)) st = st.then
  if (st.kind !== "store") return undefined
  const store: StoreStmt = st
  if (store.value.kind !== "bin" || !["add", "max", "min"].includes(store.value.op)) return undefined
  if (!["float32", "float64", "int32"].includes(store.value.dtype) || store.indices.some(uses)) return undefined
  const self = exprKey(read(store.buffer, store.indices, store.value.dtype))
  const { a, b } = store.value
  const other = exprKey(a) === self ? b : exprKey(b) === self ? a : undefined
  if (!other || other.kind !== "read" || other.indices.length !== 1 || other.dtype !== store.value.dtype) return undefined
  const rf = allocs.get(other.source)
  if (!rf || rf.scope !== "shared" || rf.shape.length !== 1 || rf.dtype !== store.value.dtype) return undefined
  // the partials' index is kk·S + e with e free of kk, and rf holds exactly T rows of S
  const at = (k: number) => simplify(substitute(other.indices[0], new Map([[kk, c(k)]])))
  const d1 = simplify(bin("sub", at(1), at(0)))
  const d2 = simplify(bin("sub", at(2), at(0)))
  if (d1.kind !== "const" || d2.kind !== "const" || d2.value !== 2 * d1.value || uses(at(0))) return undefined
  const S = d1.value
  if (S < 1 || S > MAX_ROWS || rf.shape[0] !== T * S) return undefined
  return { loop: s, op: store.value.op, rf, threads: T, rows: S }
}

/** The statements of the block's warp-shuffle reduction of rf's T rows of S into its row 0 (see the header). */
const allreduce = (m: Match, id: string): Stmt => {
  const { rf, threads: T, rows: S, op } = m
  const dt = rf.dtype
  const t = v(`${id}.t`)
  const val: Buffer = { name: `${id}.v`, dtype: dt, shape: [S], scope: "local" }
  const got: Buffer = { name: `${id}.s`, dtype: dt, shape: [1], scope: "local" }
  const perRow = (name: string, body: (j: Expr) => Stmt): Stmt => {
    const j = v(`${id}.${name}`)
    return S === 1 ? substituteStmt(body(j), new Map([[j.name, c(0)]])) : { kind: "for", var: j, min: c(0), extent: c(S), forKind: S <= 16 ? "unrolled" : "serial", body: body(j) }
  }
  const vj = (j: Expr) => read(val.name, [j], dt)
  const load = (name: string) => perRow(name, (j) => ({ kind: "store", buffer: val.name, indices: [j], value: read(rf.name, [add(mul(t, c(S)), j)], dt) }))
  const shuffles = (name: string, lanes: number): Stmt =>
    perRow(name, (j) => {
      const steps: Stmt[] = []
      for (let o = lanes / 2; o >= 1; o /= 2)
        steps.push(
          { kind: "shuffle", buffer: got.name, indices: [c(0)], value: vj(j), offset: o, width: WARP, mask: FULL_MASK },
          { kind: "store", buffer: val.name, indices: [j], value: bin(op, vj(j), read(got.name, [c(0)], dt)) },
        )
      return seq(steps)
    })
  const write = (name: string, at: (j: Expr) => Expr) => perRow(name, (j) => ({ kind: "store", buffer: rf.name, indices: [at(j)], value: vj(j) }))
  const W = T / WARP
  const body = seq([
    load("j0"),
    shuffles("j1", WARP),
    { kind: "barrier" },
    { kind: "if", cond: eq(floormod(t, c(WARP)), c(0)), then: write("j2", (j) => add(mul(floordiv(t, c(WARP)), c(S)), j)) },
    { kind: "barrier" },
    ...(W > 1
      ? [
          { kind: "if", cond: lt(t, c(WARP)), then: seq([load("j3"), shuffles("j4", W), { kind: "if", cond: eq(t, c(0)), then: write("j5", (j) => j) }]) } as Stmt,
          { kind: "barrier" } as Stmt,
        ]
      : []),
  ])
  return { kind: "for", var: t, min: c(0), extent: c(T), forKind: "thread", thread: "threadIdx.x", body: { kind: "allocate", buffer: val, body: { kind: "allocate", buffer: got, body } } }
}

/** The threadIdx.x loops at the top of a launch's statement `s` (not inside another thread loop): their widest extent. */
const widestThreadX = (s: Stmt): number => {
  switch (s.kind) {
    case "for":
      if (s.forKind === "thread" && s.thread === "threadIdx.x") return s.extent.kind === "const" ? s.extent.value : Infinity
      return widestThreadX(s.body)
    case "seq":
      return Math.max(0, ...s.body.map(widestThreadX))
    case "if":
      return Math.max(widestThreadX(s.then), s.else ? widestThreadX(s.else) : 0)
    case "allocate":
    case "let":
      return widestThreadX(s.body)
    default:
      return 0
  }
}

export const lowerThreadAllreduceStmt = (body: Stmt): Stmt => {
  let n = 0
  const allocs = new Map<string, Buffer>()
  // the block loops' bodies: the siblings where a marked loop's thread loop sits
  const rec = (s: Stmt, launch: Stmt | undefined): Stmt => {
    switch (s.kind) {
      case "allocate": {
        allocs.set(s.buffer.name, s.buffer)
        const b = rec(s.body, launch)
        return b === s.body ? s : { ...s, body: b }
      }
      case "let": {
        const b = rec(s.body, launch)
        return b === s.body ? s : { ...s, body: b }
      }
      case "if": {
        const then = rec(s.then, launch)
        const otherwise = s.else ? rec(s.else, launch) : undefined
        return then === s.then && otherwise === s.else ? s : { ...s, then, ...(otherwise ? { else: otherwise } : {}) }
      }
      case "seq": {
        const out = s.body.map((x) => rec(x, launch))
        return out.every((y, k) => y === s.body[k]) ? s : seq(out)
      }
      case "for": {
        if (s.forKind === "thread" && s.thread?.startsWith("blockIdx")) {
          const b = rec(s.body, s.body)
          return b === s.body ? s : { ...s, body: b }
        }
        if (!(s.forKind === "thread" && s.thread === "threadIdx.x") || launch === undefined) {
          const b = rec(s.body, launch)
          return b === s.body ? s : { ...s, body: b }
        }
        // a threadIdx.x loop of a launch: its marked loops, where they match, each get the block's reduction before it
        const found: Match[] = []
        const inner = mapStmt(s.body, (x) => {
          if (x.kind !== "for") return undefined
          const m = matchLoop(x, allocs)
          if (!m || m.threads < widestThreadX(launch) || s.extent.kind !== "const" || s.extent.value > m.threads) return undefined
          found.push(m)
          return substituteStmt(x.body, new Map([[x.var.name, c(0)]]))
        })
        if (found.length !== 1) return s
        return seq([allreduce(found[0], `${found[0].rf.name}.allreduce${n++}`), { ...s, body: inner }])
      }
      default:
        return s
    }
  }
  return rec(body, undefined)
}

export const lowerThreadAllreduce = tirPass("lowering.LowerThreadAllreduce", 1, (f: PrimFunc) => ({ ...f, body: lowerThreadAllreduceStmt(f.body) }))
