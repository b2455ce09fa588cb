// The c-target measurer (gcc once per chunk, candidates timed in a child process) and fault
// injection: candidates that crash (an out-of-bounds store: SIGSEGV), hang, compute wrongly or do
// not build are recorded as errors of their own — the candidates around them are still measured,
// tuning completes and the log stays valid. Skips, visibly, where gcc is absent.
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import koffi from "koffi"
import { performance } from "node:perf_hooks"
import { afterAll, describe, expect, it } from "vitest"
import { buildCompute } from "../src/ast/te/arbitrary.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { add, c, mul, read, v } from "../src/ast/te/expr.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import type { PrimFunc, Stmt } from "../src/ast/tir/tir.js"
import { buildC, compilerAvailable, defaultCBuildConfig } from "../src/device/c/build.js"
import { C_BATCH } from "../src/device/c/build.js"
import { chunkBySize, measureC, SWEEP_C, SWEEP_FN, type CMeasureOptions, type RenderC } from "../src/device/c/measure.js"
import { appendRecords, readLog } from "../src/cli/tuning-log.js"
import { emitC } from "../src/emit/c/emit.js"
import type { Config } from "../src/lowering/templates/template.js"
import { baseSchedule } from "../src/lowering/lower-group.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { configAt, configKey, spaceSize, taskFromTE } from "../src/search/task.js"
import { randomTuner } from "../src/search/tuners.js"
import { tuneTask } from "../src/search/tune.js"

const cc = buildCompute("matmul", 4242)
const [M, N] = cc.outputs[0].shape
const K = (cc.inputs.get("A")!.shape as number[])[1]
const task = taskFromTE(cc.outputs, baseSchedule(cc.outputs), { kind: "c", vectorLanes: 8, cores: 1 }, 2 * M * N * K, "matmul")
const lowerConfig = (config: Config): PrimFunc => runTirSync(cpuTirPipeline(), lowerSync(task.template.apply(task.outputs, task.base, config)))
const outputs = new Set(cc.outputs.map((o) => o.name))
const reference = (inputs: ReadonlyMap<string, Tensor>) => new Map(cc.outputs.map((o, k) => [o.name, evaluateTE(cc.outputs, inputs)[k]] as const))

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-tune-c-"))
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }))
const options = (over: Partial<CMeasureOptions> = {}): CMeasureOptions => ({
  repeats: 1,
  minRepeatMs: 1,
  timeoutMs: 10_000,
  rtol: 1e-3,
  atol: 1e-4,
  threads: 1,
  chunk: 4,
  buildJobs: 2,
  build: { ...defaultCBuildConfig(), cacheDir: path.join(tmp, "build") },
  ...over,
})

// the faults, as PrimFuncs of the workload's signature
const good = lowerConfig(task.template.defaults(task.knobs, { vectorLanes: 8, cores: 1 }))
const out = good.params.find((p) => outputs.has(p.name))!
/** A store 2^45 elements past the output: far outside any mapping, so SIGSEGV. */
const crashBody: Stmt = { kind: "store", buffer: out.name, indices: [c(2 ** 45)], value: c(1, out.dtype) }
/** 10^15 steps of out[0] = out[0] * 3 + 1 (no closed form for the compiler to find). */
const first = read(out.name, [c(0)], out.dtype)
const hangBody: Stmt = { kind: "for", var: v("spin"), min: c(0), extent: c(1e15), forKind: "serial", body: { kind: "store", buffer: out.name, indices: [c(0)], value: add(mul(first, c(3, out.dtype)), c(1, out.dtype)) } }
const wrongBody: Stmt = { kind: "seq", body: [] }
/** Renders like emitC, except that a function with this body breaks the build. */
const brokenBody: Stmt = { kind: "seq", body: [] }
const render: RenderC = (funcs) => `${emitC(funcs).source}${funcs.some((f) => f.body === brokenBody) ? "\n#error injected build failure\n" : ""}`

const fault = (which: string, body: Stmt) => ({ config: { which }, func: { ...good, body } })
const fine = (k: number) => ({ config: configAt(task.knobs, k), func: lowerConfig(configAt(task.knobs, k)) })

describe.skipIf(!compilerAvailable())("c measurer (gcc, child process)", () => {
  it("measures good candidates; each fault is its candidate's error, and the ones after a crash or hang in its library still run", async () => {
    // chunks of 4: [fine, crash, fine, wrong] [fine, hang, fine, fine] [broken, fine] (built again one by one)
    const cands = [fine(0), fault("crash", crashBody), fine(1), fault("wrong", wrongBody), fine(2), fault("hang", hangBody), fine(3), fine(4), fault("broken", brokenBody), fine(5)]
    const t0 = Date.now()
    const measured = await Effect.runPromise(measureC(cands, outputs, reference, render, options({ timeoutMs: 2_000 })))
    const byWhich = new Map(measured.map((m) => [String(m.config.which ?? "fine"), m] as const))
    expect(byWhich.get("crash")!.error).toMatch(/crashed \(SIGSEGV\)/)
    expect(byWhich.get("wrong")!.error).toMatch(/wrong answer: element \d+ is 0/)
    expect(byWhich.get("broken")!.error).toMatch(/build failed: .*injected build failure/)
    expect(byWhich.get("hang")!.error).toMatch(/timed out after 2000 ms/)
    for (const m of measured) if (m.config.which === undefined) expect(m).toMatchObject({ cost: expect.any(Number) })
    expect(measured.filter((m) => m.cost !== undefined)).toHaveLength(6)
    expect(measured.map((m) => m.config)).toEqual(cands.map((x) => x.config))
    expect(Date.now() - t0).toBeLessThan(30_000)
    // the built libraries are deleted once measured
    expect(fs.readdirSync(path.join(tmp, "build")).filter((f) => f.endsWith(".so"))).toEqual([])
  }, 60_000)

  it("tells each candidate's share of its gcc run and of its library's runs (spent), inside the call's time", async () => {
    const told = new Map<number, { build: number; run: number }>()
    const cands = [fine(0), fine(1), fine(2), fault("broken", brokenBody)]
    const t0 = performance.now()
    await Effect.runPromise(measureC(cands, outputs, reference, render, options({ chunk: 2, buildJobs: 1, minRepeatMs: 5, spent: (k, ms) => void told.set(k, ms) })))
    const wall = performance.now() - t0
    expect([...told.keys()].sort()).toEqual([0, 1, 2, 3])
    // every candidate built (the broken one alone, after its chunk failed); only the ones built ran
    for (const k of [0, 1, 2, 3]) expect(told.get(k)!.build).toBeGreaterThan(0)
    for (const k of [0, 1, 2]) expect(told.get(k)!.run).toBeGreaterThan(5)
    expect(told.get(3)!.run).toBe(0)
    // (one build job: builds and runs are shares of disjoint spans of the call; overlapped, at most twice it)
    const sum = [...told.values()].reduce((a, t) => a + t.build + t.run, 0)
    expect(sum).toBeLessThanOrEqual(2 * wall)
  }, 60_000)

  it("with flushBytes each call is timed alone after a sweep of the caches: the sweep is not in the cost", async () => {
    const warm = await Effect.runPromise(measureC([fine(0), fine(1)], outputs, reference, render, options({ minRepeatMs: 2 })))
    // 32 MiB written before every call: far longer than the kernel, and none of it counted
    const t0 = Date.now()
    const swept = await Effect.runPromise(measureC([fine(0), fine(1)], outputs, reference, render, options({ minRepeatMs: 2, flushBytes: 32 << 20 })))
    const wall = Date.now() - t0
    for (const [k, m] of swept.entries()) {
      expect(m.error).toBeUndefined()
      expect(m.cost).toBeGreaterThan(0)
      expect(m.config).toEqual(warm[k].config)
      // at least one sweep per repeat, each a few ms: the wall time shows them, the cost does not
      expect(m.cost! * 1000).toBeLessThan(wall / 6)
    }
  }, 60_000)

  it("the sweep runs on every OpenMP thread of the measuring process, each over a buffer of its own", async () => {
    const so = await Effect.runPromise(buildC(SWEEP_C, { ...defaultCBuildConfig(), cacheDir: path.join(tmp, "build") }))
    const sweep = koffi.load(so).func(SWEEP_FN, "int", ["long", "int"])
    // this process's OpenMP team: OMP_NUM_THREADS, else a thread per core
    const team = Number(process.env.OMP_NUM_THREADS ?? os.availableParallelism())
    expect(sweep(1 << 20, 1)).toBe(team)
    expect(sweep(1 << 20, 2)).toBe(team)
    // and a 2-thread measurement with it: every candidate measured
    const measured = await Effect.runPromise(measureC([fine(0), fine(1)], outputs, reference, render, options({ threads: 2, flushBytes: 1 << 20 })))
    for (const m of measured) expect(m.cost).toBeGreaterThan(0)
  }, 60_000)

  it("without overlap every chunk is built before the first is measured; all are measured", async () => {
    // render is called once per chunk as it is built: with overlap false all three calls come
    // before any candidate is measured (each measured candidate's child is started after them)
    const order: string[] = []
    const spy: RenderC = (funcs) => {
      order.push(`render ${funcs.map((f) => f.name).join(",")}`)
      return render(funcs)
    }
    const cands = [0, 1, 2, 3, 4, 5].map(fine)
    const measured = await Effect.runPromise(measureC(cands, outputs, reference, spy, options({ minRepeatMs: 1, chunk: 2, overlap: false })))
    // (the single-candidate and empty renders before the chunks' ones size the candidates)
    expect(order.filter((o) => o.includes(","))).toEqual(["render cand0,cand1", "render cand2,cand3", "render cand4,cand5"])
    for (const m of measured) expect(m.cost).toBeGreaterThan(0)
  }, 60_000)

  it("a candidate whose own code is C_BATCH.below bytes or more builds alone; the small ones share gcc runs, in order", async () => {
    // a big candidate: the good schedule, rendered with a comment of C_BATCH.below bytes after it
    const big = (k: number) => ({ config: { big: k }, func: { ...good } })
    const cands = [fine(0), big(1), fine(1), fine(2), big(2), fine(3), fine(4)]
    const bigFuncs = new Set<PrimFunc>()
    const built: string[][] = []
    const spy: RenderC = (funcs) => {
      const source = render(funcs)
      const pad = funcs.filter((f) => bigFuncs.has(f)).map(() => `/* ${"x".repeat(C_BATCH.below)} */`)
      return [source, ...pad].join("\n")
    }
    // the measurer renames the functions: a big one is known by its body object
    const marked: RenderC = (funcs) => {
      for (const f of funcs) if (f.body === good.body) bigFuncs.add(f)
      if (funcs.length > 1) built.push(funcs.map((f) => f.name))
      return spy(funcs)
    }
    const measured = await Effect.runPromise(measureC(cands, outputs, reference, marked, options({ chunk: 2, overlap: false })))
    for (const m of measured) expect(m.cost).toBeGreaterThan(0)
    expect(measured.map((m) => m.config)).toEqual(cands.map((x) => x.config))
    // the shared runs hold small candidates only, two at a time in order; the big ones (cand1, cand4) are in none
    expect(built).toEqual([["cand0", "cand2"], ["cand3", "cand5"]])
  }, 60_000)

  it("chunkBySize: every candidate once, in order; the small ones `size` to a chunk, each large one alone", () => {
    const sizes = [10, 5000, 20, 30, 9000, 40, 50, 60]
    const chunks = chunkBySize(sizes, (b) => b, 2, 4096)
    expect(chunks).toEqual([[5000], [10, 20], [9000], [30, 40], [50, 60]])
    expect(chunks.flat().sort((a, b) => a - b)).toEqual([...sizes].sort((a, b) => a - b))
    // nothing large: the old chunks, `size` at a time
    expect(chunkBySize([1, 2, 3, 4, 5], (b) => b, 2, 4096)).toEqual([[1, 2], [3, 4], [5]])
    // everything large: each alone
    expect(chunkBySize([5000, 6000], (b) => b, 4, 4096)).toEqual([[5000], [6000]])
  })

  it("interleaved, every candidate is checked first, then their repeats are taken in turns; a crash mid-round is its own", async () => {
    // each kernel appends its name to a file on every call, then runs the good schedule; cand1
    // crashes on its third call (its second timed repeat), after writing its name
    const trace = path.join(tmp, "interleave.trace")
    fs.writeFileSync(trace, "")
    const traced: RenderC = (funcs) => {
      const impl = emitC(funcs.map((f) => ({ ...f, name: `impl_${f.name}` }))).source
      const wrappers = funcs.map((f) => {
        const ps = f.params.map((_, k) => `float* p${k}`).join(", ")
        const crash = f.name === "cand1" ? `if (++calls == 3) *(volatile float*)0 = 1;` : ""
        return `void ${f.name}(${ps}) { static int calls; FILE* t = fopen(${JSON.stringify(trace)}, "a"); fputs("${f.name}\\n", t); fclose(t); ${crash} impl_${f.name}(${f.params.map((_, k) => `p${k}`).join(", ")}); }`
      })
      return `#include <stdio.h>\n${impl}\n${wrappers.join("\n")}\n`
    }
    const cands = [fine(0), fine(1), fine(2)]
    const measured = await Effect.runPromise(measureC(cands, outputs, reference, traced, options({ repeats: 3, minRepeatMs: 0, interleave: true })))
    expect(measured[1].error).toMatch(/crashed \(SIGSEGV\)/)
    expect(measured[0].cost).toBeGreaterThan(0)
    expect(measured[2].cost).toBeGreaterThan(0)
    // runs of one name collapsed: the first child checks all three, then one round in turns until
    // cand1 crashes; a fresh child checks and times the other two in turns
    const calls = fs.readFileSync(trace, "utf8").trim().split("\n")
    const runs = calls.filter((n, k) => k === 0 || calls[k - 1] !== n)
    expect(runs).toEqual(["cand0", "cand1", "cand2", "cand0", "cand1", "cand2", "cand0", "cand1", "cand0", "cand2", "cand0", "cand2", "cand0", "cand2", "cand0", "cand2"])
  }, 60_000)

  it("the child runs with OMP_NUM_THREADS set to the thread count", async () => {
    // a kernel that writes omp_get_max_threads() into the output: wrong for the reference, so its message shows it
    const spy: RenderC = (funcs) =>
      `#include <omp.h>\n${funcs.map((f) => `void ${f.name}(${f.params.map((_, k) => `float* p${k}`).join(", ")}) { p${f.params.findIndex((p) => p.name === out.name)}[0] = (float)omp_get_max_threads(); }`).join("\n")}\n`
    const [m] = await Effect.runPromise(measureC([fine(0)], outputs, reference, spy, options({ threads: 2 })))
    expect(m.error).toMatch(/wrong answer: element 0 is 2,/)
  }, 30_000)

  it("tuning with faulty candidates completes; the errors are in a log that stays valid", async () => {
    const log = path.join(tmp, "faults.jsonl")
    // every third candidate the tuner proposes is replaced by a fault (crash, hang, wrong, in turn)
    const faults = [crashBody, hangBody, wrongBody]
    let n = 0
    const lower = (config: Config) => (n++ % 3 === 2 ? { ...good, body: faults[Math.floor(n / 3) % 3] } : lowerConfig(config))
    const trials = Math.min(12, spaceSize(task.knobs))
    const result = await Effect.runPromise(
      tuneTask(task, randomTuner(task, 3), lower, (cands) => measureC(cands, outputs, reference, render, options({ timeoutMs: 1_500 })), {
        trials,
        batch: 6,
        target: "c",
        now: () => new Date().toISOString(),
        onRecords: (rs) => Effect.orDie(appendRecords(log, rs)),
      }),
    )
    expect(result.trials).toBe(trials)
    expect(result.errors).toBe(Math.floor(trials / 3))
    expect(result.best).toBeDefined()
    const parsed = await Effect.runPromise(readLog(log))
    expect(parsed.warnings).toEqual([])
    expect(parsed.records).toHaveLength(trials)
    expect(new Set(parsed.records.map((r) => configKey(r.config))).size).toBe(trials)
    const errors = parsed.records.filter((r) => r.error !== undefined)
    expect(errors).toHaveLength(Math.floor(trials / 3))
    for (const r of errors) {
      expect(r.costs).toEqual([])
      expect(r.error).toMatch(/crashed \(SIGSEGV\)|timed out|wrong answer/)
    }
    for (const r of parsed.records.filter((x) => x.error === undefined)) expect(r.costs[0]).toBeGreaterThan(0)
  }, 90_000)
})
