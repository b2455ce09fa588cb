// Helpers of the laws that compile to C: whether gcc is here (the laws skip, visibly, where it is
// not), many random cases batched into one translation unit per gcc run (a graph of disjoint
// components; a list of PrimFuncs), and calling a built kernel on named tensors.
import { Effect } from "effect"
import { allocate, isBigArray, type DeviceArray } from "../src/ast/graph/dtype.js"
import type { GraphCase } from "../src/ast/graph/arbitrary.js"
import { makeGraph, type AttrValue, type Graph } from "../src/ast/graph/graph.js"
import { exactValues, sizeOf, stridesOf, tensor, wideTensor, type Tensor } from "../src/ast/graph/tensor.js"
import { paramsOf, storageElements } from "../src/ast/tir/analysis.js"
import type { Buffer, PrimFunc } from "../src/ast/tir/tir.js"
import { buildC, compilerAvailable } from "../src/device/c/build.js"
import { loadC, type CKernel, type CModule } from "../src/device/c/load.js"
import { emitC } from "../src/emit/c/emit.js"

/** The threads the laws' kernels run their parallel loops on. */
export const LAW_THREADS = 3

/** Whether gcc runs here; the C laws skip without it, saying so in their titles. */
export const HAVE_GCC = compilerAvailable("gcc")
export const NO_GCC = HAVE_GCC ? "" : " (skipped: no gcc on PATH)"

/** A graph case's name prefix inside a batch: component `k` of a merged graph. */
export const componentPrefix = (k: number): string => `g${k}_`

/**
 * Cases merged into one graph of disjoint components, every name prefixed by its component
 * (`componentPrefix`): one compile, one gcc run for all of them. The components share nothing, so
 * the merged graph computes each case's outputs; fusion and the memory plan see them all at once.
 */
export const mergeGraphs = (cases: readonly GraphCase[], name = "batch"): GraphCase => {
  const feeds = new Map<string, Tensor>()
  const parts = cases.map(({ graph, inputs }, k) => {
    const p = componentPrefix(k)
    const r = (v: string) => (v === "" ? "" : p + v)
    for (const n of graph.nodes)
      if (Object.values(n.attrs).some((a: AttrValue) => a.kind === "graph" || a.kind === "graphs")) throw new Error(`mergeGraphs: ${graph.name} has a subgraph (its captures would need renaming)`)
    for (const [v, t] of inputs) feeds.set(r(v), t)
    return {
      inputs: graph.inputs.map((i) => ({ ...i, name: r(i.name) })),
      outputs: graph.outputs.map((o) => ({ ...o, name: r(o.name) })),
      initializers: [...graph.initializers].map(([v, t]) => [r(v), t] as const),
      nodes: graph.nodes.map((n) => ({ ...n, name: r(n.name), inputs: n.inputs.map(r), outputs: n.outputs.map(r) })),
      valueTypes: [...graph.valueTypes].map(([v, t]) => [r(v), t] as const),
    }
  })
  const graph: Graph = makeGraph({
    name,
    opset: Math.max(...cases.map((c) => c.graph.opset)),
    inputs: parts.flatMap((p) => p.inputs),
    outputs: parts.flatMap((p) => p.outputs),
    initializers: new Map(parts.flatMap((p) => p.initializers)),
    nodes: parts.flatMap((p) => p.nodes),
    valueTypes: new Map(parts.flatMap((p) => p.valueTypes)),
  })
  return { graph, inputs: feeds }
}

/** Storage offsets of a param's logical elements in row-major order (through its view's strides). */
const offsets = (p: Buffer): number[] => {
  const shape = p.view?.shape ?? p.shape
  const st = p.view?.strides ?? p.strides ?? stridesOf(p.shape)
  const base = stridesOf(shape)
  return Array.from({ length: sizeOf(shape) }, (_, i) => shape.reduce((off, _d, k) => off + (Math.floor(i / base[k]) % shape[k]) * st[k], 0))
}

/** Calls a kernel on named tensors: inputs copied into fresh storage, everything else poisoned (0xff bytes) first; every param read back. */
export const callKernel = (k: CKernel, f: PrimFunc, inputs: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
  // (int64 / uint64 params are int64_t / uint64_t: BigInt64Arrays / BigUint64Arrays of the tensors' exact values)
  const arrays = f.params.map((p): DeviceArray => {
    const t = inputs.get(p.name)
    if (p.dtype === "int64" || p.dtype === "uint64") {
      const a = p.dtype === "uint64" ? new BigUint64Array(storageElements(p)) : new BigInt64Array(storageElements(p))
      if (t) {
        const v = exactValues(t)
        offsets(p).forEach((off, i) => (a[off] = v[i]))
      } else new Uint8Array(a.buffer).fill(0xff)
      return a
    }
    const a = allocate(p.dtype, storageElements(p))
    if (t) offsets(p).forEach((off, i) => (a[off] = t.data[i]))
    else new Uint8Array(a.buffer).fill(0xff)
    return a
  })
  k(...arrays)
  return new Map(
    f.params.map((p, j) => {
      const shape = p.view?.shape ?? p.shape
      const a = arrays[j]
      if (isBigArray(a)) {
        const big = a instanceof BigUint64Array ? new BigUint64Array(sizeOf(shape)) : new BigInt64Array(sizeOf(shape))
        offsets(p).forEach((off, i) => (big[i] = a[off]))
        return [p.name, wideTensor(a instanceof BigUint64Array ? "uint64" : "int64", shape, big)] as const
      }
      const data = allocate(p.dtype, sizeOf(shape))
      offsets(p).forEach((off, i) => (data[i] = a[off]))
      return [p.name, tensor(p.dtype, shape, data)] as const
    }),
  )
}

/**
 * The functions emitted as one translation unit (allocations poisoned), built by gcc (cached by
 * content) and loaded, their parallel loops on 3 threads of the thread pool (more than this
 * machine's cores: chunks are claimed across threads, and a loop of fewer iterations than threads
 * leaves some idle).
 */
export const buildFuncs = (funcs: readonly PrimFunc[]): Promise<CModule> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const { source } = emitC(funcs, { poison: true })
      const so = yield* buildC(source)
      return yield* loadC(
        so,
        funcs.map((f) => ({ name: f.name, params: paramsOf(f) })),
        LAW_THREADS,
      )
    }),
  )
