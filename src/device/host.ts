// The host, read at the edge: the CPU's vector ISA and FMA from /proc/cpuinfo, its caches from
// /sys (else CPUID through getconf), its cores from the OS, its FMA pipes and latency measured (./fma.ts); portable defaults
// where those are absent. Pure stages never call this; the CLI, the benchmarks and the devices do,
// and hand the result on as a Target.
import { spawnSync } from "node:child_process"
import { readFileSync, readdirSync } from "node:fs"
import * as os from "node:os"
import { cpuAttrs, type CpuAttrs, type Isa, type Target } from "../ast/target.js"
import { hostFma } from "./fma.js"

/** The CPU features a /proc/cpuinfo text declares (the first processor's flags line). */
export const parseCpuInfo = (text: string): Pick<CpuAttrs, "isa" | "fma" | "vnni"> => {
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

type Caches = Partial<Pick<CpuAttrs, "l1Bytes" | "l2Bytes" | "cacheBytes">>

/** Data / unified cache bytes by level as the record's fields: L1, L2 and the last level. */
const cachesOf = (byLevel: ReadonlyMap<number, number>): Caches => {
  const levels = [...byLevel.keys()].sort((a, b) => a - b)
  return {
    ...(byLevel.has(1) ? { l1Bytes: byLevel.get(1)! } : {}),
    ...(byLevel.has(2) ? { l2Bytes: byLevel.get(2)! } : {}),
    ...(levels.length ? { cacheBytes: byLevel.get(levels[levels.length - 1])! } : {}),
  }
}

/** Cache sizes of cpu0 from sysfs (data / unified caches by level). */
const sysfsCaches = (): Caches => {
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
  return cachesOf(byLevel)
}

/**
 * Cache sizes from `getconf -a` (glibc's sysconf, which reads them off CPUID on x86): the data
 * cache of level 1 (`LEVEL1_DCACHE_SIZE`), the unified ones of levels 2 to 4; a size of 0 or none
 * is no cache.
 */
export const parseGetconfCaches = (text: string): Caches => {
  const byLevel = new Map<number, number>()
  for (const m of text.matchAll(/^LEVEL([1-4])_(DCACHE|CACHE)_SIZE[ \t]+(\d+)[ \t]*$/gm)) {
    const level = Number(m[1])
    const bytes = Number(m[3])
    if ((level === 1) !== (m[2] === "DCACHE") || !(bytes > 0)) continue
    byLevel.set(level, bytes)
  }
  return cachesOf(byLevel)
}

/**
 * The host's caches: sysfs's, else (a virtual machine whose kernel lists none: the Zen 5 these
 * rules were measured on) what CPUID says through getconf. Without either the record keeps the
 * portable 32 KiB / 256 KiB — a quarter of a Zen 4 or Zen 5 core's L2, which held the conv rule's
 * weight tile to one channel block on layers where two fit.
 */
const hostCaches = (): Caches => {
  const sysfs = sysfsCaches()
  if (sysfs.l2Bytes !== undefined) return sysfs
  const run = spawnSync("getconf", ["-a"], { encoding: "utf8", timeout: 5000 })
  const fromCpuid = run.status === 0 ? parseGetconfCaches(run.stdout) : {}
  return { ...sysfs, ...fromCpuid }
}

/** What identifies this CPU for the measurement cache: its model name and flags (first processor). */
export const cpuIdentity = (cpuinfo: string): string =>
  [/^model name\s*:(.*)$/m, /^(?:flags|Features)\s*:(.*)$/m].map((re) => re.exec(cpuinfo)?.[1]?.trim() ?? "").join("\n")

let host: CpuAttrs | undefined

/**
 * The CPU we run on: its ISA, FMA, VNNI, every core it lets us use, its caches, and its FMA pipes
 * and latency at its vector width, measured once per CPU model (./fma.ts; the ISA's nominal values
 * where nothing can be measured). Read once per process.
 */
export const hostCpu = (): CpuAttrs => {
  if (host) return host
  const info = readOr("/proc/cpuinfo")
  const features = info ? parseCpuInfo(info) : process.arch === "arm64" ? { isa: "neon" as const, fma: true, vnni: false } : {}
  const cores = typeof os.availableParallelism === "function" ? os.availableParallelism() : os.cpus().length
  const nominal = cpuAttrs({ ...features, cores: Math.max(1, cores), ...hostCaches() })
  const widths = [4, 8, 16].filter((l) => l <= nominal.vectorLanes)
  const record = info && widths.length ? hostFma(cpuIdentity(info), widths) : undefined
  const measured = record?.byLanes[String(nominal.vectorLanes)]
  const byLanes = record ? Object.fromEntries(Object.entries(record.byLanes).map(([l, f]) => [l, f.units])) : undefined
  host = measured ? cpuAttrs({ ...nominal, fmaUnits: measured.units, fmaLatency: measured.latency, fmaUnitsByLanes: byLanes }) : nominal
  return host
}

/** The host CPU as a c target. */
export const hostTarget = (): Target<"c"> => ({ kind: "c", attrs: hostCpu() })

/** Bytes the tuner's measuring writes between timed calls: twice this machine's L2 (MeasureOptions.flushBytes). */
export const cacheSweepBytes = (): number => 2 * hostCpu().l2Bytes
