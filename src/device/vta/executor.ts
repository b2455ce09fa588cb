// One executor for a graph partitioned between VTA and the CPU (rewrite/vta-partition.ts): the
// segments run in graph order; c segments through a runner the caller gives (the c target's
// compiled kernels, or the graph evaluator in the laws), VTA layers on the simulator. The copies
// between the two sides are explicit and recorded: a value a VTA layer reads that the CPU holds is
// packed NCHW → NCHW1n16c into the layer's DRAM (c→vta); a value the CPU reads that VTA produced is
// unpacked (vta→c). Between VTA layers the packed bytes pass as they are (one DRAM on the board).
import type { VtaDerived } from "../../ast/vta/config.js"
import { fromArray, type Tensor } from "../../ast/graph/tensor.js"
import type { VtaLayerProgram } from "../../lowering/vta/layers.js"
import { packActivation, unpackActivation } from "../../lowering/vta/pack.js"
import type { Graph } from "../../ast/graph/graph.js"
import type { Segment } from "../../rewrite/vta-partition.js"
import { runVtaSync, type VtaStats } from "./simulator.js"
import { VTA_CYCLE_MODEL, type VtaCycleModel } from "./cycle-model.js"
import { checkInterrupt, type Interrupt } from "../../ast/graph/errors.js"

export interface VtaCopy {
  readonly value: string
  readonly direction: "c→vta" | "vta→c"
  /** Bytes of int8 activations moved (the packed size, channels padded to the block). */
  readonly bytes: number
}

export interface VtaLayerRun {
  readonly name: string
  readonly kind: "conv" | "add"
  readonly stats: VtaStats
}

export interface VtaExecution {
  readonly outputs: Map<string, Tensor>
  readonly layers: readonly VtaLayerRun[]
  readonly copies: readonly VtaCopy[]
  /** Milliseconds in the c segments (this machine's clock), one entry per c segment. */
  readonly cpuMs: readonly number[]
}

interface Packed {
  readonly bytes: Uint8Array
  readonly c: number
  readonly h: number
  readonly w: number
}

/**
 * Runs the partition: `programs` holds each VTA layer's program by layer name; `runCpu(k, graph,
 * feeds)` runs c segment k. A simulator error (deadlock, race, address) is thrown, typed; a stop
 * request (`interrupt`: SIGINT, SIGTERM, --deadline) is an InterruptedError before the next segment or layer.
 */
export const runPartitioned = (
  d: VtaDerived,
  segments: readonly Segment[],
  outputs: readonly string[],
  programs: ReadonlyMap<string, VtaLayerProgram>,
  runCpu: (k: number, graph: Graph, feeds: ReadonlyMap<string, Tensor>) => ReadonlyMap<string, Tensor>,
  feeds: ReadonlyMap<string, Tensor>,
  model: VtaCycleModel = VTA_CYCLE_MODEL,
  interrupt?: Interrupt,
): VtaExecution => {
  const host = new Map<string, Tensor>(feeds)
  const dev = new Map<string, Packed>()
  const copies: VtaCopy[] = []
  const layers: VtaLayerRun[] = []
  const cpuMs: number[] = []
  const onHost = (v: string): Tensor => {
    const t = host.get(v)
    if (t) return t
    const p = dev.get(v)
    if (!p) throw new RangeError(`value ${v} was never computed`)
    const data = unpackActivation(d.blockOut, p.c, p.h, p.w, new Int8Array(p.bytes.buffer, p.bytes.byteOffset, p.bytes.byteLength))
    const out = fromArray("int8", [1, p.c, p.h, p.w], data)
    copies.push({ value: v, direction: "vta→c", bytes: p.bytes.byteLength })
    host.set(v, out)
    return out
  }
  const onDevice = (v: string): Packed => {
    const p = dev.get(v)
    if (p) return p
    const t = host.get(v)
    if (!t) throw new RangeError(`value ${v} was never computed`)
    if (t.dtype !== "int8" || t.shape.length !== 4 || t.shape[0] !== 1) throw new RangeError(`value ${v} is ${t.dtype}[${t.shape.join(",")}], not int8 [1,C,H,W]`)
    const [, c, h, w] = t.shape
    const packed = packActivation(d.blockIn, c, h, w, t.data as ArrayLike<number>)
    const out = { bytes: new Uint8Array(packed.buffer), c, h, w }
    copies.push({ value: v, direction: "c→vta", bytes: packed.byteLength })
    dev.set(v, out)
    return out
  }
  segments.forEach((s, k) => {
    checkInterrupt(interrupt, () => `segment ${k} (${s.device})`)
    if (s.device === "c") {
      const ins = new Map(s.graph.inputs.map((i) => [i.name, onHost(i.name)] as const))
      const t0 = performance.now()
      const outs = runCpu(k, s.graph, ins)
      cpuMs.push(performance.now() - t0)
      for (const o of s.graph.outputs) host.set(o.name, outs.get(o.name)!)
      return
    }
    for (const l of s.layers) {
      checkInterrupt(interrupt, () => `VTA layer ${l.name}`)
      const p = programs.get(l.name)
      if (!p) throw new RangeError(`no VTA program for layer ${l.name}`)
      const dram = p.dram.slice()
      for (const i of p.inputs) dram.set(onDevice(i.value).bytes, p.layout.regions.get(i.region)!.byteOffset)
      const run = runVtaSync(d, p.insns, dram, model)
      const r = p.layout.regions.get(p.output.region)!
      const n = r.elems * d.outElemBytes
      dev.set(p.output.value, { bytes: run.dram.slice(r.byteOffset, r.byteOffset + n), c: p.output.c, h: p.output.h, w: p.output.w })
      layers.push({ name: l.name, kind: l.kind, stats: run.stats })
    }
  })
  return { outputs: new Map(outputs.map((o) => [o, onHost(o)] as const)), layers, copies, cpuMs }
}
