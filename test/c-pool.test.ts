// The c target's thread pool (src/emit/c/pool.ts): every iteration of a parallel loop runs exactly
// once and before `tessera_parallel_for` returns (more chunks than threads, fewer iterations than
// threads, an empty loop); the workers take part; one thread starts no worker; the loader's thread
// count reaches the pool; a nested parallel loop runs serially inside its task; and a kernel's
// parallel loops give, bit for bit, what the same kernel under OpenMP gives.
import * as fc from "fast-check"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { paramsOf } from "../src/ast/tir/analysis.js"
import type { PrimFunc } from "../src/ast/tir/tir.js"
import { buildC, cArtifact, compilerAvailable, C_FLAGS, C_POOL_FLAGS, defaultCBuildConfig, writeArtifact } from "../src/device/c/build.js"
import { loadC, type CModule } from "../src/device/c/load.js"
import type { CParallel } from "../src/emit/c/dialect.js"
import { emitC } from "../src/emit/c/emit.js"
import { cPool } from "../src/emit/c/pool.js"
import { add, c, cast, f32, mul, v } from "../src/ast/te/expr.js"
import { assertAllClose } from "../laws/support.js"
import { callKernel } from "../laws/support-c.js"
import { GOLDEN_CASES, goldenFunc } from "../scripts/update-goldens.js"

const HAVE_GCC = compilerAvailable()

/**
 * A loop of `extent` iterations (extent as a float in e[0]), each spinning ~`ns[0]` ns then counting
 * itself in `counts`; `seen` is `counts` as it stands when tessera_parallel_for returns, and
 * `seen[extent]` how many iterations ran on a thread other than the caller.
 */
const HARNESS = `#include <stdio.h>
#include <stdint.h>
#include <string.h>
${cPool("static ")}
static pthread_t tessera_test_caller;
static long tessera_test_ns;
static void tessera_test_mark(const void* a, int64_t lo, int64_t hi) {
  int32_t* counts = (int32_t*)a;
  for (int64_t i = lo; i < hi; i++) {
    const long t0 = tessera_now_ns();
    while (tessera_now_ns() - t0 < tessera_test_ns) tessera_pause();
    __atomic_fetch_add(&counts[i], 1, __ATOMIC_RELAXED);
    if (!pthread_equal(pthread_self(), tessera_test_caller)) __atomic_fetch_add(&counts[4096], 1, __ATOMIC_RELAXED);
  }
}
void loop(const float* e, int32_t* counts, int32_t* seen) {
  const int64_t extent = (int64_t)e[0];
  tessera_test_ns = (long)e[1];
  tessera_test_caller = pthread_self();
  if (e[2] > 0) tessera_parallel_for_chunks(tessera_test_mark, counts, extent, (int)e[2]);
  else tessera_parallel_for(tessera_test_mark, counts, extent);
  for (int64_t i = 0; i < extent; i++) seen[i] = __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
  seen[extent] = __atomic_load_n(&counts[4096], __ATOMIC_RELAXED);
}
`

const loadSource = (source: string, kernels: Parameters<typeof loadC>[1], threads: number, flags: readonly string[] = C_POOL_FLAGS): Promise<CModule> =>
  Effect.runPromise(Effect.flatMap(buildC(source, defaultCBuildConfig(flags)), (so) => loadC(so, kernels, threads)))

const harness = (threads: number) =>
  loadSource(
    HARNESS,
    [
      {
        name: "loop",
        params: [
          { dtype: "float32", elements: 3 },
          { dtype: "int32", elements: 4097 },
          { dtype: "int32", elements: 4097 },
        ],
      },
    ],
    threads,
  )

/** Runs the harness's loop: what each iteration's count was at return, and how many ran on workers. */
const runLoop = (mod: CModule, extent: number, ns: number, perThread = 0): { counts: number[]; onWorkers: number } => {
  const counts = new Int32Array(4097)
  const seen = new Int32Array(4097).fill(-1)
  mod.kernels.get("loop")!(Float32Array.of(extent, ns, perThread), counts, seen)
  return { counts: [...seen.slice(0, extent)], onWorkers: seen[extent] }
}

/** The threads of this process (Linux: /proc/self/task), or undefined. */
const processThreads = (): number | undefined => (existsSync("/proc/self/task") ? readdirSync("/proc/self/task").length : undefined)

const buildKernels = (funcs: readonly PrimFunc[], parallel: CParallel, threads: number) =>
  loadSource(
    emitC(funcs, { parallel }).source,
    funcs.map((f) => ({ name: f.name, params: paramsOf(f) })),
    threads,
    parallel === "pool" ? C_POOL_FLAGS : C_FLAGS,
  )

describe.skipIf(!HAVE_GCC)("c target: the thread pool", () => {
  it("every iteration runs exactly once, all before tessera_parallel_for returns (random extents 0–300 of 20 µs each, 1–5 threads)", async () => {
    const mods = new Map<number, CModule>()
    for (const t of [1, 2, 3, 4, 5]) mods.set(t, await harness(t))
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1, max: 5 }), (extent, threads) => {
        const { counts } = runLoop(mods.get(threads)!, extent, 20000)
        expect(counts).toEqual(Array.from({ length: extent }, () => 1))
      }),
      { seed: 18, numRuns: 60 },
    )
  })

  it("tessera_parallel_for_chunks: every iteration runs exactly once at 1–4 chunks a thread (random extents 0–300 of 20 µs each, 1–5 threads), and a worker takes part at one chunk a thread", async () => {
    const mods = new Map<number, CModule>()
    for (const t of [1, 2, 3, 4, 5]) mods.set(t, await harness(t))
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 4 }), (extent, threads, perThread) => {
        const { counts } = runLoop(mods.get(threads)!, extent, 20000, perThread)
        expect(counts).toEqual(Array.from({ length: extent }, () => 1))
      }),
      { seed: 28, numRuns: 40 },
    )
    let onWorkers = 0
    for (let i = 0; i < 20 && onWorkers === 0; i++) onWorkers = runLoop(mods.get(2)!, 64, 50000, 1).onWorkers
    expect(onWorkers).toBeGreaterThan(0)
  })

  it("more chunks than threads (37 iterations on 2: 8 chunks) and fewer iterations than threads (3 on 5) each run once", async () => {
    const two = await harness(2)
    expect(runLoop(two, 37, 50000).counts).toEqual(Array.from({ length: 37 }, () => 1))
    const five = await harness(5)
    expect(runLoop(five, 3, 50000).counts).toEqual([1, 1, 1])
    expect(runLoop(five, 1, 0).counts).toEqual([1])
    expect(runLoop(five, 0, 0).counts).toEqual([])
  })

  it("the workers take part (a worker runs some of a 64 × 50 µs loop's iterations, within 20 tries)", async () => {
    const mod = await harness(2)
    let onWorkers = 0
    for (let i = 0; i < 20 && onWorkers === 0; i++) onWorkers = runLoop(mod, 64, 50000).onWorkers
    expect(onWorkers).toBeGreaterThan(0)
  })

  it.skipIf(processThreads() === undefined)("one thread starts no worker; two threads start one", async () => {
    const one = await harness(1)
    const before = processThreads()!
    runLoop(one, 100, 0)
    expect(processThreads()).toBe(before)
    expect(runLoop(one, 100, 0).onWorkers).toBe(0)
    const two = await harness(2)
    runLoop(two, 100, 0)
    expect(processThreads()).toBe(before + 1)
  })

  it("the loader's thread count reaches the pool (tessera_get_num_threads)", async () => {
    const mod = await harness(3)
    const koffi = (await import("koffi")).default
    const get = koffi.load(mod.path).func("int tessera_get_num_threads()") as () => number
    expect(get()).toBe(3)
  })

  it("a kernel's parallel loops on the pool give what they give under OpenMP, bit for bit, and what the TE says (2 and 3 threads)", async () => {
    const cases = GOLDEN_CASES.map((mk) => mk())
    const funcs = cases.map(goldenFunc)
    expect(emitC(funcs, { parallel: "pool" }).source).toContain("tessera_parallel_for(")
    expect(emitC(funcs, { parallel: "pool" }).source).not.toContain("omp parallel")
    for (const threads of [2, 3]) {
      const pool = await buildKernels(funcs, "pool", threads)
      const omp = await buildKernels(funcs, "openmp", threads)
      cases.forEach((g, k) => {
        const a = callKernel(pool.kernels.get(g.name)!, funcs[k], g.inputs)
        const b = callKernel(omp.kernels.get(g.name)!, funcs[k], g.inputs)
        for (const o of g.outputs) expect(Array.from(a.get(o.name)!.data as ArrayLike<number>)).toEqual(Array.from(b.get(o.name)!.data as ArrayLike<number>))
        assertAllClose(g.outputs.map((o) => a.get(o.name)!), evaluateTE(g.outputs, g.inputs), 1e-4, 1e-5)
      })
    }
  })

  it("a parallel loop inside another runs serially inside its task: one tessera_parallel_for, every element written once", async () => {
    const i = v("i")
    const j = v("j")
    const f: PrimFunc = {
      name: "nested",
      params: [{ name: "A", dtype: "float32", shape: [6, 5], scope: "global" }],
      body: {
        kind: "for",
        var: i,
        min: c(0),
        extent: c(6),
        forKind: "parallel",
        body: { kind: "for", var: j, min: c(0), extent: c(5), forKind: "parallel", body: { kind: "store", buffer: "A", indices: [i, j], value: { kind: "bin", op: "add", a: { kind: "read", source: "A", indices: [i, j], dtype: "float32" }, b: f32(1), dtype: "float32" } } },
      },
    }
    const source = emitC([f], { parallel: "pool" }).source
    expect(source.match(/tessera_parallel_for\(tessera_par/g)).toHaveLength(1)
    expect(source).toContain("/* parallel (inside a parallel loop: serial) */")
    const mod = await buildKernels([f], "pool", 3)
    const a = new Float32Array(30)
    mod.kernels.get("nested")!(a)
    expect([...a]).toEqual(Array.from({ length: 30 }, () => 1))
  })

  it("a parallel loop with a min under a serial loop and a let captures the outer variables: A[o, i] = 10·o + i for i in [1, 6)", async () => {
    const o = v("o")
    const s = v("s")
    const i = v("i")
    const f: PrimFunc = {
      name: "captures",
      params: [{ name: "A", dtype: "float32", shape: [3, 6], scope: "global" }],
      body: {
        kind: "for",
        var: o,
        min: c(0),
        extent: c(3),
        forKind: "serial",
        body: {
          kind: "let",
          var: s,
          value: mul(o, c(10)),
          body: { kind: "for", var: i, min: c(1), extent: c(5), forKind: "parallel", body: { kind: "store", buffer: "A", indices: [o, i], value: cast("float32", add(s, i)) } },
        },
      },
    }
    const source = emitC([f], { parallel: "pool" }).source
    expect(source).toMatch(/struct tessera_par0_captures \{ float\* b0; int64_t v\d+; int64_t v\d+; \};/)
    for (const threads of [1, 2, 4]) {
      const mod = await buildKernels([f], "pool", threads)
      const a = new Float32Array(18).fill(-1)
      mod.kernels.get("captures")!(a)
      expect([...a]).toEqual([0, 1, 2].flatMap((r) => [-1, ...[1, 2, 3, 4, 5].map((x) => 10 * r + x)]))
    }
  })

  it.skipIf(spawnSync("make", ["--version"], { stdio: "ignore" }).status !== 0)("the standalone artifact on the pool builds with make (-fopenmp-simd -pthread, no libgomp) and runs on 2 threads", async () => {
    const cases = GOLDEN_CASES.map((mk) => mk())
    const funcs = cases.map(goldenFunc)
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-c-pool-artifact-"))
    try {
      const files = cArtifact(emitC(funcs, { parallel: "pool" }), "tessera_kernels", defaultCBuildConfig(C_POOL_FLAGS))
      expect(files.get("Makefile")).toMatch(/-fopenmp-simd .*-pthread/)
      expect(files.get("Makefile")).not.toMatch(/-fopenmp /)
      await Effect.runPromise(writeArtifact(dir, files))
      const r = spawnSync("make", ["-C", dir], { encoding: "utf8" })
      expect(r.status, r.stderr).toBe(0)
      const mod = await Effect.runPromise(loadC(path.join(dir, "libtessera_kernels.so"), funcs.map((f) => ({ name: f.name, params: paramsOf(f) })), 2))
      cases.forEach((g, k) => {
        const outs = callKernel(mod.kernels.get(g.name)!, funcs[k], g.inputs)
        assertAllClose(g.outputs.map((o) => outs.get(o.name)!), evaluateTE(g.outputs, g.inputs), 1e-4, 1e-5)
      })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
