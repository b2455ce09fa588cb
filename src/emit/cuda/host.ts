// The host side of a cuda artifact: the memory plan of one device arena and the launcher that runs
// a program's kernels in it, as generated CUDA C++ (tessera_launcher.cu). The arena holds, in
// order: the constants exactly as constants.bin packs them (copied in once, by one cudaMemcpy),
// the memory plan's storage blocks (rewrite.PlanMemory: intermediates sharing blocks), the model's
// inputs and outputs, and one workspace region that every kernel's workspace buffers reuse (the
// kernels run one after another on one stream). Each value's place is an offset known here, so
// the launcher is a list of `<<<grid, block>>>` calls with pointers into the arena. Pure.
import type { DType } from "../../ast/graph/dtype.js"
import type { Graph } from "../../ast/graph/graph.js"
import { sizeOf } from "../../ast/graph/tensor.js"
import { storageElements } from "../../ast/tir/analysis.js"
import { indexChecks } from "../../lowering/index-checks.js"
import type { Program } from "../../lowering/program.js"
import { commentSafe } from "../c-family/names.js"
import { cudaBytes, cudaStorage } from "./dialect.js"
import { EmitError } from "../emit-error.js"
import type { CudaEmitted } from "./emit.js"

/** Alignment of the arena's regions and blocks (cudaMalloc's 256 bytes: any vector access is aligned). */
export const ARENA_ALIGN = 256
/** Alignment of tensors inside constants.bin (the compile command's packing: src/cli/compile.ts packConstants). */
export const CONSTANTS_ALIGN = 64

const up = (n: number, a: number) => Math.ceil(n / a) * a

/** constants.bin's layout: each initializer's offset in graph order, each 64-byte aligned, and its total size (a float16 one, or one in `half`, 2 bytes an element: packCudaConstants). */
export const constantsLayout = (graph: Graph, half: ReadonlySet<string> = new Set()): { readonly offsets: ReadonlyMap<string, number>; readonly bytes: number } => {
  const offsets = new Map<string, number>()
  let off = 0
  for (const [name, t] of graph.initializers) {
    off = up(off, CONSTANTS_ALIGN)
    offsets.set(name, off)
    off += half.has(name) || t.dtype === "float16" ? t.data.length * 2 : t.data.byteLength
  }
  return { offsets, bytes: off }
}

/** How a tensor's elements are held in the arena and in a .npy file. */
export interface TensorIo {
  readonly name: string
  readonly dtype: DType
  readonly shape: readonly number[]
  readonly offset: number
  readonly elements: number
  /** The .npy descr of the dtype ('<f4', '<i8', …). */
  readonly npy: string
  /** How the arena holds it: as the file's bytes (int64 as int64_t, float16 as __half too), or uint64 as doubles. */
  readonly storage: "raw" | "u8-as-f8" | "unsupported"
}

const NPY: { readonly [D in DType]: string } = {
  float32: "<f4",
  float64: "<f8",
  float16: "<f2",
  bfloat16: "<V2",
  int8: "|i1",
  int16: "<i2",
  int32: "<i4",
  int64: "<i8",
  uint8: "|u1",
  uint16: "<u2",
  uint32: "<u4",
  uint64: "<u8",
  bool: "|b1",
}

// int64 is int64_t in the arena, as in constants.bin and the kernels (cStorage), float16 a __half (cudaStorage); uint64 is still held as a double
const storageOf = (d: DType): TensorIo["storage"] => (d === "uint64" ? "u8-as-f8" : d === "bfloat16" ? "unsupported" : "raw")

export interface ArenaPlan {
  readonly bytes: number
  readonly constantsBytes: number
  /** Each value's offset in the arena (constants, planned values, inputs, outputs). */
  readonly offsets: ReadonlyMap<string, number>
  readonly workspaceOffset: number
  readonly workspaceBytes: number
  readonly inputs: readonly TensorIo[]
  readonly outputs: readonly TensorIo[]
}

const staticShape = (g: Graph, v: string): number[] | undefined => {
  const t = g.valueTypes.get(v) ?? g.inputs.find((i) => i.name === v)?.type ?? g.initializers.get(v)
  return t && t.shape.every((d) => typeof d === "number") ? (t.shape as number[]) : undefined
}
const dtypeOf = (g: Graph, v: string): DType => (g.valueTypes.get(v) ?? g.inputs.find((i) => i.name === v)?.type ?? g.initializers.get(v))!.dtype

/** The arena of a program whose kernels are `emitted`, the values in `half` held as halves (throws EmitError for a value without a static shape). */
export const planArena = (program: Program, emitted: CudaEmitted, half: ReadonlySet<string> = new Set()): ArenaPlan => {
  const { graph, memory } = program
  const fail = (reason: string): never => {
    throw new EmitError({ target: "cuda", reason })
  }
  const constants = constantsLayout(graph, half)
  const bytesOf = (v: string): number => cudaBytes(half.has(v) ? "float16" : dtypeOf(graph, v))
  const offsets = new Map<string, number>(constants.offsets)
  let end = up(constants.bytes, ARENA_ALIGN)
  // storage blocks sized for the largest view any value takes of them (as the executor's)
  const blockBytes = new Array<number>(memory.storages.length).fill(0)
  for (const a of memory.values) {
    const shape = staticShape(graph, a.value) ?? fail(`value ${commentSafe(a.value)} has no static shape`)
    blockBytes[a.storage] = Math.max(blockBytes[a.storage], sizeOf(shape) * bytesOf(a.value))
  }
  const blockAt = blockBytes.map((b) => {
    const at = end
    end = up(end + Math.max(b, 1), ARENA_ALIGN)
    return at
  })
  for (const a of memory.values) offsets.set(a.value, blockAt[a.storage])
  const io = (name: string): TensorIo => {
    const shape = staticShape(graph, name) ?? fail(`the model's value ${commentSafe(name)} has no static shape`)
    const dtype = dtypeOf(graph, name)
    if (shape.length > 8) fail(`the model's value ${commentSafe(name)} has rank ${shape.length}; the runner reads and writes up to rank 8`)
    if (!offsets.has(name)) {
      offsets.set(name, end)
      end = up(end + Math.max(1, sizeOf(shape) * cudaBytes(dtype)), ARENA_ALIGN)
    }
    return { name, dtype, shape, offset: offsets.get(name)!, elements: sizeOf(shape), npy: NPY[dtype], storage: storageOf(dtype) }
  }
  const inputs = graph.inputs.map((i) => io(i.name))
  const outputs = graph.outputs.map((o) => io(o.name))
  const workspaceOffset = end
  let workspaceBytes = 0
  for (const k of emitted.kernels) {
    let w = 0
    for (const b of k.workspace) w = up(w + storageElements(b) * cudaBytes(b.dtype), ARENA_ALIGN)
    workspaceBytes = Math.max(workspaceBytes, w)
  }
  return { bytes: workspaceOffset + workspaceBytes, constantsBytes: constants.bytes, offsets, workspaceOffset, workspaceBytes, inputs, outputs }
}

const cString = (s: string): string => JSON.stringify(s).replace(/\?/g, "\\?")

/**
 * The launcher (tessera_launcher.cu): the kernels' translation unit included, the arena's tables,
 * and `tessera_model_launch`, every launch of every kernel in program order. Throws EmitError for a
 * group without a GPU kernel (its reference kernels would run on the host) or one whose indices
 * come from data (the executor checks them on the host before the kernel reads by them).
 */
export const launcherSource = (program: Program, emitted: CudaEmitted, plan: ArenaPlan, kernelsFile: string): string => {
  const { graph } = program
  const fail = (reason: string, kernel?: string): never => {
    throw new EmitError({ target: "cuda", ...(kernel ? { kernel } : {}), reason })
  }
  const byName = new Map(emitted.kernels.map((k) => [k.name, k] as const))
  const nodes = new Map(graph.nodes.map((n) => [n.name, n] as const))
  const calls: string[] = []
  const launchNames: string[] = []
  for (const k of program.kernels) {
    if (k.kind === "fallback")
      fail(`group ${k.group} has no GPU kernel: ${k.nodes.map((n) => `${n.op} ${commentSafe(n.name)}`).join(", ")} would run on the host (${k.reason}); the cuda runner has no host kernels`, k.name)
    if (k.kind !== "compiled") continue
    const group = program.fused.groups.find((g) => g.id === k.group)
    for (const name of group?.nodes ?? []) {
      const n = nodes.get(name)
      const checks = n ? indexChecks(graph, n) : []
      if (checks.length) fail(`${checks[0].op} ${commentSafe(checks[0].node)} indexes by '${commentSafe(checks[0].input)}', a value from data whose range the host must check before the kernel runs; the cuda runner does not`, k.name)
    }
    const ek = byName.get(k.name) ?? fail("was not emitted", k.name)
    const args = k.args.map((value, j) => {
      const off = plan.offsets.get(value) ?? fail(`argument ${commentSafe(value)} has no place in the arena`, k.name)
      return `(${cudaStorage(ek.params[j].dtype)}*)(arena + ${off})`
    })
    let w = plan.workspaceOffset
    const ws = ek.workspace.map((b) => {
      const at = w
      w = up(w + storageElements(b) * cudaBytes(b.dtype), ARENA_ALIGN)
      return `(${cudaStorage(b.dtype)}*)(arena + ${at})`
    })
    calls.push(`  /* ${k.name}: group ${k.group} (${commentSafe((group?.ops ?? []).join("+"))}) */`)
    for (const l of ek.launches) {
      calls.push(`  ${l.barriers ? "TESSERA_LAUNCH_SYNC" : "TESSERA_LAUNCH"}(${l.symbol}, dim3(${l.grid.join(", ")}), dim3(${l.block.join(", ")}), stream, ${[...args, ...ws].join(", ")}); TESSERA_MARK(stream);`)
      launchNames.push(`${k.name} ${l.symbol} ${(group?.ops ?? []).join("+")} grid ${l.grid.join("x")} block ${l.block.join("x")}`)
    }
  }
  const table = (name: string, ts: readonly TensorIo[]) => [
    `const tessera_tensor ${name}[] = {`,
    ...ts.map((t) => `  {${cString(t.name)}, ${cString(t.dtype)}, ${cString(t.npy)}, ${cString(t.storage)}, ${cudaBytes(t.dtype)}, ${t.offset}, ${t.elements}, ${t.shape.length}, {${[...t.shape, 0].join(", ")}}},`),
    ...(ts.length ? [] : ["  {0, 0, 0, 0, 0, 0, 0, 0, {0}},"]),
    "};",
    `const int ${name}_count = ${ts.length};`,
  ]
  return [
    `/* Generated by Tessera (cuda target): the host launcher. Do not edit. */`,
    `#include "tessera_model.h"`,
    `#include "${kernelsFile}"`,
    "",
    `const size_t tessera_arena_bytes = ${plan.bytes};`,
    `const size_t tessera_constants_bytes = ${plan.constantsBytes};`,
    ...table("tessera_inputs", plan.inputs),
    ...table("tessera_outputs", plan.outputs),
    "",
    "/* each launch's name, for ./model --profile (an event is recorded after each launch while tessera_profile_events is set) */",
    "const char* const tessera_launch_names[] = {",
    ...launchNames.map((n) => `  ${cString(n)},`),
    ...(launchNames.length ? [] : ["  0,"]),
    "};",
    `const int tessera_launch_count = ${launchNames.length};`,
    "cudaEvent_t* tessera_profile_events = 0;",
    "int tessera_profile_next = 0;",
    "",
    "/* every kernel of the model, in order, on `stream`; the arena holds the constants, inputs and outputs */",
    "cudaError_t tessera_model_launch(char* arena, cudaStream_t stream) {",
    ...calls,
    "  return cudaGetLastError();",
    "}",
    "",
  ].join("\n")
}

/** The launcher's interface (tessera_model.h), which the runner includes. */
export const MODEL_HEADER = `/* Generated by Tessera (cuda target): the model's interface. Do not edit. */
#ifndef TESSERA_MODEL_H
#define TESSERA_MODEL_H
#include <stddef.h>
#include <stdint.h>
#ifdef __CUDACC__
#include <cuda_runtime.h>
/* one launch of kernel f on stream s (_SYNC: a kernel with barriers, which only the emulation tells apart) */
#define TESSERA_LAUNCH(f, grid, block, s, ...) f<<<grid, block, 0, s>>>(__VA_ARGS__)
#define TESSERA_LAUNCH_SYNC(f, grid, block, s, ...) f<<<grid, block, 0, s>>>(__VA_ARGS__)
#else
/* a host compiler (make emulate): the kernels run on the CPU, block by block, thread by thread */
#include "tessera_emulate.h"
#endif

/* one input or output: where it lives in the arena, and how a .npy file holds it */
typedef struct {
  const char* name;
  const char* dtype;    /* the ONNX dtype's name */
  const char* npy;      /* the .npy descr of that dtype */
  const char* storage;  /* "raw": the file's bytes (int64 as int64_t); "u8-as-f8": uint64 held as double */
  int storage_bytes;    /* bytes of one element in the arena */
  size_t offset;        /* in the arena */
  size_t elements;
  int rank;
  int64_t shape[9];
} tessera_tensor;

extern const size_t tessera_arena_bytes;      /* the one device allocation */
extern const size_t tessera_constants_bytes;  /* constants.bin, copied to the arena's start */
extern const tessera_tensor tessera_inputs[];
extern const int tessera_inputs_count;
extern const tessera_tensor tessera_outputs[];
extern const int tessera_outputs_count;

/* every kernel of the model, in order, on stream; returns the launch error, if any */
cudaError_t tessera_model_launch(char* arena, cudaStream_t stream);

/* per-launch timing (./model --profile N): while tessera_profile_events is set, an event is recorded after every launch */
extern const char* const tessera_launch_names[];
extern const int tessera_launch_count;
extern cudaEvent_t* tessera_profile_events;
extern int tessera_profile_next;
#define TESSERA_MARK(s) do { if (tessera_profile_events) cudaEventRecord(tessera_profile_events[tessera_profile_next++], (s)); } while (0)
#endif
`
