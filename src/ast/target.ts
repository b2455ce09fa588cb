// Targets as data: a kind and the attributes every stage adapts to — the graph passes (the blocked
// layout's vector width), the schedules (lanes, cores, caches, FMA units), the emitters and the
// devices. One module every stage imports; it reads nothing. What the host is (/proc, /sys,
// nvidia-smi) is read at the edge (src/device/host.ts) and handed in as a Target.
//
// The kinds are the keys of `TargetAttrsOf`: a kind is added by adding its attributes here and
// its Backend record to the table in src/backend/index.ts (which is typed over this union, so a
// kind without a backend does not compile). CUDA and VTA attributes are declared below for the
// targets that will carry them.
import { Data } from "effect"

/** The vector instruction set a CPU target's code may use. */
export type Isa = "avx512" | "avx2" | "sse" | "neon" | "simd128" | "scalar"

/** fp32 lanes of one vector register of each ISA. */
export const ISA_LANES: { readonly [I in Isa]: number } = { avx512: 16, avx2: 8, sse: 4, neon: 4, simd128: 4, scalar: 1 }

/** Vector registers of each ISA (what a register tile of accumulators must fit in). */
export const ISA_VECTOR_REGISTERS: { readonly [I in Isa]: number } = { avx512: 32, avx2: 16, sse: 16, neon: 32, simd128: 16, scalar: 16 }

/**
 * Whether the ISA has a fused multiply-add instruction that takes a broadcast operand from memory
 * (AVX2 / AVX-512 `vfmadd231ps … {1toN}`, NEON's by-element `fmla`). Standard WebAssembly SIMD128
 * has none: a multiply-add is `f32x4.mul` then `f32x4.add`, and a broadcast input is a load of its
 * own (`v128.load32_splat`), so a register tile there counts instructions, not bytes (common.ts).
 */
export const ISA_FUSED_MULTIPLY_ADD: { readonly [I in Isa]: boolean } = { avx512: true, avx2: true, sse: true, neon: true, simd128: false, scalar: true }

/**
 * FMA pipes and their latency in cycles, nominal per ISA (what the common implementations have:
 * two FMA pipes and 4 cycles since Skylake and Zen 2 at 256 bits; Zen 4 runs a 512-bit FMA
 * through both of its 256-bit pipes). Until the host is measured these are what a target says;
 * a register tile needs units x latency independent accumulators to keep the FMA pipes busy.
 */
const NOMINAL_FMA: { readonly [I in Isa]: { readonly units: number; readonly latency: number } } = {
  avx512: { units: 2, latency: 4 },
  avx2: { units: 2, latency: 4 },
  sse: { units: 2, latency: 4 },
  neon: { units: 2, latency: 4 },
  simd128: { units: 1, latency: 4 },
  scalar: { units: 1, latency: 4 },
}

/** A CPU (the c target), or the CPU a portable target (js, wasm, interp) runs on. */
export interface CpuAttrs {
  readonly isa: Isa
  /** fp32 lanes of the vector unit the blocked layout and the schedules plan for (0: keep NCHW). */
  readonly vectorLanes: number
  /** Cores the parallel loops may use. */
  readonly cores: number
  /** Bytes of the L1 data cache, of L2, and of the last-level cache. */
  readonly l1Bytes: number
  readonly l2Bytes: number
  readonly cacheBytes: number
  /** Fused multiply-add: whether there is one, how many pipes, and their latency in cycles. */
  readonly fma: boolean
  readonly fmaUnits: number
  readonly fmaLatency: number
  /** FMA pipes at each vector width measured (fp32 lanes → pipes), where the host was measured (the blocked layout's block). */
  readonly fmaUnitsByLanes?: Readonly<Record<string, number>>
  /** AVX-512 VNNI (int8 dot products). */
  readonly vnni: boolean
}

/**
 * An NVIDIA GPU (the cuda target), by compute capability: the per-block limits of the CUDA
 * Programming Guide's table of technical specifications.
 */
export interface CudaAttrs {
  /** "8.0" (A100), "9.0" (H100). */
  readonly computeCapability: { readonly major: number; readonly minor: number }
  readonly maxThreadsPerBlock: number
  /** Shared memory a block may use without opting in, and with cudaFuncSetAttribute's opt-in. */
  readonly sharedMemoryPerBlock: number
  readonly sharedMemoryPerBlockOptin: number
  /** 32-bit registers per block. */
  readonly registersPerBlock: number
  readonly warpSize: number
  /** Streaming multiprocessors (the grid a schedule should fill); 0 when not known. */
  readonly multiprocessors: number
  /** Resident threads per multiprocessor (what a block size divides into for occupancy). */
  readonly maxThreadsPerMultiprocessor: number
  /** A block's largest extent in x, y and z, and a grid's. */
  readonly maxBlockDim: readonly [number, number, number]
  readonly maxGridDim: readonly [number, number, number]
  /** Widest access one thread makes in one instruction (bytes: a float4's 16). */
  readonly maxVectorBytes: number
  /** 32-bit registers one thread may hold (ptxas's ceiling; more spills to local memory). */
  readonly maxRegistersPerThread: number
  /**
   * How the artifact stores float32 tensors (`--precision`): absent or "fp32" as float; "fp16" as
   * `__half` in the arena (constants, intermediates), the model's inputs and outputs float32 at its
   * boundary, every kernel computing and accumulating in float32 (docs/cuda.md, "fp16").
   */
  readonly precision?: CudaPrecision
}

/** The cuda target's storage precisions. */
export type CudaPrecision = "fp32" | "fp16"
export const CUDA_PRECISIONS: readonly CudaPrecision[] = ["fp32", "fp16"]
export const isCudaPrecision = (s: string): s is CudaPrecision => (CUDA_PRECISIONS as readonly string[]).includes(s)

/** A record with its storage precision (fp32, the default, leaves the record as it was). */
export const withPrecision = (a: CudaAttrs, precision: CudaPrecision | undefined): CudaAttrs => (precision === "fp16" ? { ...a, precision } : a)

/**
 * A VTA accelerator's hardware configuration (vta_config.json / hw_spec.h), each a log2: data
 * widths in bits, the GEMM core's shape (BATCH x BLOCK_IN times BLOCK_IN x BLOCK_OUT) and the
 * on-chip buffers in bytes.
 */
export interface VtaAttrs {
  readonly logInpWidth: number
  readonly logWgtWidth: number
  readonly logAccWidth: number
  readonly logBatch: number
  readonly logBlockIn: number
  readonly logBlockOut: number
  readonly logUopBuffSize: number
  readonly logInpBuffSize: number
  readonly logWgtBuffSize: number
  readonly logAccBuffSize: number
}

/** Each target kind's attributes. A new kind is a new key here plus its Backend record. */
export interface TargetAttrsOf {
  /** The reference interpreter (runs the optimized graph; the attributes are the host's). */
  readonly interp: CpuAttrs
  /** One ES module (the portable reference backend). */
  readonly js: CpuAttrs
  /** One WebAssembly module with SIMD128. */
  readonly wasm: CpuAttrs
  /** C built by gcc into a shared library. */
  readonly c: CpuAttrs
  /** CUDA C kernels plus a host launcher, built by nvcc; runs on an NVIDIA GPU. */
  readonly cuda: CudaAttrs
}

export type TargetKind = keyof TargetAttrsOf

/** Every kind once (typed over TargetAttrsOf: a kind added there fails to compile until it is listed here). */
const KINDS: { readonly [K in TargetKind]: null } = { interp: null, js: null, c: null, wasm: null, cuda: null }

export const TARGET_KINDS: readonly TargetKind[] = Object.keys(KINDS) as TargetKind[]

export const isTargetKind = (s: string): s is TargetKind => (TARGET_KINDS as readonly string[]).includes(s)

/** A target: its kind and that kind's attributes (a union over the kinds, narrowed by `kind`). */
export type Target<K extends TargetKind = TargetKind> = { readonly [P in K]: { readonly kind: P; readonly attrs: TargetAttrsOf[P] } }[K]

/** Attributes a target cannot have (a negative core count, a lane count that is no power of two). */
export class TargetError extends Data.TaggedError("TargetError")<{ readonly target: string; readonly reason: string }> {
  override get message(): string {
    return `target ${this.target}: ${this.reason}`
  }
}

/** Portable CPU defaults: one scalar core, 32 KiB / 256 KiB / 8 MiB of cache. */
const CPU_DEFAULTS: CpuAttrs = {
  isa: "scalar",
  vectorLanes: 1,
  cores: 1,
  l1Bytes: 32 * 1024,
  l2Bytes: 256 * 1024,
  cacheBytes: 8 * 1024 * 1024,
  fma: false,
  fmaUnits: NOMINAL_FMA.scalar.units,
  fmaLatency: NOMINAL_FMA.scalar.latency,
  vnni: false,
}

const positiveInt = (n: number) => Number.isInteger(n) && n >= 1

/** Why these CPU attributes cannot be (undefined when they can). */
export const cpuAttrsProblem = (a: CpuAttrs): string | undefined => {
  if (!(a.isa in ISA_LANES)) return `unknown isa '${String(a.isa)}'`
  if (!(Number.isInteger(a.vectorLanes) && a.vectorLanes >= 0 && (a.vectorLanes & (a.vectorLanes - 1)) === 0)) return `vectorLanes ${a.vectorLanes} is not 0 or a power of two`
  for (const k of ["cores", "l1Bytes", "l2Bytes", "cacheBytes", "fmaUnits", "fmaLatency"] as const) if (!positiveInt(a[k])) return `${k} ${a[k]} is not a positive integer`
  for (const [l, u] of Object.entries(a.fmaUnitsByLanes ?? {})) if (!positiveInt(Number(l)) || !positiveInt(u)) return `fmaUnitsByLanes ${l}: ${u} is not lanes → a positive pipe count`
  return undefined
}

/**
 * CPU attributes over the portable defaults: vectorLanes follows the isa unless given, and the FMA
 * units and latency are the isa's nominal ones unless given. Throws TargetError on impossible values.
 */
export const cpuAttrs = (attrs: Partial<CpuAttrs> = {}): CpuAttrs => {
  const isa = attrs.isa ?? CPU_DEFAULTS.isa
  const out: CpuAttrs = {
    ...CPU_DEFAULTS,
    fmaUnits: NOMINAL_FMA[isa]?.units ?? 1,
    fmaLatency: NOMINAL_FMA[isa]?.latency ?? 4,
    ...attrs,
    isa,
    vectorLanes: attrs.vectorLanes ?? ISA_LANES[isa] ?? 1,
  }
  const bad = cpuAttrsProblem(out)
  if (bad) throw new TargetError({ target: "cpu", reason: bad })
  return out
}

/** The kinds whose attributes are a CPU's (every kind but cuda). */
export type CpuTargetKind = Exclude<TargetKind, "cuda">

/** A target of a CPU kind with these attributes over the defaults (see cpuAttrs). */
export const makeTarget = <K extends CpuTargetKind>(kind: K, attrs: Partial<TargetAttrsOf[K]> = {}): Target<K> =>
  ({ kind, attrs: cpuAttrs(attrs) }) as unknown as Target<K>

/** The same target with some attributes replaced (validated again). */
export const withAttrs = <K extends CpuTargetKind>(t: Target<K>, attrs: Partial<TargetAttrsOf[K]>): Target<K> =>
  makeTarget(t.kind as K, { ...(t.attrs as TargetAttrsOf[K]), ...attrs })

/**
 * The key tuning records are filed under: the kind, the lanes the layout and schedules were made
 * for, and the cores (a record tuned for 4 lanes or 1 core does not apply to 16 or 2).
 */
export const targetKey = (t: { readonly kind: string; readonly vectorLanes: number; readonly cores: number }): string =>
  `${t.kind}:lanes=${Math.max(t.vectorLanes, 1)}:cores=${t.cores}`

/** The lanes and cores a target's schedules and records are keyed by (a GPU: one lane, its multiprocessors as cores). */
export const lanesAndCores = (t: Target): { readonly vectorLanes: number; readonly cores: number } =>
  t.kind === "cuda" ? { vectorLanes: 1, cores: Math.max(1, t.attrs.multiprocessors) } : { vectorLanes: t.attrs.vectorLanes, cores: t.attrs.cores }

/** targetKey of a Target (a GPU's: its kind and compute capability, `cuda:sm_90`). */
export const keyOf = (t: Target): string => (t.kind === "cuda" ? `cuda:${cudaArchOf(t.attrs)}` : targetKey({ kind: t.kind, vectorLanes: t.attrs.vectorLanes, cores: t.attrs.cores }))

// ---------------------------------------------------------------------------------------------
// CUDA

/**
 * Each compute capability Tessera knows, with the shared memory a block may opt in to (bytes) and
 * the resident threads per multiprocessor (the CUDA C++ Programming Guide's table of technical
 * specifications per compute capability).
 */
const CUDA_CAPABILITIES: readonly (readonly [string, number, number])[] = [
  ["7.0", 96 * 1024, 2048],
  ["7.5", 64 * 1024, 1024],
  ["8.0", 163 * 1024, 2048],
  ["8.6", 99 * 1024, 1536],
  ["8.7", 163 * 1024, 2048],
  ["8.9", 99 * 1024, 1536],
  ["9.0", 227 * 1024, 2048],
]

/**
 * A GPU's attributes from its compute capability ("9.0") and SM count: 1024 threads, 48 KiB of
 * shared memory (more by opt-in), 64 Ki registers per block and warps of 32 on every capability
 * from 7.0 on. Throws TargetError on a capability it does not know.
 */
export const cudaAttrs = (capability: string, multiprocessors = 0): CudaAttrs => {
  const known = CUDA_CAPABILITIES.find(([cc]) => cc === capability)
  const m = /^(\d+)\.(\d+)$/.exec(capability)
  if (!known || !m) throw new TargetError({ target: "cuda", reason: `compute capability '${capability}' is not one Tessera knows (${CUDA_CAPABILITIES.map(([cc]) => cc).join(", ")})` })
  if (!(Number.isInteger(multiprocessors) && multiprocessors >= 0)) throw new TargetError({ target: "cuda", reason: `multiprocessors ${multiprocessors} is not a count` })
  return {
    computeCapability: { major: Number(m[1]), minor: Number(m[2]) },
    maxThreadsPerBlock: 1024,
    sharedMemoryPerBlock: 48 * 1024,
    sharedMemoryPerBlockOptin: known[1],
    registersPerBlock: 64 * 1024,
    warpSize: 32,
    multiprocessors,
    maxThreadsPerMultiprocessor: known[2],
    maxBlockDim: [1024, 1024, 64],
    maxGridDim: [2 ** 31 - 1, 65535, 65535],
    maxVectorBytes: 16,
    maxRegistersPerThread: 255,
  }
}

/** nvcc's name of a GPU's architecture: `sm_90` for compute capability 9.0. */
export const cudaArchOf = (a: CudaAttrs): string => `sm_${a.computeCapability.major}${a.computeCapability.minor}`

/**
 * The GPUs `--cuda-arch` names, by nvcc's architecture name: the capability and the SM count of the
 * part Tessera plans for (sm_90: H100 SXM and H200, 132 SMs; sm_80: A100, 108 SMs; the others' SM
 * count unknown, 0).
 */
const CUDA_PARTS: { readonly [arch: string]: readonly [string, number] } = {
  sm_70: ["7.0", 80],
  sm_75: ["7.5", 0],
  sm_80: ["8.0", 108],
  sm_86: ["8.6", 0],
  sm_87: ["8.7", 0],
  sm_89: ["8.9", 0],
  sm_90: ["9.0", 132],
}

/** The architectures `--cuda-arch` may name. */
export const CUDA_ARCHS: readonly string[] = Object.keys(CUDA_PARTS)

export const isCudaArch = (s: string): boolean => Object.prototype.hasOwnProperty.call(CUDA_PARTS, s)

/** The default GPU architecture of the cuda target (Hopper: H100, H200). */
export const DEFAULT_CUDA_ARCH = "sm_90"

/** The GPU attributes of an nvcc architecture name (`sm_90`, `sm_80`, …); throws TargetError on one Tessera does not know. */
export const cudaAttrsForArch = (arch: string = DEFAULT_CUDA_ARCH): CudaAttrs => {
  const part = isCudaArch(arch) ? CUDA_PARTS[arch] : undefined
  if (!part) throw new TargetError({ target: "cuda", reason: `--cuda-arch '${arch}' is not one Tessera knows (${Object.keys(CUDA_PARTS).join(", ")})` })
  return cudaAttrs(part[0], part[1])
}

// ---------------------------------------------------------------------------------------------
// VTA

/** The default VTA configuration (the Pynq board's): 8-bit inputs and weights, 32-bit sums, a 1x16x16 GEMM core. */
export const VTA_DEFAULT: VtaAttrs = {
  logInpWidth: 3,
  logWgtWidth: 3,
  logAccWidth: 5,
  logBatch: 0,
  logBlockIn: 4,
  logBlockOut: 4,
  logUopBuffSize: 15,
  logInpBuffSize: 15,
  logWgtBuffSize: 18,
  logAccBuffSize: 17,
}

/** A VTA configuration over the default; throws TargetError when a field is not a small non-negative integer. */
export const vtaAttrs = (attrs: Partial<VtaAttrs> = {}): VtaAttrs => {
  const out = { ...VTA_DEFAULT, ...attrs }
  for (const [k, v] of Object.entries(out))
    if (!(Number.isInteger(v) && v >= 0 && v <= 31)) throw new TargetError({ target: "vta", reason: `${k} ${v} is not a log2 between 0 and 31` })
  return out
}
