// What a parallel region costs on the c target's thread pool, and what one core does meanwhile,
// measured on this host and cached per CPU model (as ./fma.ts's FMA record): the figures
// lowering.SerialSmallKernels decides from (src/lowering/tir/serial-small-kernels.ts). A device
// never imports an emitter: the measurer is handed the pool's C text (src/emit/c/pool.ts, static).
//
// How: one C program (the pool's text, then a timing main; the c target's flags) measures, at each
// thread count, in three sittings, each figure a median of 301 runs with 2 µs of the caller's own
// work between them (the executor's gap between kernels, under the workers' 20 µs spin):
// - `region`: a region of threads × 4 iterations of 1 µs of work each, its time less that work
//   ÷ threads — what starting and joining a region adds (the workers spinning); also after 50 µs,
//   past the spin (the workers asleep: a futex wake), and an empty region: diagnostics only.
// - `stream`: y = y/2 + x over 64 iterations of a contiguous run, x first written by the caller (the
//   kernel before it wrote it), on the caller alone and on the pool, for x and y from 4 KiB to 2 MiB
//   each: where the pool starts to win (interpolated between the sizes around it) is the break-even,
//   one core's time there and its params' bytes over that time the streaming rate.
// - `peak`: one core's fp32 FLOP rate (12 independent vector FMA chains at the ISA's width).
// A sitting counts only where the worker took part in most regions (MIN_JOINED): where other
// processes hold the cores, the caller runs the regions alone and a late worker holds the join, and
// what is timed is the load. The record keeps the least of the valid sittings' medians per figure;
// with no valid sitting nothing is recorded or cached (the c target keeps the bytes rule, and the
// next process measures again). Delete the cache file, or set TESSERA_CACHE_DIR elsewhere, to
// measure again.
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { ParallelRegionRecord, RegionMeasure } from "../ast/target.js"
import { C_POOL_FLAGS, compileFlags, compilerAvailable } from "./c/build.js"
import { cacheRoot } from "./cache-root.js"

/**
 * Regions (of the 301 at the executor's gap) the worker must take part in for a sitting to count.
 * On a machine whose cores other processes hold, the worker gets a core now and then: the caller
 * runs the regions alone, and one the worker joins late waits for it (on the shared 2-core Zen 5 of
 * 2026-11-27, load 10–12: it joined 0–50 of 301, a joined region cost 30–45 µs). Such a sitting
 * times the load, not the machine; with none left, nothing is recorded (the bytes rule holds).
 */
export const MIN_JOINED = 151

/** The caller's own work between timed regions (ns): the executor's gap between kernels. */
export const REGION_GAP_NS = 2000

/** What the program prints, parsed: per thread count its regions' costs by gap and its streaming loop by size; the peak. */
export interface RegionTimings {
  readonly flopsPerNs: number
  readonly byThreads: ReadonlyMap<number, ThreadTimings>
}

export interface ThreadTimings {
  /** The region's added time (ns) by the caller's gap before it (ns): least of the sittings' medians. */
  readonly regionNs: ReadonlyMap<number, number>
  /** An empty region (ns) by gap. */
  readonly emptyNs: ReadonlyMap<number, number>
  /** The streaming loop by params' bytes: one core's time and the pool's (ns), least of the sittings' medians, by size ascending. */
  readonly stream: readonly { readonly bytes: number; readonly serialNs: number; readonly parallelNs: number }[]
}

const least = (m: Map<number, number>, k: number, x: number) => m.set(k, Math.min(m.get(k) ?? Infinity, x))

/**
 * The program's lines → timings; undefined when malformed. Each sitting begins with `peak F`; then
 * per thread count `region N GAP NS JOINED` (the region's added time, a median over the JOINED runs
 * of REPS where the worker took part), `empty N GAP NS REPS` and `stream N BYTES SERIAL PARALLEL
 * JOINED` (medians over every run). A sitting counts for a thread count only where its worker
 * joined at least MIN_JOINED of the regions at the executor's gap: else other processes held the
 * cores, and what it timed was the load, not the machine.
 */
export const parseRegionOutput = (text: string): RegionTimings | undefined => {
  let peak = 0
  type Sitting = { region: Map<number, number>; empty: Map<number, number>; serial: Map<number, number>; parallel: Map<number, number>; joined: number }
  const sittings: Map<number, Sitting>[] = []
  const of = (n: number) => {
    if (sittings.length === 0) sittings.push(new Map())
    const now = sittings[sittings.length - 1]
    if (!now.has(n)) now.set(n, { region: new Map(), empty: new Map(), serial: new Map(), parallel: new Map(), joined: 0 })
    return now.get(n)!
  }
  for (const line of text.split("\n")) {
    const f = line.trim().split(/\s+/)
    const x = f.slice(1).map(Number)
    if (x.some((v) => !Number.isFinite(v))) return undefined
    if (f[0] === "peak" && x.length === 1 && x[0] > 0) {
      peak = Math.max(peak, x[0])
      sittings.push(new Map())
    } else if (f[0] === "region" && x.length === 4 && x[0] >= 2) {
      const t = of(x[0])
      if (x[3] > 0) t.region.set(x[1], x[2])
      if (x[1] === REGION_GAP_NS) t.joined = x[3]
    } else if (f[0] === "empty" && x.length === 4 && x[0] >= 2) of(x[0]).empty.set(x[1], x[2])
    else if (f[0] === "stream" && x.length === 5 && x[0] >= 2 && x[1] > 0 && x[2] > 0 && x[3] > 0) {
      of(x[0]).serial.set(x[1], x[2])
      of(x[0]).parallel.set(x[1], x[3])
    }
  }
  if (!(peak > 0)) return undefined
  const byThreads = new Map<number, ThreadTimings>()
  const counts = new Set(sittings.flatMap((m) => [...m.keys()]))
  for (const n of counts) {
    const valid = sittings.flatMap((m) => (m.has(n) && m.get(n)!.joined >= MIN_JOINED ? [m.get(n)!] : []))
    if (valid.length === 0) continue
    const leastOf = (pick: (t: Sitting) => Map<number, number>) => {
      const out = new Map<number, number>()
      for (const t of valid) for (const [k, v] of pick(t)) least(out, k, v)
      return out
    }
    const [serial, parallel] = [leastOf((t) => t.serial), leastOf((t) => t.parallel)]
    const stream = [...serial.keys()].filter((b) => parallel.has(b)).sort((a, b) => a - b).map((bytes) => ({ bytes, serialNs: serial.get(bytes)!, parallelNs: parallel.get(bytes)! }))
    byThreads.set(n, { regionNs: leastOf((t) => t.region), emptyNs: leastOf((t) => t.empty), stream })
  }
  return { flopsPerNs: peak, byThreads }
}

/**
 * One thread count's record from its timings: the region's cost at the executor's gap (at least
 * the empty region's), and the break-even of the streaming loop — the first size from which the
 * pool wins at every larger size, interpolated linearly (in one core's time) between it and the
 * size before, where the pool's lead crosses zero; the smallest size where the pool wins from the
 * first, the largest where it never does. Undefined without a region or a stream.
 */
export const regionMeasure = (t: ThreadTimings): RegionMeasure | undefined => {
  const region = t.regionNs.get(REGION_GAP_NS)
  const empty = t.emptyNs.get(REGION_GAP_NS) ?? 0
  if (region === undefined || t.stream.length === 0) return undefined
  const s = t.stream
  const lead = s.map((x) => x.serialNs - x.parallelNs) // > 0: the pool wins
  let first = s.length - 1
  while (first > 0 && lead[first - 1] > 0) first--
  if (lead[first] <= 0) first = s.length - 1 // the pool never wins: the largest size
  const at = (() => {
    if (first === 0 || lead[first] <= 0) return { ns: s[first].serialNs, bytes: s[first].bytes }
    const [a, b] = [s[first - 1], s[first]]
    const f = -lead[first - 1] / (lead[first] - lead[first - 1])
    return { ns: a.serialNs + f * (b.serialNs - a.serialNs), bytes: a.bytes + f * (b.bytes - a.bytes) }
  })()
  return { regionNs: Math.max(region, empty, 1), breakEvenNs: at.ns, streamBytesPerNs: at.bytes / at.ns }
}

/** The record from the timings: the peak, and each thread count with a measure. */
export const regionRecord = (t: RegionTimings): ParallelRegionRecord | undefined => {
  const byThreads: Record<string, RegionMeasure> = {}
  for (const [n, x] of t.byThreads) {
    const m = regionMeasure(x)
    if (m) byThreads[String(n)] = m
  }
  return Object.keys(byThreads).length ? { flopsPerNs: t.flopsPerNs, byThreads } : undefined
}

/** Thread counts measured on a host of `cores`: 2, 4, 8, … below it, and it (none on one core). */
export const regionThreadCounts = (cores: number): number[] => {
  const out: number[] = []
  for (let n = 2; n < cores; n *= 2) out.push(n)
  if (cores >= 2) out.push(cores)
  return out
}

/** The C program: the pool's text (`poolSource`, static linkage), then the timings at `threads` for vectors of `lanes` fp32. */
export const regionProgram = (poolSource: string, threads: readonly number[], lanes: number): string => `#include <stdint.h>
#include <string.h>
${poolSource}
#define EXTENT 64
#define REPS 301
#define SITTINGS 3
static double region_now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static void region_spin(double ns) { const double t0 = region_now(); while (region_now() - t0 < ns) tessera_pause(); }
static int region_cmp(const void* a, const void* b) { const double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y; }
static double region_median(double* v, int n) { qsort(v, n, sizeof *v, region_cmp); return v[n / 2]; }
static volatile float region_sink;
/* chunks a worker (not the calling thread) ran: a run counts only where the worker took part */
static pthread_t region_caller;
static _Atomic long region_joined;
static inline void joined(void) { if (!pthread_equal(pthread_self(), region_caller)) atomic_fetch_add_explicit(&region_joined, 1, memory_order_relaxed); }

/* 1 µs of work an iteration */
static void work_task(const void* p, int64_t lo, int64_t hi) { (void)p; joined(); region_spin(1000.0 * (double)(hi - lo)); }
static void empty_task(const void* p, int64_t lo, int64_t hi) { (void)p; (void)lo; (void)hi; }
typedef struct { const float* x; float* y; int64_t per; } stream_args;
static void stream_task(const void* p, int64_t lo, int64_t hi) {
  const stream_args* a = (const stream_args*)p;
  joined();
  const float* restrict x = a->x;
  float* restrict y = a->y;
  for (int64_t i = lo * a->per; i < hi * a->per; i++) y[i] = y[i] * 0.5f + x[i];
}
/* the caller writes x: what the kernel before the region wrote */
static void produce(float* x, int64_t n) { for (int64_t i = 0; i < n; i++) x[i] = x[i] * 0.5f + 1.0f; }

static void regions(int n, double gap) {
  double t[REPS], e[REPS];
  int joins = 0;
  const int64_t extent = 4 * (int64_t)n;
  for (int r = 0; r < REPS; r++) {
    region_spin(gap);
    const long before = region_joined;
    double t0 = region_now();
    tessera_parallel_for(work_task, 0, extent);
    const double took = region_now() - t0 - 1000.0 * (double)extent / n;
    if (region_joined != before) t[joins++] = took;
    region_spin(gap);
    t0 = region_now();
    tessera_parallel_for(empty_task, 0, extent);
    e[r] = region_now() - t0;
  }
  printf("region %d %.0f %.1f %d\\n", n, gap, joins ? region_median(t, joins) : 0.0, joins);
  printf("empty %d %.0f %.1f %d\\n", n, gap, region_median(e, REPS), REPS);
}

static void stream(int n, float* x, float* y, int64_t per) {
  double s[REPS], p[REPS];
  int joins = 0;
  const stream_args a = { x, y, per };
  const int64_t len = EXTENT * per;
  for (int r = 0; r < REPS; r++) {
    produce(x, len);
    double t0 = region_now();
    stream_task(&a, 0, EXTENT);
    s[r] = region_now() - t0;
    region_spin(${REGION_GAP_NS});
    produce(x, len);
    const long before = region_joined;
    t0 = region_now();
    tessera_parallel_for(stream_task, &a, EXTENT);
    p[r] = region_now() - t0;
    joins += region_joined != before;
    region_spin(${REGION_GAP_NS});
  }
  region_sink += y[len - 1];
  printf("stream %d %lld %.1f %.1f %d\\n", n, (long long)(2 * len * (int64_t)sizeof(float)), region_median(s, REPS), region_median(p, REPS), joins);
}

/* peak fp32 FLOP / ns of one core: 12 independent FMA chains */
static double peak(void) {
  typedef float vf __attribute__((vector_size(${4 * lanes})));
  vf a[12], b, c;
  for (int i = 0; i < ${lanes}; i++) { b[i] = 1.0f - 1e-7f * i; c[i] = 1e-7f; }
  for (int k = 0; k < 12; k++) a[k] = b * (float)(k + 1);
  double best = 0;
  for (int r = 0; r < 15; r++) {
    const long iters = 100000;
    const double t0 = region_now();
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
      for (int k = 0; k < 12; k++) a[k] = a[k] * b + c;
    }
    const double f = 2.0 * ${lanes} * 12 * iters / (region_now() - t0);
    if (f > best) best = f;
  }
  float s = 0;
  for (int k = 0; k < 12; k++) s += a[k][0];
  region_sink += s;
  return best;
}

int main(void) {
  region_caller = pthread_self();
  static const int threads[] = { ${threads.join(", ")} };
  const int64_t most = EXTENT * 16 * 512;
  float* x = aligned_alloc(64, most * sizeof(float));
  float* y = aligned_alloc(64, most * sizeof(float));
  if (!x || !y) return 1;
  for (int64_t i = 0; i < most; i++) { x[i] = 1.0f; y[i] = 0.0f; }
  for (int sitting = 0; sitting < SITTINGS; sitting++) {
    printf("peak %.3f\\n", peak());
    for (unsigned k = 0; k < sizeof threads / sizeof threads[0]; k++) {
      const int n = threads[k];
      tessera_set_num_threads(n);
      tessera_parallel_for(work_task, 0, 4 * (int64_t)n); /* the workers started */
      regions(n, ${REGION_GAP_NS});
      regions(n, 50000);
      for (int64_t per = 16; per <= 16 * 512; per *= 2) stream(n, x, y, per);
    }
    fflush(stdout);
  }
  free(x);
  free(y);
  return 0;
}
`

/** Times the program here (gcc, the c target's pool flags): undefined where gcc is missing or the run fails. */
export const measureRegion = (poolSource: string, threads: readonly number[], lanes: number): RegionTimings | undefined => {
  if (!compilerAvailable() || threads.length === 0) return undefined
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-region-"))
  try {
    const src = path.join(dir, "region.c")
    fs.writeFileSync(src, regionProgram(poolSource, threads, Math.max(1, lanes)))
    execFileSync("gcc", [...compileFlags(C_POOL_FLAGS), "-o", path.join(dir, "region"), src], { stdio: "ignore" })
    return parseRegionOutput(execFileSync(path.join(dir, "region"), { timeout: 120_000 }).toString())
  } catch {
    return undefined
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

interface CachedRegion {
  readonly version: 1
  readonly cpu: string
  readonly record: ParallelRegionRecord
}

const positive = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x) && x > 0

/** A cached record, when the text is one for this CPU and every figure is positive (else undefined: measure again). */
export const parseRegionRecord = (text: string, cpu: string): ParallelRegionRecord | undefined => {
  try {
    const r = JSON.parse(text) as CachedRegion
    if (r.version !== 1 || r.cpu !== cpu || typeof r.record !== "object" || r.record === null || !positive(r.record.flopsPerNs)) return undefined
    const entries = Object.entries(r.record.byThreads ?? {})
    const ok = entries.length > 0 && entries.every(([n, m]) => Number.isInteger(Number(n)) && Number(n) >= 2 && positive(m?.regionNs) && positive(m?.breakEvenNs) && positive(m?.streamBytesPerNs))
    return ok ? r.record : undefined
  } catch {
    return undefined
  }
}

/** How long a refused measurement (no valid sitting: a loaded machine) stands before the next process measures again (ms). */
export const REFUSED_RETRY_MS = 60 * 60 * 1000

const writeAtomically = (dir: string, file: string, text: string): void => {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    const tmp = `${file}.${process.pid}.tmp`
    fs.writeFileSync(tmp, text, { mode: 0o600 })
    fs.renameSync(tmp, file)
  } catch {
    // an unwritable cache: measured again next time
  }
}

/**
 * The pool's regions on this CPU (`cpu`: its model name and flags): the cached record for it and
 * this pool's text, or a measurement, written to the cache for next time (a temporary file, then a
 * rename). Undefined where nothing can be measured (no gcc, one core), or where the measurement
 * was refused (no valid sitting) within REFUSED_RETRY_MS of `nowMs`: the refusal is cached beside
 * the record (its time), so the processes of a loaded hour do not each pay for a measurement.
 */
export const hostRegion = (cpu: string, poolSource: string, threads: readonly number[], lanes: number, nowMs: number = Date.now()): ParallelRegionRecord | undefined => {
  if (threads.length === 0) return undefined
  const key = createHash("sha256").update(`${cpu}\n${threads.join(",")}\n${lanes}\n${poolSource}`).digest("hex").slice(0, 24)
  const dir = path.join(cacheRoot(), "cpu")
  const file = path.join(dir, `region-${key}.json`)
  const refused = path.join(dir, `region-${key}.refused`)
  try {
    const cached = parseRegionRecord(fs.readFileSync(file, "utf8"), cpu)
    if (cached) return cached
  } catch {
    // not cached yet
  }
  try {
    const at = Number(fs.readFileSync(refused, "utf8").trim())
    if (Number.isFinite(at) && at <= nowMs && nowMs - at < REFUSED_RETRY_MS) return undefined
  } catch {
    // not refused lately
  }
  const timings = measureRegion(poolSource, threads, lanes)
  const record = timings && regionRecord(timings)
  if (!record) {
    if (compilerAvailable()) writeAtomically(dir, refused, `${nowMs}\n`)
    return undefined
  }
  writeAtomically(dir, file, JSON.stringify({ version: 1, cpu, record } satisfies CachedRegion, null, 2) + "\n")
  fs.rmSync(refused, { force: true })
  return record
}
