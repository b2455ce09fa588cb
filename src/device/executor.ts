// The graph executor: a compiled model is its kernels (one per fused group), its memory plan and
// its constants, run on a device module that owns its memory. At creation the executor reserves
// the planned storage blocks, the constants and the model's inputs and outputs in the module's
// memory, views every planned value as a typed buffer of its block, and copies the constants in
// once. Per run it binds the inputs and outputs, calls the kernels in group order — compiled
// kernels on the module's buffers, fallback groups through the reference kernels on the host (their
// inputs read from the device, their outputs written back) — and reads the outputs back.
import { Data } from "effect"
import { allocate, isBigArray, storageBytes, type DeviceArray, type DType, type TypedArray } from "../ast/graph/dtype.js"
import { checkInterrupt, type Interrupt } from "../ast/graph/errors.js"
import { kernelError, newRunLimits, resolveNode, roundNarrow, subgraphRunner } from "../ast/graph/evaluate.js"
import type { Graph } from "../ast/graph/graph.js"
import { sizeOf, wideTensor, type Tensor } from "../ast/graph/tensor.js"
import { NodeError } from "../ast/graph/errors.js"
import { runKernel } from "../ast/graph/ops/exact-int64.js"
import { indexChecks, type IndexCheck } from "../lowering/index-checks.js"
import type { RunnableProgram } from "../lowering/program.js"
import type { DeviceBuffer, DeviceModule, KernelCall, TimeOptions } from "./device.js"

export class ExecutorError extends Data.TaggedError("ExecutorError")<{ readonly where: string; readonly reason: string }> {
  override get message(): string {
    return `executor: ${this.where}: ${this.reason}`
  }
}

const staticShape = (g: Graph, v: string): number[] | undefined => {
  const t = g.valueTypes.get(v) ?? g.inputs.find((i) => i.name === v)?.type
  return t && t.shape.every((d) => typeof d === "number") ? (t.shape as number[]) : undefined
}

export interface Executor {
  /**
   * Runs the model on `feeds`. Each output is a fresh array, or the caller's array for it in
   * `into` (same dtype and element count), written in place: where the device writes host memory
   * (c, js) the kernels write it directly — a fresh array's pages are faulted in as the kernel
   * first writes them, which for a memory-bound op (a softmax over 1.9 MB) cost more than the op.
   * A caller that passes the same arrays again gets them overwritten by the new run; one that
   * feeds an output array back as an input gets it written after the run. With `interrupt`, a set
   * flag stops the run between kernels (InterruptedError).
   */
  readonly run: (feeds: ReadonlyMap<string, Tensor>, into?: ReadonlyMap<string, TypedArray>, interrupt?: Interrupt) => Map<string, Tensor>
  /** Bytes of the planned storage blocks (reserved once). */
  readonly plannedBytes: number
  /** The module the kernels run on. */
  readonly module: DeviceModule
  /**
   * Median seconds the last run's compiled kernels take on the device back to back, without its
   * copies, syncs and host kernels (the module's `timeSequence`, on the buffers that run used);
   * absent where the module has none. An ExecutorError before the first run.
   */
  readonly timeKernels?: (options?: TimeOptions) => number
}

/** A value's reserved buffer and its type (what the module's buffers do not tell the executor). */
interface Reserved {
  readonly buffer: DeviceBuffer
  readonly dtype: DType
  readonly shape: readonly number[]
}

/** Whether the module's buffers of `dtype` hold its exact values (int64_t / uint64_t: BigInt arrays). */
const exactOn = (mod: DeviceModule, dtype: DType): boolean => (dtype === "int64" ? mod.exactInt64 === true : dtype === "uint64" ? mod.exactUint64 === true : false)

/**
 * What a device is handed for a tensor: an int64's / uint64's exact values where its buffers of
 * that dtype hold them (c, js, wasm), else our storage (a device of doubles gets the nearest
 * doubles, and a kernel that would read them runs on the reference kernels instead: see run).
 */
const deviceData = (t: Tensor, mod: DeviceModule): DeviceArray => (t.exact !== undefined && exactOn(mod, t.dtype) ? t.exact : t.data)

/** A map of one run's entries over a fixed base, read as a copy of the base that the run changed: a key the run set or deleted hides the base's. */
export interface Overlay<V> {
  readonly get: (key: string) => V | undefined
  readonly has: (key: string) => boolean
  readonly set: (key: string, value: V) => void
  readonly delete: (key: string) => void
}

export const overlay = <V>(base: ReadonlyMap<string, V>): Overlay<V> => {
  const top = new Map<string, V | undefined>()
  return {
    get: (key) => (top.has(key) ? top.get(key) : base.get(key)),
    has: (key) => (top.has(key) ? top.get(key) !== undefined : base.has(key)),
    set: (key, value) => void top.set(key, value),
    delete: (key) => void top.set(key, undefined),
  }
}

export interface ExecutorOptions {
  /**
   * Run the kernels through the module's plan (one native call a run) where it has one and the
   * program allows it (see createExecutor). Default true; false: one module call a kernel always.
   */
  readonly plan?: boolean
}

export const createExecutor = (program: RunnableProgram, mod: DeviceModule, options: ExecutorOptions = {}): Executor => {
  const { graph, memory } = program
  for (const k of program.kernels)
    if (k.kind === "compiled" && !mod.kernels.has(k.name)) throw new ExecutorError({ where: `kernel ${k.name}`, reason: "is not loaded" })
  const typeOf = (v: string) => graph.valueTypes.get(v) ?? graph.inputs.find((i) => i.name === v)?.type ?? graph.initializers.get(v)
  // storage blocks sized for the largest view any value takes of them (storage classes differ from ONNX sizes)
  const blockBytes = new Array<number>(memory.storages.length).fill(0)
  for (const a of memory.values) {
    const t = graph.valueTypes.get(a.value)!
    blockBytes[a.storage] = Math.max(blockBytes[a.storage], sizeOf(t.shape as number[]) * storageBytes(t.dtype))
  }
  const sizes = blockBytes.map((b) => Math.max(8, Math.ceil(b / 8) * 8))
  // the model's own values with a static shape: constants, inputs, outputs (each a block of its own)
  const initializers = [...graph.initializers]
  const planned = new Set(memory.values.map((a) => a.value))
  const external = [...graph.inputs.map((i) => i.name), ...graph.outputs.map((o) => o.name)].filter(
    (v, k, all) => all.indexOf(v) === k && !graph.initializers.has(v) && !planned.has(v) && staticShape(graph, v) !== undefined,
  )
  const externalBytes = external.map((v) => sizeOf(staticShape(graph, v)!) * storageBytes(typeOf(v)!.dtype))
  const blocks = mod.reserve([...sizes, ...initializers.map(([, t]) => t.data.byteLength), ...externalBytes])
  const reserved = new Map<string, Reserved>()
  for (const a of memory.values) {
    const t = graph.valueTypes.get(a.value)!
    const shape = t.shape as number[]
    reserved.set(a.value, { buffer: mod.view(blocks[a.storage], t.dtype, sizeOf(shape)), dtype: t.dtype, shape })
  }
  // the constants, in the device's memory once
  const constants = new Map<string, Tensor>(graph.initializers)
  initializers.forEach(([name, t], j) => {
    const buffer = mod.view(blocks[sizes.length + j], t.dtype, t.data.length)
    mod.write(buffer, deviceData(t, mod))
    reserved.set(name, { buffer, dtype: t.dtype, shape: t.shape })
  })
  external.forEach((v, j) => {
    const t = typeOf(v)!
    const shape = staticShape(graph, v)!
    reserved.set(v, { buffer: mod.view(blocks[sizes.length + initializers.length + j], t.dtype, sizeOf(shape)), dtype: t.dtype, shape })
  })
  const constantBuffers = new Map(initializers.map(([name]) => [name, reserved.get(name)!.buffer] as const))
  const outputs = new Set(graph.outputs.map((o) => o.name))
  const inputs = new Set(graph.inputs.map((i) => i.name))
  // the data-given indices each compiled kernel reads by (lowering keeps them kernel arguments)
  const nodeByName = new Map(graph.nodes.map((n) => [n.name, n] as const))
  const checksOf = new Map<string, IndexCheck[]>()
  for (const k of program.kernels) {
    if (k.kind !== "compiled") continue
    const group = program.fused.groups.find((g) => g.id === k.group)
    const checks = (group?.nodes ?? []).flatMap((name) => {
      const n = nodeByName.get(name)
      return n ? indexChecks(graph, n) : []
    })
    for (const c of checks)
      if (!k.args.includes(c.input)) throw new ExecutorError({ where: `kernel ${k.name}`, reason: `the index input '${c.input}' of ${c.op} '${c.node}' is not one of its arguments, so it cannot be checked` })
    if (checks.length) checksOf.set(k.name, checks)
  }

  const groupNodes = new Map(
    program.kernels.map((k) => [k.name, k.kind === "fallback" ? k.nodes : (program.fused.groups.find((g) => g.id === k.group)?.nodes ?? []).map((name) => nodeByName.get(name)!)] as const),
  )

  // Each compiled kernel's arguments that are the same buffer every run: a constant's, or a planned
  // value's that is no model input or output — where no group can run on the host (no fallback
  // group, and the module's int64 / uint64 buffers exact: see run), so a host value is only a feed
  // or a constant and a planned value's buffer is its reserved one. The rest are bound per run
  // (onDevice). Looking every argument up per run took ~0.1 ms of MobileNetV2 int8's ~3.5 ms on c
  // (its 67 kernels' ~530 arguments).
  const noHostGroups = program.kernels.every((k) => k.kind === "compiled") && exactOn(mod, "int64") && exactOn(mod, "uint64")
  const fixedOf = new Map<string, readonly (DeviceBuffer | undefined)[]>()
  // (and its outputs among them, set on the device after it runs as onDevice would have bound them)
  const fixedOutputsOf = new Map<string, readonly (readonly [string, DeviceBuffer])[]>()
  for (const k of program.kernels) {
    if (k.kind !== "compiled" || !noHostGroups) continue
    const fixed = k.args.map((v) => constantBuffers.get(v) ?? (inputs.has(v) || outputs.has(v) ? undefined : reserved.get(v)?.buffer))
    fixedOf.set(k.name, fixed)
    fixedOutputsOf.set(k.name, k.args.flatMap((v, j) => (fixed[j] && k.outputs.includes(v) ? [[v, fixed[j]] as const] : [])))
  }

  // The plan: every kernel in one call of the module a run (c: one native call instead of one FFI
  // call a kernel, each boundary 2–4 µs with real kernels: docs/tuning.md). Where every group is
  // compiled, no kernel reads by a data-given index (those are checked on the host before the
  // kernel), and every argument has a reserved buffer: the kernels run on the reserved buffers
  // alone, the feeds copied into theirs before and the outputs read out of theirs after. Only
  // while the module's `run` is the one it was made with: a caller that wraps `module.run` in place
  // to time each kernel (the tuner's network check, run-profile) gets every call through it.
  const planArgs = program.kernels.flatMap((k) => (k.kind === "compiled" ? [{ kernel: k.name, args: k.args.map((v) => constantBuffers.get(v) ?? reserved.get(v)?.buffer) }] : []))
  const planCalls =
    options.plan !== false && mod.plan && noHostGroups && checksOf.size === 0 && planArgs.every((c) => c.args.every((b) => b !== undefined)) ? (planArgs as KernelCall[]) : undefined
  const runPlan = planCalls && mod.plan ? mod.plan(planCalls) : undefined
  const moduleRun = mod.run

  /** The compiled kernels' calls of the latest run (its buffers the reserved ones: valid while the module lives). */
  let lastCalls: readonly KernelCall[] | undefined

  /** A run through the plan: the feeds into their reserved buffers, the one call, the outputs copied out of theirs. */
  const runThroughPlan = (run: () => void, feeds: ReadonlyMap<string, Tensor>, into: ReadonlyMap<string, TypedArray> | undefined, interrupt: Interrupt | undefined): Map<string, Tensor> => {
    checkInterrupt(interrupt, () => "the plan's kernels")
    for (const i of graph.inputs) {
      const t = feeds.get(i.name)
      if (!t) throw new ExecutorError({ where: `input '${i.name}'`, reason: "is missing" })
      const r = reserved.get(i.name)
      // (an input no kernel reads, of no static shape: nothing to copy)
      if (!r) continue
      if (t.data.length !== sizeOf(r.shape)) throw new ExecutorError({ where: `value '${i.name}'`, reason: `has ${t.data.length} elements, its type says ${sizeOf(r.shape)}` })
      mod.write(r.buffer, deviceData(t, mod))
    }
    run()
    lastCalls = planCalls
    return new Map(
      graph.outputs.map((o) => {
        // (an output that is an input or a constant: the host's tensor, as a per-kernel run gives it)
        const r = reserved.get(o.name)!
        const h = feeds.get(o.name) ?? constants.get(o.name)
        const data = h ? undefined : mod.read(r.buffer)
        // (an int64_t / uint64_t buffer: its values copied, exactly, as onHost does)
        const t: Tensor = h ?? (isBigArray(data!) ? wideTensor(r.dtype === "uint64" ? "uint64" : "int64", r.shape, data.slice()) : { dtype: r.dtype, shape: r.shape, data: data as TypedArray })
        const a = into?.get(o.name)
        if (a) {
          a.set(t.data as never)
          return [o.name, { ...t, data: a }] as const
        }
        // (the reserved buffer is written again by the next run: copied out)
        return [o.name, h || isBigArray(data!) ? t : { ...t, data: t.data.slice() }] as const
      }),
    )
  }
  const run = (feeds: ReadonlyMap<string, Tensor>, into?: ReadonlyMap<string, TypedArray>, interrupt?: Interrupt): Map<string, Tensor> => {
    const limits = newRunLimits(interrupt)
    const calls: KernelCall[] = []
    for (const [name, a] of into ?? []) {
      const r = reserved.get(name)
      if (!outputs.has(name) || !r) throw new ExecutorError({ where: `output array '${name}'`, reason: "is no output of the model with a static shape" })
      if (a.length !== sizeOf(r.shape) || a.constructor !== allocate(r.dtype, 0).constructor) throw new ExecutorError({ where: `output array '${name}'`, reason: `is a ${a.constructor.name}[${a.length}], the output is ${r.dtype}[${sizeOf(r.shape)}]` })
    }
    if (runPlan && mod.run === moduleRun) return runThroughPlan(runPlan, feeds, into, interrupt)
    // values on the host (feeds, constants, fallback results, what was read back) and on the device:
    // this run's over the constants' (not copied per run: 0.05 ms a run for MobileNetV2 int8's 332)
    const host = overlay(constants)
    const device = overlay(constantBuffers)
    for (const i of graph.inputs) {
      const t = feeds.get(i.name)
      if (!t) throw new ExecutorError({ where: `input '${i.name}'`, reason: "is missing" })
      host.set(i.name, t)
    }
    /** The caller's array for output v, where the kernels may write it: one that shares no memory with a feed (else written after the run). */
    const inPlace = (v: string): TypedArray | undefined => {
      const a = into?.get(v)
      if (!a) return undefined
      const overlaps = (d: TypedArray) => d.buffer === a.buffer && d.byteOffset < a.byteOffset + a.byteLength && a.byteOffset < d.byteOffset + d.byteLength
      return [...feeds.values()].some((t) => overlaps(t.data)) ? undefined : a
    }
    /** A value as a device buffer: on the device already, or its host data bound to its reserved buffer. */
    const onDevice = (v: string): DeviceBuffer => {
      const have = device.get(v)
      if (have) return have
      const r = reserved.get(v)
      const h = host.get(v)
      if (!r) throw new ExecutorError({ where: `value '${v}'`, reason: "has no static shape, so no compiled kernel can take it" })
      let b: DeviceBuffer
      if (h) {
        if (h.data.length !== sizeOf(r.shape)) throw new ExecutorError({ where: `value '${v}'`, reason: `has ${h.data.length} elements, its type says ${sizeOf(r.shape)}` })
        const d = deviceData(h, mod)
        b = inputs.has(v) || outputs.has(v) ? mod.input(r.buffer, d) : (mod.write(r.buffer, d), r.buffer)
      } else b = outputs.has(v) ? mod.output(r.buffer, inPlace(v)) : r.buffer
      device.set(v, b)
      return b
    }
    /** A value as host data: computed on the host, or read back from the device. */
    const onHost = (v: string, where: string): Tensor => {
      const h = host.get(v)
      if (h) return h
      const b = device.get(v)
      const r = reserved.get(v)
      if (!b || !r) throw new ExecutorError({ where, reason: `input '${v}' is not computed` })
      const data = mod.read(b)
      // (an int64_t / uint64_t buffer: its values copied, exactly — the buffer is written again later)
      const t: Tensor = isBigArray(data) ? wideTensor(r.dtype === "uint64" ? "uint64" : "int64", r.shape, data.slice()) : { dtype: r.dtype, shape: r.shape, data }
      host.set(v, t)
      return t
    }
    /** A group's nodes through their reference kernels on the host. */
    const runOnHost = (nodes: readonly Graph["nodes"][number][]): void => {
      for (const n of nodes) {
        const { def, attrs } = resolveNode(n)
        const ins = n.inputs.map((v) => (v === "" ? undefined : onHost(v, `node '${n.name}'`)))
        let outs: readonly Tensor[]
        try {
          outs = runKernel(n.op, def, { node: n.name, attrs, opset: graph.opset, inputs: ins, outputs: n.outputs.length, runSubgraph: subgraphRunner({ get: (name) => host.get(name) ?? (device.has(name) ? onHost(name, `node '${n.name}'`) : undefined) }, limits) }, n.domain)
        } catch (e) {
          // the interpreter's typed errors, as runGraph gives them (a Loop past its limit: NodeError)
          throw e instanceof ExecutorError ? e : kernelError(n, e)
        }
        n.outputs.forEach((o, j) => {
          if (o === "" || !outs[j]) return
          const aliased = ins.some((i) => i?.data === outs[j].data)
          const out = aliased && (outs[j].dtype === "float16" || outs[j].dtype === "bfloat16") ? { ...outs[j], data: outs[j].data.slice() } : outs[j]
          roundNarrow(out)
          host.set(o, out)
          device.delete(o)
        })
      }
    }
    for (const k of program.kernels) {
      checkInterrupt(interrupt, () => `kernel ${k.name}`)
      if (k.kind === "compiled") {
        // an int64 / uint64 argument holding a value that is not a double, on a device whose buffers
        // of it are doubles (cuda's uint64), which would round it: the group runs exactly on the reference kernels instead
        const fixed = fixedOf.get(k.name)
        // (never where the kernel has a fixed plan: its module holds them exactly)
        if (!fixed && k.args.some((a) => { const t = host.get(a); return t?.exact !== undefined && !exactOn(mod, t.dtype) })) {
          runOnHost(groupNodes.get(k.name)!)
          for (const o of k.outputs) device.delete(o)
          continue
        }
        const args = fixed ? k.args.map((v, j) => fixed[j] ?? onDevice(v)) : k.args.map(onDevice)
        // every index from data in range before the kernel reads by it: the reference kernel's error otherwise
        for (const c of checksOf.get(k.name) ?? []) {
          const data = host.get(c.input)?.data ?? mod.read(args[k.args.indexOf(c.input)])
          for (let i = 0; i < data.length; i++) {
            const why = c.refuse(Number(data[i]), i)
            if (why !== undefined) throw new NodeError({ node: c.node, op: c.op, reason: `input '${c.input}': ${why}` })
          }
        }
        mod.run(k.name, args)
        calls.push({ kernel: k.name, args })
        // what it wrote is on the device now; a host copy read earlier is stale
        for (const o of k.outputs) host.delete(o)
        for (const [v, b] of fixedOutputsOf.get(k.name) ?? []) device.set(v, b)
        continue
      }
      runOnHost(k.nodes)
    }
    // (a run that ended early leaves the previous one's calls)
    lastCalls = calls
    return new Map(
      graph.outputs.map((o) => {
        const t = onHost(o.name, `output '${o.name}'`)
        // (a device with its own memory, an output a fallback computed, or one the model's input or constant: copied in)
        const a = into?.get(o.name)
        if (!a || a === t.data) return [o.name, t] as const
        a.set(t.data as never)
        return [o.name, { ...t, data: a }] as const
      }),
    )
  }
  const timeSequence = mod.timeSequence
  const timeKernels = timeSequence
    ? (options?: TimeOptions) => {
        if (!lastCalls) throw new ExecutorError({ where: "timeKernels", reason: "the model has not run yet: its kernels' buffers are a run's" })
        return timeSequence(lastCalls, options)
      }
    : undefined
  return { run, plannedBytes: sizes.reduce((s, b) => s + b, 0), module: mod, ...(timeKernels ? { timeKernels } : {}) }
}

export type { TypedArray }
