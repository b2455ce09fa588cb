// Tuning tasks from a compiled Program: every compiled group built around a reduction (conv,
// matmul, pooling) gives its TE program, base schedule and FLOPs; identical workloads share a
// task. Each task comes with what measuring it needs: how to lower a config to a PrimFunc, which
// params are outputs, and a reference — the group's graph nodes through their reference kernels
// on the same inputs (fast, unlike the TE evaluator).
import { resolveNode, runGraph } from "../ast/graph/evaluate.js"
import type { Node } from "../ast/graph/graph.js"
import type { Tensor } from "../ast/graph/tensor.js"
import type { PrimFunc } from "../ast/tir/tir.js"
import type { Program } from "../lowering/program.js"
import { baseSchedule, buildGroupTE, lowerGroupSchedule, type GroupTE } from "../lowering/lower-group.js"
import type { Config, ScheduleTarget, Template } from "../lowering/templates/template.js"
import { keyOf, lanesAndCores, type Target, type TargetKind } from "../ast/target.js"
import { BACKENDS, type Backend } from "../backend/index.js"
import { NoComputeError } from "../lowering/op-library.js"
import type { FusedGroup } from "../rewrite/fuse-ops.js"
import { nodeFlops } from "../rewrite/report.js"
import { configKey, extractTasks, type GroupProgram, type Task } from "./task.js"
import type { Interrupt } from "../ast/graph/errors.js"
import { interruptedAt } from "../rewrite/pass.js"

export interface TaskRunner {
  readonly task: Task
  /** The group's PrimFunc for a config (throws when the schedule cannot be built). */
  readonly lowerConfig: (config: Config) => PrimFunc
  /** Names of the params the function writes. */
  readonly outputs: ReadonlySet<string>
  /** Expected outputs (by param name) for inputs given by param name. */
  readonly reference: (inputs: ReadonlyMap<string, Tensor>) => ReadonlyMap<string, Tensor>
  /**
   * What compile sized the group's defaults from (scheduleTargetOf): `task.template.defaults(task.knobs,
   * target)` is the config an untuned compile applies.
   */
  readonly target: ScheduleTarget
}

/**
 * The ScheduleTarget a target's schedules size their defaults from: its backend's (a CPU's lanes,
 * cores, FMA pipes × latency, registers, L2, FMA and 8-bit dot instructions: what compile uses),
 * else its lanes and cores. With the kind, as tasks are keyed.
 */
export const scheduleTargetOf = (target: Target): ScheduleTarget & { readonly kind: string } => {
  const codegen = (BACKENDS[target.kind] as Backend<TargetKind>).codegen
  const own = codegen?.scheduleTarget?.(target)
  const { vectorLanes, cores } = lanesAndCores(target)
  return { ...(own ?? { vectorLanes: Math.max(vectorLanes, 1), cores }), kind: target.kind }
}

/** The group's nodes run through their reference kernels; placeholders read `inputs` (or constants). */
const groupReference = (program: Program, group: FusedGroup, te: GroupTE) => {
  const { graph } = program
  const nodes: Node[] = group.nodes.map((n) => graph.nodes.find((m) => m.name === n)!)
  const outNames = te.outputs.map((o) => o.name)
  return (inputs: ReadonlyMap<string, Tensor>): ReadonlyMap<string, Tensor> => {
    const env = new Map<string, Tensor>()
    for (const [param, value] of te.placeholders) {
      // a param the lowered function does not read (a constant the compute baked in) keeps its value
      const t = inputs.get(param) ?? graph.initializers.get(value)
      if (t) env.set(value, t)
    }
    for (const n of nodes) {
      const { def, attrs } = resolveNode(n)
      const ins = n.inputs.map((v) => (v === "" ? undefined : (env.get(v) ?? graph.initializers.get(v))))
      const outs = def.kernel({ node: n.name, attrs, opset: graph.opset, inputs: ins, outputs: n.outputs.length, runSubgraph: (g, f) => runGraph(g, f) })
      n.outputs.forEach((o, j) => o !== "" && outs[j] && env.set(o, outs[j]))
    }
    return new Map(group.outputs.map((v, k) => [outNames[k], env.get(v)!] as const))
  }
}

/** "Conv 3x3/2 depthwise → 1x24x56x56x4": the anchor op, its window and stride, and the output. */
const describe = (program: Program, group: FusedGroup, fallback: string): string => {
  const { graph } = program
  const n = graph.nodes.find((m) => m.name === group.anchor)
  if (n?.op === "ConvWinogradNCHWc") return `Conv 3x3 winograd → ${graph.valueTypes.get(group.outputs[group.outputs.length - 1])?.shape.join("x") ?? "?"}`
  if (!n || (n.op !== "Conv" && n.op !== "ConvNCHWc")) return fallback
  const w = (graph.valueTypes.get(n.inputs[1]) ?? graph.initializers.get(n.inputs[1]))?.shape as number[] | undefined
  if (!w) return fallback
  const [kh, kw, inPerOut] = n.op === "Conv" ? [w[2], w[3], w[1]] : [w[2], w[3], w[1] * w[4]]
  const strides = (resolveNode(n).attrs as { strides?: readonly number[] }).strides
  const stride = strides && strides.some((s) => s !== 1) ? `/${strides[0]}` : ""
  const out = graph.valueTypes.get(group.outputs[group.outputs.length - 1])?.shape.join("x") ?? "?"
  return `Conv ${kh}x${kw}${stride}${inPerOut === 1 ? " depthwise" : ""} → ${out}`
}

/**
 * The tuning tasks of a program compiled for `target` (the same vector lanes and cores that
 * compileGraph was given, so the workload keys match the ones it looks records up by). With
 * `interrupt`, each lowering of a config checks the stop flag before it starts and between its
 * TIR passes, and throws InterruptedError once it is set: a config costs up to seconds of
 * synchronous CPU to lower (a tuner's batch of them many times that), which a stop request must
 * not wait for.
 */
export const tasksOfProgram = (program: Program, target: Target, interrupt?: Interrupt): TaskRunner[] => {
  const codegen = (BACKENDS[target.kind] as Backend<TargetKind>).codegen
  // a target that compiles nothing (the interpreter) has no schedules to tune
  if (!codegen) return []
  const tir = codegen.tir(target)
  const scheduleTarget = scheduleTargetOf(target)
  const { fused, graph } = program
  const byName = new Map(graph.nodes.map((n) => [n.name, n] as const))
  const built = new Map<number, { group: FusedGroup; te: GroupTE }>()
  const groups: GroupProgram[] = []
  for (const k of program.kernels) {
    if (k.kind !== "compiled") continue
    const group = fused.groups.find((g) => g.id === k.group)!
    let te: GroupTE
    try {
      te = buildGroupTE(fused, group)
    } catch (e) {
      if (e instanceof NoComputeError) continue
      throw e
    }
    built.set(group.id, { group, te })
    const flops = group.nodes.reduce((s, n) => s + nodeFlops(graph, byName.get(n)!), 0)
    groups.push({ group, outputs: te.outputs, base: baseSchedule(te.outputs), flops })
  }
  // (a target with its own tuning template files its tasks under keyOf, the key compileGraph's lookup uses)
  const ownTemplate = codegen.tuningTemplate as ((t: Target, base: GroupProgram["base"]) => Template) | undefined
  const space = ownTemplate ? { key: keyOf(target), templateOf: (base: GroupProgram["base"]) => ownTemplate(target, base) } : undefined
  return extractTasks(groups, scheduleTarget, space).map((task) => {
    const { group, te } = built.get(task.groups[0])!
    return {
      task: { ...task, label: describe(program, group, task.label) },
      lowerConfig: (config) => {
        const stop = interruptedAt(interrupt, `lowering a config of task ${task.id}`)
        if (stop) throw stop
        return lowerGroupSchedule(te, group, task.template.apply(task.outputs, task.base, config), tir, undefined, interrupt ? { interrupt } : undefined).func
      },
      outputs: new Set(te.outputs.map((o) => o.name)),
      reference: groupReference(program, group, te),
      target: scheduleTarget,
    }
  })
}

/**
 * `lower` keeping the functions of the last `kept` configs it lowered (by their canonical JSON; a
 * config that fails to lower is not kept: it throws again). A tune lowers a config it measures
 * twice — the session for its build, then the tuner for its feature row when it learns the result
 * (the warm-up round's configs and xgb's ε-random ones were never featurized before) — and a
 * ResNet-18 Winograd config costs 0.1–25 s of CPU to lower (an `sk_unroll: 512` sketch). Lowering
 * is a pure function of the config, so the kept function is the one lowering again would give:
 * the same candidates, the same feature rows. Kept per task runner, for one tune: a lowered
 * function can hold megabytes of TIR, so `kept` stays a few batches.
 */
export const lowerRecent = <F>(lower: (config: Config) => F, kept: number): ((config: Config) => F) => {
  const recent = new Map<string, F>()
  return (config) => {
    const key = configKey(config)
    const hit = recent.get(key)
    if (hit !== undefined) {
      // (most recently used last)
      recent.delete(key)
      recent.set(key, hit)
      return hit
    }
    const f = lower(config)
    recent.set(key, f)
    if (recent.size > kept) recent.delete(recent.keys().next().value!)
    return f
  }
}
