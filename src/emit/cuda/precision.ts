// The cuda artifact's storage precision (`tessera compile --target cuda --precision fp16`, as
// PyTorch's `.half()` with autocast's float32 accumulation): which of the program's values the
// arena holds as halves, each compiled kernel's params retyped to match (lowering.HalfStorage:
// float32 arithmetic, registers, shared memory and accumulation; a half rounded to nearest even
// at each store to the arena), and constants.bin with the weights converted once, here, at
// compile time. The model's inputs and outputs stay float32 (the runner's .npy files, the Node
// device's copies): the first kernel that reads an input widens nothing, the last one that writes
// an output rounds nothing. Values of other dtypes are as in fp32. Pure.
import { f16BitsToNumber, numberToF16Bits, type DType } from "../../ast/graph/dtype.js"
import type { Graph } from "../../ast/graph/graph.js"
import { exactValues, type Tensor } from "../../ast/graph/tensor.js"
import type { CudaAttrs } from "../../ast/target.js"
import type { PrimFunc } from "../../ast/tir/tir.js"
import type { CompiledKernel } from "../../lowering/lower-group.js"
import type { Program } from "../../lowering/program.js"
import { halfStorage, HalfStorageError } from "../../lowering/tir/half-storage.js"
import { commentSafe } from "../c-family/names.js"
import { EmitError } from "../emit-error.js"
import { cudaBytes } from "./dialect.js"

/** Largest finite float16. */
const F16_MAX = 65504

const dtypeOf = (g: Graph, v: string): DType | undefined => (g.valueTypes.get(v) ?? g.inputs.find((i) => i.name === v)?.type ?? g.initializers.get(v))?.dtype

/** The graph values an fp16 artifact holds as halves: every float32 value but the model's inputs and outputs. */
export const halfValues = (program: Program): ReadonlySet<string> => {
  const g = program.graph
  const boundary = new Set([...g.inputs.map((i) => i.name), ...g.outputs.map((o) => o.name)])
  const out = new Set<string>()
  const consider = (v: string) => {
    if (!boundary.has(v) && dtypeOf(g, v) === "float32") out.add(v)
  }
  for (const name of g.initializers.keys()) consider(name)
  for (const a of program.memory.values) consider(a.value)
  for (const k of program.kernels) if (k.kind === "compiled") k.args.forEach(consider)
  return out
}

/** The dtype the arena holds a value in (float16 where `half` has it). */
export const storedDtype = (g: Graph, half: ReadonlySet<string>, v: string): DType | undefined => (half.has(v) ? "float16" : dtypeOf(g, v))

/** The first node reading a value, for errors that name one. */
const readerOf = (g: Graph, v: string): { readonly name: string; readonly op: string } | undefined => {
  const n = g.nodes.find((m) => m.inputs.includes(v))
  return n ? { name: n.name, op: n.op } : undefined
}

/** A compiled kernel's PrimFunc with its half-stored args' params as halves (EmitError naming its node and op where it cannot be). */
export const halfKernel = (program: Program, k: CompiledKernel, half: ReadonlySet<string>, attrs: CudaAttrs): PrimFunc => {
  const g = program.graph
  const group = program.fused.groups.find((x) => x.id === k.group)
  const first = group?.nodes[0]
  const node = first ? g.nodes.find((n) => n.name === first) : undefined
  const named = node ? { node: { name: node.name, op: node.op } } : {}
  // one storage block passed as two params of different element sizes (an in-place op from a half
  // value into a float32 output): the kernel's float stores would overwrite halves not yet read
  const storageOf = new Map(program.memory.values.map((v) => [v.value, v.storage] as const))
  const bytesBy = new Map<number, number>()
  for (const a of k.args) {
    const s = storageOf.get(a)
    if (s === undefined) continue
    const bytes = cudaBytes(storedDtype(g, half, a) ?? "float32")
    const seen = bytesBy.get(s)
    if (seen !== undefined && seen !== bytes)
      throw new EmitError({ target: "cuda", kernel: k.name, ...named, reason: `--precision fp16: ${node ? `${node.op} ${commentSafe(node.name)}` : "this kernel"} runs in place from a half value into a float32 one (the model's output ${commentSafe(a)}); the float stores would overwrite halves not yet read` })
    bytesBy.set(s, bytes)
  }
  const params = new Set<string>()
  k.args.forEach((a, j) => {
    if (half.has(a)) params.add(k.func.params[j].name)
  })
  try {
    return halfStorage(k.func, params, attrs)
  } catch (e) {
    if (e instanceof HalfStorageError) throw new EmitError({ target: "cuda", kernel: k.name, ...named, reason: `--precision fp16: ${e.reason}` })
    throw e
  }
}

const ALIGN = 64

/** An initializer's bytes in the arena: halves where stored so (each rounded to nearest even; EmitError naming its reader where one overflows), else our storage (int64 / uint64 as their exact values). */
const constantBytes = (g: Graph, name: string, t: Tensor, asHalf: boolean): Uint8Array => {
  if (asHalf || t.dtype === "float16") {
    const out = new Uint16Array(t.data.length)
    for (let i = 0; i < t.data.length; i++) {
      const x = Number(t.data[i])
      const h = numberToF16Bits(x)
      if (Number.isFinite(x) && !Number.isFinite(f16BitsToNumber(h))) {
        const r = readerOf(g, name)
        throw new EmitError({
          target: "cuda",
          ...(r ? { node: r } : {}),
          reason: `--precision fp16: the constant ${commentSafe(name)}${r ? ` (read by ${r.op} ${commentSafe(r.name)})` : ""} holds ${x} at element ${i}, beyond float16's ±${F16_MAX}: compile it at fp32`,
        })
      }
      out[i] = h
    }
    return new Uint8Array(out.buffer)
  }
  const a = t.dtype === "int64" || t.dtype === "uint64" ? exactValues(t) : t.data
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength)
}

/**
 * constants.bin of a cuda artifact: each initializer 64-byte aligned in graph order (the compile
 * command's packing), a float16 one — the model's own, or a float32 weight of an fp16 artifact —
 * as 2-byte halves (the kernels' `__half`); its index as the compile command writes it.
 */
export const packCudaConstants = (g: Graph, half: ReadonlySet<string>): { readonly bin: Uint8Array; readonly index: object[]; readonly offsets: ReadonlyMap<string, number> } => {
  const parts: { name: string; t: Tensor; bytes: Uint8Array; offset: number }[] = []
  let off = 0
  for (const [name, t] of g.initializers) {
    off = Math.ceil(off / ALIGN) * ALIGN
    const bytes = constantBytes(g, name, t, half.has(name))
    parts.push({ name, t, bytes, offset: off })
    off += bytes.length
  }
  const bin = new Uint8Array(off)
  for (const p of parts) bin.set(p.bytes, p.offset)
  const index = parts.map((p) => ({
    name: p.name,
    dtype: p.t.dtype,
    ...(half.has(p.name) ? { stored: "float16" } : {}),
    storage: half.has(p.name) || p.t.dtype === "float16" ? "Uint16Array" : (p.t.dtype === "int64" || p.t.dtype === "uint64" ? exactValues(p.t) : p.t.data).constructor.name,
    shape: p.t.shape,
    offset: p.offset,
    bytes: p.bytes.length,
  }))
  return { bin, index, offsets: new Map(parts.map((p) => [p.name, p.offset] as const)) }
}
