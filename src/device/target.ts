// Targets as data: a kind and the attributes schedule templates and emitters adapt to (vector
// width, cores, caches, GPU limits). `hostTarget()` describes the machine we run on from
// /proc/cpuinfo and /sys (falling back to portable defaults where those are absent).
import { readFileSync, readdirSync } from "node:fs"
import * as os from "node:os"

export type TargetKind = "c" | "js" | "wasm" | "cuda" | "vta" | "interp"

export type Isa = "avx512" | "avx2" | "sse" | "neon" | "simd128" | "scalar"

export interface TargetAttrs {
  /** The vector instruction set the emitted code may use. */
  readonly isa: Isa
  /** fp32 lanes of one vector register (16 AVX-512, 8 AVX2, 4 SSE / NEON / SIMD128, 1 scalar). */
  readonly vectorLanes: number
  /** Cores to run parallel loops on. */
  readonly cores: number
  /** Bytes of the L1 data cache, of L2, and of the last-level cache. */
  readonly l1Bytes: number
  readonly l2Bytes: number
  readonly cacheBytes: number
  /** Whether the CPU has fused multiply-add and AVX-512 VNNI (int8 dot products). */
  readonly fma: boolean
  readonly vnni: boolean
  /** GPU limits (cuda only). */
  readonly maxThreadsPerBlock?: number
  readonly sharedMemoryBytes?: number
}

export interface Target {
  readonly kind: TargetKind
  readonly attrs: TargetAttrs
}

const LANES: { readonly [I in Isa]: number } = { avx512: 16, avx2: 8, sse: 4, neon: 4, simd128: 4, scalar: 1 }

const DEFAULT_ATTRS: TargetAttrs = { isa: "scalar", vectorLanes: 1, cores: 1, l1Bytes: 32 * 1024, l2Bytes: 256 * 1024, cacheBytes: 8 * 1024 * 1024, fma: false, vnni: false }

/** A target of `kind` with `attrs` over portable defaults (vectorLanes follows isa unless given). */
export const makeTarget = (kind: TargetKind, attrs: Partial<TargetAttrs> = {}): Target => ({
  kind,
  attrs: { ...DEFAULT_ATTRS, ...attrs, vectorLanes: attrs.vectorLanes ?? LANES[attrs.isa ?? DEFAULT_ATTRS.isa] },
})

/** The CPU features a /proc/cpuinfo text declares (the first processor's flags line). */
export const parseCpuInfo = (text: string): Pick<TargetAttrs, "isa" | "fma" | "vnni"> => {
  const line = /^(?:flags|Features)\s*:(.*)$/m.exec(text)
  const flags = new Set((line?.[1] ?? "").trim().split(/\s+/))
  const isa: Isa = flags.has("avx512f") ? "avx512" : flags.has("avx2") ? "avx2" : flags.has("sse2") ? "sse" : flags.has("asimd") || flags.has("neon") ? "neon" : "scalar"
  return { isa, fma: flags.has("fma") || flags.has("asimd"), vnni: flags.has("avx512_vnni") }
}

/** "32K" / "1024K" / "32M" (sysfs cache sizes) → bytes. */
export const parseCacheSize = (s: string): number | undefined => {
  const m = /^\s*(\d+)\s*([KMG]?)/i.exec(s)
  if (!m) return undefined
  const unit = { "": 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 }[m[2].toUpperCase() as "" | "K" | "M" | "G"]
  return Number(m[1]) * unit
}

const readOr = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

/** Cache sizes of cpu0 from sysfs (data / unified caches by level). */
const hostCaches = (): Partial<Pick<TargetAttrs, "l1Bytes" | "l2Bytes" | "cacheBytes">> => {
  const dir = "/sys/devices/system/cpu/cpu0/cache"
  let entries: string[]
  try {
    entries = readdirSync(dir).filter((d) => d.startsWith("index")).sort()
  } catch {
    return {}
  }
  const byLevel = new Map<number, number>()
  for (const d of entries) {
    const type = readOr(`${dir}/${d}/type`)?.trim()
    const level = Number(readOr(`${dir}/${d}/level`)?.trim())
    const size = parseCacheSize(readOr(`${dir}/${d}/size`) ?? "")
    if (type === "Instruction" || !level || size === undefined) continue
    byLevel.set(level, size)
  }
  const levels = [...byLevel.keys()].sort((a, b) => a - b)
  return {
    ...(byLevel.has(1) ? { l1Bytes: byLevel.get(1)! } : {}),
    ...(byLevel.has(2) ? { l2Bytes: byLevel.get(2)! } : {}),
    ...(levels.length ? { cacheBytes: byLevel.get(levels[levels.length - 1])! } : {}),
  }
}

/** The machine we run on, as a target of `kind` (default "c"). */
/** Bytes the tuner's measuring writes between timed calls: twice this machine's L2 (MeasureOptions.flushBytes). */
export const cacheSweepBytes = (): number => 2 * hostTarget("c").attrs.l2Bytes

export const hostTarget = (kind: TargetKind = "c"): Target => {
  const info = readOr("/proc/cpuinfo")
  const features = info ? parseCpuInfo(info) : process.arch === "arm64" ? { isa: "neon" as const, fma: true, vnni: false } : {}
  const cores = typeof os.availableParallelism === "function" ? os.availableParallelism() : os.cpus().length
  return makeTarget(kind, { ...features, cores: Math.max(1, cores), ...hostCaches() })
}
