// This CPU's FMA pipes and their latency, measured per vector width (what a register tile is sized
// from: units × latency independent accumulators keep the pipes busy), cached per CPU model so the
// measurement runs once per machine. Read at the edge, like the rest of src/device/host.ts.
//
// How: one small C program (gcc -O2 -march=native) times, per vector width, a chain of dependent
// vector FMAs (one accumulator: the latency) and N independent chains for N up to 12 (the best
// time per FMA: the throughput), and a chain of dependent integer adds, one cycle each on every
// CPU we know of (the clock). latency = chain time / cycle, units = cycle / best time per FMA, both
// rounded. Each figure is the minimum of many short runs, so a busy machine slows some runs but
// not the minimum (mostly: a measurement on a loaded machine can come out low; delete the cache
// file, or set TESSERA_CACHE_DIR elsewhere, to measure again).
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { compilerAvailable } from "./c/build.js"
import { cacheRoot } from "./cache-root.js"
import { runProbeSync } from "./process-group.js"

/** FMA pipes and latency (cycles) at one vector width. */
export interface FmaShape {
  readonly units: number
  readonly latency: number
}

/** What the program prints, in nanoseconds: one integer add, and per width the FMA chain and the best per-FMA time. */
export interface FmaTimings {
  readonly addNs: number
  readonly widths: readonly { readonly lanes: number; readonly chainNs: number; readonly bestNs: number }[]
}

/** The record cached per CPU model: lanes → pipes and latency. */
export interface FmaRecord {
  readonly version: 1
  readonly cpu: string
  readonly byLanes: { readonly [lanes: string]: FmaShape }
}

const ACCUMULATORS = [1, 2, 3, 4, 6, 8, 10, 12] as const

/** Pipes and latency from the timings: rounded, and kept within what CPUs have (1–4 pipes, 1–16 cycles). */
export const fmaShapes = (t: FmaTimings): { readonly [lanes: string]: FmaShape } => {
  const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x))
  const out: { [lanes: string]: FmaShape } = {}
  for (const w of t.widths) {
    if (!(t.addNs > 0 && w.chainNs > 0 && w.bestNs > 0)) continue
    out[String(w.lanes)] = { latency: clamp(Math.round(w.chainNs / t.addNs), 1, 16), units: clamp(Math.round(t.addNs / w.bestNs), 1, 4) }
  }
  return out
}

/** The program's output lines (`add NS`, `fma LANES ACC NS_PER_FMA`) → timings; undefined when malformed. */
export const parseFmaOutput = (text: string): FmaTimings | undefined => {
  let addNs: number | undefined
  const per = new Map<number, Map<number, number>>()
  for (const line of text.split("\n")) {
    const f = line.trim().split(/\s+/)
    if (f[0] === "add" && f.length === 2) addNs = Number(f[1])
    else if (f[0] === "fma" && f.length === 4) {
      const [lanes, acc, ns] = [Number(f[1]), Number(f[2]), Number(f[3])]
      if (!(Number.isInteger(lanes) && Number.isInteger(acc) && ns > 0)) return undefined
      if (!per.has(lanes)) per.set(lanes, new Map())
      per.get(lanes)!.set(acc, ns)
    }
  }
  if (!(addNs !== undefined && addNs > 0) || per.size === 0) return undefined
  const widths = [...per].map(([lanes, byAcc]) => ({ lanes, chainNs: byAcc.get(1) ?? NaN, bestNs: Math.min(...byAcc.values()) }))
  if (widths.some((w) => !(w.chainNs > 0))) return undefined
  return { addNs, widths }
}

/** The C program that times it all, for these vector widths (fp32 lanes). */
export const fmaProgram = (lanesList: readonly number[]): string => {
  const kernel = (lanes: number, acc: number) => `
static double fma_${lanes}_${acc}(long iters) {
  typedef float vf __attribute__((vector_size(${4 * lanes})));
  vf a[${acc}], b, c;
  for (int i = 0; i < ${lanes}; i++) { b[i] = 1.0f - 1e-7f * i; c[i] = 1e-7f; }
  for (int k = 0; k < ${acc}; k++) a[k] = b * (float)(k + 1);
  double t0 = now();
  for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
    for (int k = 0; k < ${acc}; k++) a[k] = a[k] * b + c;
  }
  double t = now() - t0;
  float s = 0; for (int k = 0; k < ${acc}; k++) s += a[k][0];
  sink += s;
  return t / ((double)iters * ${acc});
}`
  const kernels = lanesList.flatMap((l) => ACCUMULATORS.map((a) => kernel(l, a))).join("\n")
  const calls = lanesList.flatMap((l) => ACCUMULATORS.map((a) => `  printf("fma ${l} ${a} %.6f\\n", best(fma_${l}_${a}));`)).join("\n")
  return `#include <stdio.h>
#include <time.h>
static volatile float sink;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
/* ns per dependent integer add: 8 adds a round, each reading the last (one cycle each) */
static double add_chain(long iters) {
  long x = 1, y = 3;
  double t0 = now();
  for (long i = 0; i < iters; i++) {
    x += y; __asm__ volatile("" : "+r"(x)); x += y; __asm__ volatile("" : "+r"(x));
    x += y; __asm__ volatile("" : "+r"(x)); x += y; __asm__ volatile("" : "+r"(x));
    x += y; __asm__ volatile("" : "+r"(x)); x += y; __asm__ volatile("" : "+r"(x));
    x += y; __asm__ volatile("" : "+r"(x)); x += y; __asm__ volatile("" : "+r"(x));
  }
  double t = now() - t0;
  sink += (float)x;
  return t / ((double)iters * 8);
}
/* the least of 15 runs of about 2 ms each (after one warm-up run) */
static double best(double (*f)(long)) {
  long iters = 1000;
  while (f(iters) * iters < 2e5) iters *= 2;
  double m = 1e30;
  for (int r = 0; r < 15; r++) { double t = f(iters); if (t < m) m = t; }
  return m;
}
${kernels}
int main(void) {
  printf("add %.6f\\n", best(add_chain));
${calls}
  return 0;
}
`
}

/**
 * Times the program here: undefined where gcc is missing or the run fails — or is stopped (the
 * supervisor's stop flag: gcc and the program run as probes, killed with their groups, so a stop
 * during a first run on a fresh cache ends at once; nothing is cached).
 */
export const measureFma = (lanesList: readonly number[]): FmaTimings | undefined => {
  if (!compilerAvailable()) return undefined
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-fma-"))
  try {
    const src = path.join(dir, "fma.c")
    fs.writeFileSync(src, fmaProgram(lanesList))
    // -O2 without fast-math: the FMA chains stay as written (contracted into fused multiply-adds)
    if (runProbeSync("gcc", ["-O2", "-march=native", "-ffp-contract=fast", "-o", path.join(dir, "fma"), src]).code !== 0) return undefined
    const run = runProbeSync(path.join(dir, "fma"), [], 60_000)
    return run.code === 0 ? parseFmaOutput(run.stdout) : undefined
  } catch {
    return undefined
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}


const isShape = (x: unknown): x is FmaShape => {
  const s = x as FmaShape
  return typeof s === "object" && s !== null && Number.isInteger(s.units) && s.units >= 1 && s.units <= 4 && Number.isInteger(s.latency) && s.latency >= 1 && s.latency <= 16
}

/** A cached record, when the text is one for this CPU and every field is in range (else undefined: measure again). */
export const parseFmaRecord = (text: string, cpu: string): FmaRecord | undefined => {
  try {
    const r = JSON.parse(text) as FmaRecord
    if (r.version !== 1 || r.cpu !== cpu || typeof r.byLanes !== "object" || r.byLanes === null) return undefined
    return Object.values(r.byLanes).every(isShape) ? r : undefined
  } catch {
    return undefined
  }
}

/**
 * This CPU's FMA shape per vector width: the cached record for `cpu` (its model name and flags), or
 * a measurement, written to the cache for next time (a temporary file, then a rename). Undefined
 * where nothing can be measured (no gcc): the target keeps its ISA's nominal values.
 */
export const hostFma = (cpu: string, lanesList: readonly number[]): FmaRecord | undefined => {
  const key = createHash("sha256").update(`${cpu}\n${lanesList.join(",")}`).digest("hex").slice(0, 24)
  const dir = path.join(cacheRoot(), "cpu")
  const file = path.join(dir, `fma-${key}.json`)
  try {
    const cached = parseFmaRecord(fs.readFileSync(file, "utf8"), cpu)
    if (cached) return cached
  } catch {
    // not cached yet
  }
  const timings = measureFma(lanesList)
  if (!timings) return undefined
  const record: FmaRecord = { version: 1, cpu, byLanes: fmaShapes(timings) }
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    const tmp = `${file}.${process.pid}.tmp`
    fs.writeFileSync(tmp, JSON.stringify(record, null, 2) + "\n", { mode: 0o600 })
    fs.renameSync(tmp, file)
  } catch {
    // an unwritable cache: measured again next time
  }
  return record
}
