// A fused group → one PrimFunc: each node's TE compute chained, the elementwise/injective stages
// inlined into their consumers, reductions (the anchor: conv, matmul, pooling) computed at root,
// the target's default schedule applied, then the target's TIR pipeline (its backend's, which every
// caller names: a default here once lowered through options other than compilation's) under the
// caller's PassConfig. Groups with an op that has no compute run through the
// named fallback: their nodes' reference kernels.
import type { Graph, Node } from "../ast/graph/graph.js"
import type { ValueType } from "../ast/graph/op.js"
import type { FusedGraph, FusedGroup } from "../rewrite/fuse-ops.js"
import * as S from "../ast/schedule/schedule.js"
import type { ComputeTensor, TeTensor } from "../ast/te/tensor.js"
import type { Tensor as Constant } from "../ast/graph/tensor.js"
import { IllFormedComputeError, placeholder } from "../ast/te/tensor.js"
import { exprKey, sameExprKey } from "../ast/te/expr.js"
import type { PrimFunc } from "../ast/tir/tir.js"
import { lowerSync } from "./lower.js"
import { attrsOf, computeFor, MULTI_OUTPUT, NoComputeError } from "./op-library.js"
import { INT64_EXACT_IN_DOUBLE } from "../ast/graph/ops/exact-int64.js"
import { indexInputOf } from "./index-checks.js"
import { interruptedAt, type PassConfigShape } from "../rewrite/pass.js"
import { runTirSync, type TirPass } from "./tir/tir-pass.js"

export interface CompiledKernel {
  readonly kind: "compiled"
  readonly group: number
  /** `k{group}`: a name safe in every target language. */
  readonly name: string
  readonly func: PrimFunc
  /** Graph values bound to the function's params, in param order (inputs, then outputs). */
  readonly args: readonly string[]
  readonly outputs: readonly string[]
  readonly schedule: S.Schedule
}

export interface FallbackKernel {
  readonly kind: "fallback"
  readonly group: number
  readonly name: string
  readonly nodes: readonly Node[]
  /** Why the group has no compiled kernel (op and what is missing). */
  readonly reason: string
}

export type GroupKernel = CompiledKernel | FallbackKernel

/** A schedule for a group's TE program (the default one, or a tuned one). */
export type ScheduleFn = (outputs: readonly ComputeTensor[], base: S.Schedule, group: FusedGroup) => S.Schedule

const staticShape = (t: ValueType, what: string): number[] =>
  t.shape.map((d) => {
    if (typeof d !== "number") throw new NoComputeError({ reason: `${what} has the symbolic dim '${d}'` })
    return d
  })

/** The base schedule: non-reduction intermediates inlined, reductions and outputs at root. */
export const baseSchedule = (outputs: readonly ComputeTensor[]): S.Schedule => {
  let s = S.createSchedule(outputs)
  const outNames = new Set(outputs.map((o) => o.name))
  for (const name of s.order) {
    const st = s.stages.get(name)!
    if (!outNames.has(name) && st.op.body.kind !== "reduce") s = S.computeInline(s, name)
  }
  return s
}

/** A plain default: parallel over the outermost data loop of every root stage. */
export const defaultCpuSchedule: ScheduleFn = (_outputs, base) => {
  let s = base
  for (const name of s.order) {
    const st = s.stages.get(name)!
    if (st.attach.kind !== "root") continue
    const first = st.leaf.find((a) => st.axes.get(a)!.type === "data")
    if (first && st.axes.get(first)!.extent > 1) s = S.parallel(s, name, first)
  }
  return s
}

/** A group's TE program: its outputs and which graph value each placeholder holds. */
export interface GroupTE {
  readonly outputs: readonly ComputeTensor[]
  /** `p{k}` → graph value. */
  readonly placeholders: ReadonlyMap<string, string>
}

/** A Cast / CastLike from a float (to int64: wraps past ±2^63, which a double does not). */
const castOfFloat = (graph: Graph, n: Node): boolean => {
  if (n.op !== "Cast" && n.op !== "CastLike") return false
  const d = graph.valueTypes.get(n.inputs[0])?.dtype ?? graph.initializers.get(n.inputs[0])?.dtype
  return d === "float32" || d === "float64" || d === "float16" || d === "bfloat16"
}

/** Which 64-bit integer dtypes a target's code computes and stores exactly (int64_t / uint64_t, or their wasm i64 and js BigInt equivalents): its Codegen's `exactInt64` / `exactUint64`. */
export interface Exact64 {
  readonly int64: boolean
  readonly uint64: boolean
}

/** No 64-bit integer dtype exact in compiled code: int64 / uint64 computed on the reference kernels. */
export const NO_EXACT64: Exact64 = { int64: false, uint64: false }


/**
 * A node's constant inputs' data, each read only when its op's compute asks for it (a few small
 * ones: scales, bounds, zero points): a weight still deferred (deferred.ts) stays so, and the
 * artifact writes it once, into its constants.
 */
const constantsOf = (inputs: readonly string[], initializers: ReadonlyMap<string, Constant>): readonly (ArrayLike<number> | undefined)[] => {
  const out: (ArrayLike<number> | undefined)[] = []
  inputs.forEach((v, k) => {
    const t = initializers.get(v)
    Object.defineProperty(out, k, { enumerable: true, get: () => t?.data })
  })
  return out
}
/** Builds the TE program of a group (throws NoComputeError when an op has no compute, IllFormedComputeError when one is built wrong). */
export const buildGroupTE = (fused: FusedGraph, group: FusedGroup, exact: Exact64 = NO_EXACT64): GroupTE => {
  const { graph } = fused
  const nodes = group.nodes.map((n) => graph.nodes.find((m) => m.name === n)!)
  const typeOf = (v: string): ValueType => {
    const t = graph.valueTypes.get(v) ?? graph.initializers.get(v)
    if (!t) throw new NoComputeError({ reason: `value '${v}' has no known type` })
    return t
  }
  // ONNX rounds float16/bfloat16 after every op; a fused kernel computing in float32 would round
  // once at the end, so such groups keep the per-op reference kernels
  for (const n of nodes)
    for (const o of n.outputs)
      if (o !== "" && (graph.valueTypes.get(o)?.dtype === "float16" || graph.valueTypes.get(o)?.dtype === "bfloat16"))
        throw new NoComputeError({ reason: `${n.op} computes in ${graph.valueTypes.get(o)!.dtype} (rounded after every op; not fused)` })
  // int64 / uint64 compute exactly on a target whose code does (`exact`: int64_t / uint64_t on c,
  // i64 on wasm, BigInt on js; int64 on cuda). Where one is a double (uint64 on cuda, and any
  // target without `exact`) it is exact for moves, selections, indices and casts of integers
  // (INT64_EXACT_IN_DOUBLE), not for arithmetic past 2^53 nor for a float's wrap past 2^63, so a
  // group with int64 arithmetic or a Cast from a float keeps the reference kernels, which are exact
  // (ops/exact-int64.ts); a uint64 one does whatever it computes, and a group reading uint64 too
  // (its buffers are the target's storage: uint64_t in the c family, which cuda's arena is not).
  // The executor runs a compiled group on the reference kernels instead should an argument hold a
  // value that is not a double on a device without exact buffers of its dtype.
  for (const n of nodes)
    for (const o of n.outputs) {
      const d = o === "" ? undefined : graph.valueTypes.get(o)?.dtype
      if ((d === "uint64" && !exact.uint64) || (d === "int64" && !exact.int64 && (!INT64_EXACT_IN_DOUBLE.has(n.op) || castOfFloat(graph, n))))
        throw new NoComputeError({ reason: `${n.op} computes ${d} (exact beyond 2^53 only on the reference kernels and the targets whose code computes ${d}; not compiled)` })
    }
  if (!exact.uint64)
    for (const v of group.inputs)
      if ((graph.valueTypes.get(v) ?? graph.initializers.get(v))?.dtype === "uint64")
        throw new NoComputeError({ reason: `'${v}' is uint64, which this target's code does not hold exactly; not compiled` })
  for (const v of [...group.inputs, ...group.outputs]) {
    const t = graph.valueTypes.get(v) ?? graph.initializers.get(v)
    if (t && t.shape.some((d) => d === 0)) throw new NoComputeError({ reason: `'${v}' is empty (a zero-size dim): nothing to compile` })
  }
  const used = new Set<string>(graph.outputs.map((o) => o.name))
  for (const m of graph.nodes) for (const i of m.inputs) used.add(i)
  const tensors = new Map<string, TeTensor>()
  group.inputs.forEach((v, k) => {
    const t = typeOf(v)
    tensors.set(v, placeholder(`p${k}`, staticShape(t, `input ${k}`), t.dtype))
  })
  let counter = 0
  for (const n of nodes) {
    const compute = computeFor(n)
    if (!compute) throw new NoComputeError({ reason: `no compute for ${n.op}` })
    // an index from data is checked by the executor before the kernel runs: it must be an argument
    const index = indexInputOf(n)
    if (index !== undefined && index !== "" && !group.inputs.includes(index))
      throw new NoComputeError({ reason: `${n.op} '${n.name}' indexes by '${index}', computed inside the group, where its indices cannot be checked` })
    // a node computes its first output (its compute the last one made), further outputs may be
    // declared as long as nothing reads them; a multi-output op (Split) computes each, in order
    const multi = MULTI_OUTPUT.has(n.op)
    const extra = n.outputs.slice(1).filter((o) => o !== "" && used.has(o))
    if (multi ? n.outputs.some((o) => o === "") : n.outputs[0] === "" || extra.length)
      throw new NoComputeError({ reason: multi ? `${n.op} with an omitted output` : `${n.op} with ${1 + extra.length} outputs in use` })
    const outs = n.outputs.map((o) => typeOf(o))
    const base = `t${counter++}`
    let sub = 0
    const made = compute({
      node: n,
      attrs: attrsOf(n),
      inputs: n.inputs.map((i) => (i === "" ? undefined : tensors.get(i))),
      outputs: outs.map((t) => ({ dtype: t.dtype, shape: staticShape(t, `output of ${n.op}`) })),
      name: (suffix) => (suffix ? `${base}_${suffix}${sub++}` : base),
      constants: constantsOf(n.inputs, graph.initializers),
      opset: graph.opset,
    })
    if (multi) n.outputs.forEach((o, k) => tensors.set(o, made[k]))
    else tensors.set(n.outputs[0], made[made.length - 1])
  }
  const outputs = group.outputs.map((v) => {
    const t = tensors.get(v)
    if (!t || t.kind !== "compute") throw new NoComputeError({ reason: `output '${v}' is not computed in the group` })
    return t
  })
  return { outputs, placeholders: new Map(group.inputs.map((v, k) => [`p${k}`, v] as const)) }
}

/**
 * What a group's PrimFunc depends on besides its name: every tensor of its TE program (name,
 * shape, dtype, body) and the schedule's steps. Groups with equal keys (ResNet's repeated blocks)
 * lower to the same function under another name. (The definition: the memo finds the same
 * functions through `loweringHead` and `sameExprKey` of the bodies, without writing the bodies.)
 */
export const loweringKey = (te: GroupTE, s: S.Schedule): string =>
  `${loweringTensors(te).map((t) => `${tensorHead(t)}${t.kind === "compute" ? ` ${exprKey(t.body)}` : ""}`).join("\n")}\n${S.serializeSteps(s.steps)}`

/** The TE program's tensors, each once, inputs before the tensors computed from them. */
const loweringTensors = (te: GroupTE): TeTensor[] => {
  const seen = new Set<string>()
  const out: TeTensor[] = []
  const visit = (t: TeTensor) => {
    if (seen.has(t.name)) return
    seen.add(t.name)
    if (t.kind === "compute") t.inputs.forEach(visit)
    out.push(t)
  }
  te.outputs.forEach(visit)
  return out
}

const tensorHead = (t: TeTensor): string => `${t.kind} ${t.name} ${t.dtype}[${t.shape.join(",")}]`

/**
 * The groups lowered so far in one lowering (for one pipeline and config), by loweringKey without
 * its bodies: the candidates under a head are told apart by comparing bodies (sameExprKey), so a
 * group is lowered again exactly when no earlier one has its loweringKey — and nothing is written
 * out for a group whose head is new (ResNet-50: ~80 ms of JSON a compile before).
 */
export type LoweringMemo = Map<string, { readonly tensors: readonly TeTensor[]; readonly func: PrimFunc }[]>

const sameBodies = (xs: readonly TeTensor[], ys: readonly TeTensor[]): boolean =>
  xs.length === ys.length &&
  xs.every((x, i) => {
    const y = ys[i]
    return x.kind === "compute" ? y.kind === "compute" && sameExprKey(x.body, y.body) : y.kind !== "compute"
  })

/**
 * The group's PrimFunc for a schedule of its TE program, with the TIR pipeline `tir` (the target
 * backend's) run under `config` (over the default PassConfig). A memo is for one pipeline and config.
 */
export const lowerGroupSchedule = (
  te: GroupTE,
  group: FusedGroup,
  s: S.Schedule,
  tir: TirPass<unknown>,
  memo?: LoweringMemo,
  config?: Partial<PassConfigShape>,
): CompiledKernel => {
  const name = `k${group.id}`
  const tensors = memo && loweringTensors(te)
  const head = tensors && `${tensors.map(tensorHead).join("\n")}\n${S.serializeSteps(s.steps)}`
  const bucket = head !== undefined ? memo!.get(head) : undefined
  const known = tensors && bucket?.find((k) => sameBodies(k.tensors, tensors))?.func
  const func = known ? { ...known, name } : runTirSync(tir, lowerSync(s, name), config)
  if (head !== undefined && !known) {
    if (bucket) bucket.push({ tensors: tensors!, func })
    else memo!.set(head, [{ tensors: tensors!, func }])
  }
  const args = func.params.map((p) => te.placeholders.get(p.name) ?? group.outputs[te.outputs.findIndex((o) => o.name === p.name)])
  return { kind: "compiled", group: group.id, name, func, args, outputs: group.outputs, schedule: s }
}

/**
 * Why a group runs through its nodes' reference kernels instead of a compiled kernel: an op without
 * a compute (or a configuration its compute declines), an illegal schedule, an ill-formed compute.
 * Anything else lowering throws is a bug, and propagates.
 */
export type GroupFallbackError = NoComputeError | S.ScheduleError | IllFormedComputeError

export const isGroupFallbackError = (e: unknown): e is GroupFallbackError =>
  e instanceof NoComputeError || e instanceof S.ScheduleError || e instanceof IllFormedComputeError

const byName = new WeakMap<Graph, ReadonlyMap<string, Graph["nodes"][number]>>()
/** A graph's nodes by name (once per graph: a find per group is quadratic in the graph's size). */
const nodesByName = (g: Graph): ReadonlyMap<string, Graph["nodes"][number]> => {
  let m = byName.get(g)
  if (!m) byName.set(g, (m = new Map(g.nodes.map((n) => [n.name, n]))))
  return m
}

/** A group's kernel through the TIR pipeline `tir` (its target backend's: `Codegen.tir(target)`). */
export const lowerGroup = (
  fused: FusedGraph,
  group: FusedGroup,
  tir: TirPass<unknown>,
  schedule: ScheduleFn = defaultCpuSchedule,
  memo?: LoweringMemo,
  config?: Partial<PassConfigShape>,
  exact: Exact64 = NO_EXACT64,
): GroupKernel => {
  const name = `k${group.id}`
  const nodes = group.nodes.map((n) => nodesByName(fused.graph).get(n)!)
  try {
    const te = buildGroupTE(fused, group, exact)
    return lowerGroupSchedule(te, group, schedule(te.outputs, baseSchedule(te.outputs), group), tir, memo, config)
  } catch (e) {
    if (isGroupFallbackError(e))
      return { kind: "fallback", group: group.id, name, nodes, reason: `${nodes.map((n) => n.op).join("+")}: ${e.message}` }
    throw e
  }
}

/**
 * Every group lowered (a group without a compiled kernel is a fallback: reference kernels), its
 * TIR pipeline run under `config` — inside compilation the caller's PassConfig, so that its opt
 * level, disabled passes and instruments reach the TIR passes.
 */
export const lowerGroups = (
  fused: FusedGraph,
  tir: TirPass<unknown>,
  schedule?: ScheduleFn,
  config?: Partial<PassConfigShape>,
  /** Which of int64 / uint64 the target computes exactly (its Codegen's `exactInt64` / `exactUint64`). */
  exact: Exact64 = NO_EXACT64,
): GroupKernel[] => {
  const memo: LoweringMemo = new Map()
  return fused.groups.map((g) => {
    // (a stop request is seen between groups: InterruptedError, thrown for the caller to fail with)
    const stop = interruptedAt(config?.interrupt, `lowering group ${g.id} (${g.ops.slice(0, 3).join("+")}${g.ops.length > 3 ? "+…" : ""})`)
    if (stop) throw stop
    return lowerGroup(fused, g, tir, schedule, memo, config, exact)
  })
}

export type { Graph }
