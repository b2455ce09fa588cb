// The graph executor: a compiled model is its kernels (one per fused group), its memory plan and
// its constants. The executor allocates the planned storage blocks once, gives every planned
// value a typed-array view of its block, and per run calls the kernels in group order — compiled
// kernels through the target's loaded functions, fallback groups through the reference kernels.
// A device with a memory of its own (wasm: the module's linear memory) hands it with its kernels:
// the blocks and the constants are then placed in it once, so its kernels find them in place and
// copy only what lives elsewhere (the model's inputs and outputs).
import { Data } from "effect"
import { allocate, storageBytes, type DType, type TypedArray } from "../ast/graph/dtype.js"
import { resolveNode, roundNarrow, runGraph } from "../ast/graph/evaluate.js"
import type { Graph } from "../ast/graph/graph.js"
import { sizeOf, type Tensor } from "../ast/graph/tensor.js"
import type { GroupKernel } from "../lowering/lower-group.js"
import type { FusedGraph } from "../rewrite/fuse-ops.js"
import type { MemoryPlan } from "../rewrite/plan-memory.js"

export interface Program {
  /** The optimized, bound graph. */
  readonly graph: Graph
  readonly fused: FusedGraph
  readonly memory: MemoryPlan
  readonly kernels: readonly GroupKernel[]
}

export type KernelFn = (...args: TypedArray[]) => void

/** Memory a device keeps its buffers in, when it has its own (wasm: the module's linear memory). */
export interface DeviceMemory {
  /** Reserves blocks of these byte sizes, at least 16-byte aligned, for good; their byte offsets in the buffer. */
  readonly reserve: (bytes: readonly number[]) => readonly number[]
  /** The memory's buffer now (another one after the memory grew: views are made again from it). */
  readonly buffer: () => ArrayBufferLike
}

/** A device's loaded kernels by name, with its memory when it has one. */
export interface LoadedKernels extends ReadonlyMap<string, KernelFn> {
  readonly memory?: DeviceMemory
}

export class ExecutorError extends Data.TaggedError("ExecutorError")<{ readonly where: string; readonly reason: string }> {
  override get message(): string {
    return `executor: ${this.where}: ${this.reason}`
  }
}


type ViewCtor = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => TypedArray
const viewCtor = (dtype: DType): ViewCtor => allocate(dtype, 0).constructor as unknown as ViewCtor

const staticShape = (g: Graph, v: string): number[] => {
  const t = g.valueTypes.get(v)
  if (!t || !t.shape.every((d) => typeof d === "number")) throw new ExecutorError({ where: `value '${v}'`, reason: "has no static shape" })
  return t.shape as number[]
}

export interface Executor {
  readonly run: (feeds: ReadonlyMap<string, Tensor>) => Map<string, Tensor>
  /** Bytes of the planned storage blocks (allocated once). */
  readonly plannedBytes: number
}

export const createExecutor = (program: Program, fns: LoadedKernels): Executor => {
  const { graph, memory } = program
  for (const k of program.kernels)
    if (k.kind === "compiled" && !fns.has(k.name)) throw new ExecutorError({ where: `kernel ${k.name}`, reason: "is not loaded" })
  // storage blocks sized for the largest view any value takes of them (storage classes differ from ONNX sizes)
  const blockBytes = new Array<number>(memory.storages.length).fill(0)
  for (const a of memory.values) {
    const t = graph.valueTypes.get(a.value)!
    blockBytes[a.storage] = Math.max(blockBytes[a.storage], sizeOf(t.shape as number[]) * storageBytes(t.dtype))
  }
  const sizes = blockBytes.map((b) => Math.max(8, Math.ceil(b / 8) * 8))
  const planned = new Map<string, TypedArray>()
  const constants = new Map<string, Tensor>(graph.initializers)
  const outputs = new Set(graph.outputs.map((o) => o.name))
  const viewsOf = (blocks: readonly (readonly [ArrayBufferLike, number])[]) => {
    for (const a of memory.values) {
      const t = graph.valueTypes.get(a.value)!
      planned.set(a.value, new (viewCtor(t.dtype))(blocks[a.storage][0], blocks[a.storage][1], sizeOf(t.shape as number[])))
    }
  }
  // in the device's memory: the blocks, then the constants (copied there once)
  const device = fns.memory
  const initializers = [...graph.initializers]
  const at = device?.reserve([...sizes, ...initializers.map(([, t]) => t.data.byteLength)])
  let seen: ArrayBufferLike | undefined
  const placeIn = (buffer: ArrayBufferLike, copy: boolean) => {
    viewsOf(sizes.map((_, k) => [buffer, at![k]] as const))
    initializers.forEach(([name, t], j) => {
      const view = new (t.data.constructor as ViewCtor)(buffer, at![sizes.length + j], t.data.length)
      if (copy) view.set(t.data as ArrayLike<number>)
      constants.set(name, { ...t, data: view })
    })
    seen = buffer
  }
  if (device) placeIn(device.buffer(), true)
  else viewsOf(sizes.map((n) => [new ArrayBuffer(n), 0] as const))

  const run = (feeds: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
    if (device && device.buffer() !== seen) placeIn(device.buffer(), false)
    // values with their actual shapes (fallback groups may produce data-dependent shapes)
    const env = new Map<string, Tensor>(constants)
    for (const i of graph.inputs) {
      const t = feeds.get(i.name)
      if (!t) throw new ExecutorError({ where: `input '${i.name}'`, reason: "is missing" })
      env.set(i.name, t)
    }
    const buffer = (v: string): TypedArray => {
      const have = env.get(v)
      if (have) return have.data
      const shape = staticShape(graph, v)
      const p = planned.get(v)
      const data = p && !outputs.has(v) ? p : allocate(graph.valueTypes.get(v)!.dtype, sizeOf(shape))
      env.set(v, { dtype: graph.valueTypes.get(v)!.dtype, shape, data })
      return data
    }
    for (const k of program.kernels) {
      if (k.kind === "compiled") {
        const args = k.args.map(buffer)
        fns.get(k.name)!(...args)
        continue
      }
      // fallback: the group's nodes through their reference kernels
      for (const n of k.nodes) {
        const { def, attrs } = resolveNode(n)
        const inputs = n.inputs.map((v) => {
          if (v === "") return undefined
          const t = env.get(v)
          if (!t) throw new ExecutorError({ where: `node '${n.name}'`, reason: `input '${v}' is not computed` })
          return t
        })
        const outs = def.kernel({ node: n.name, attrs, opset: graph.opset, inputs, outputs: n.outputs.length, runSubgraph: (g, f) => runGraph(g, f, { get: (name) => env.get(name) }) })
        n.outputs.forEach((o, j) => {
          if (o === "" || !outs[j]) return
          const aliased = inputs.some((i) => i?.data === outs[j].data)
          const out = aliased && (outs[j].dtype === "float16" || outs[j].dtype === "bfloat16") ? { ...outs[j], data: outs[j].data.slice() } : outs[j]
          roundNarrow(out)
          const dst = planned.get(o)
          if (dst && !outputs.has(o) && dst.length === out.data.length && dst.constructor === out.data.constructor) {
            dst.set(out.data as ArrayLike<number>)
            env.set(o, { ...out, data: dst })
          } else env.set(o, out)
        })
      }
    }
    return new Map(
      graph.outputs.map((o) => {
        buffer(o.name)
        return [o.name, env.get(o.name)!] as const
      }),
    )
  }
  return { run, plannedBytes: sizes.reduce((s, b) => s + b, 0) }
}
