// What `tune --target cuda` times (issue 22: on an H200 it reported 0.28 GFLOP/s for ResNet-18's
// 3x3 convs). Two checks without a GPU:
//   - the measure's timed region, through the real koffi binding against the stand-in libcuda
//     (test/support/fake-libcuda.c, which appends every driver call to $TESSERA_FAKE_CUDA_TRACE)
//     and an nvcc script: one module load for the batch, the copies and the check before the first
//     event, and between each pair of event records nothing but cuLaunchKernel;
//   - what was tuned: the cuda target's tasks are its GPU rules' space under the key compile looks
//     records up by (`cuda:sm_90`), so a candidate launches a grid of threads. (The 0.28 GFLOP/s
//     was this: tune searched the CPU templates, whose loops no thread is bound to, so each
//     candidate ran on one GPU thread — 231 MFLOP in about 0.8 s — and its records, filed under
//     `reduction|cuda:lanes=1:cores=132|…`, never applied to a cuda compile.)
// Skipped, saying so, without gcc (it builds the stand-in).
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { cudaAttrsForArch, makeTarget, type Target } from "../src/ast/target.js"
import type { PrimFunc } from "../src/ast/tir/tir.js"
import { BACKENDS } from "../src/backend/index.js"
import { randomTensor } from "../src/cli/inputs.js"
import { compilerAvailable } from "../src/device/c/build.js"
import { defaultMeasureOptions, type MeasurerOptions } from "../src/device/measure.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import type { KernelCall } from "../src/device/device.js"
import { createExecutor, ExecutorError } from "../src/device/executor.js"
import { bestRecords, RECORD_VERSION, type TuningRecord } from "../src/search/records.js"
import { tasksOfProgram } from "../src/search/extract.js"

const gcc = compilerAvailable()
const ROOT = path.resolve(import.meta.dirname, "..")
let tmp = ""
afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
})

/** The call sequence's event pairs: the calls between each cuEventRecord and the next. */
const timedRegions = (calls: readonly string[]): string[][] => {
  const out: string[][] = []
  let open: string[] | undefined
  for (const c of calls) {
    if (c === "cuEventRecord") {
      if (open) {
        out.push(open)
        open = undefined
      } else open = []
    } else open?.push(c)
  }
  expect(open, "an event recorded with no second one").toBeUndefined()
  return out
}

describe.skipIf(!gcc)(`the cuda measure's timed region, against a stand-in libcuda${gcc ? "" : " (skipped: no C compiler to build the stand-in)"}`, () => {
  it("builds each candidate alone (one past its nvcc limit an error of its own), loads its module, copies and checks outside the events, and times nothing but launches; a wrong candidate is an error, never timed", async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-cuda-trace-"))
    const so = path.join(tmp, "libcuda.so.1")
    const cc = spawnSync("gcc", ["-shared", "-fPIC", "-O1", "-o", so, path.join(ROOT, "test", "support", "fake-libcuda.c")], { encoding: "utf8" })
    expect(cc.status, cc.stderr).toBe(0)
    // an nvcc that answers --version and writes a module the stand-in takes (its first byte 'T')
    fs.mkdirSync(path.join(tmp, "cuda", "bin"), { recursive: true })
    const nvcc = path.join(tmp, "cuda", "bin", "nvcc")
    // (a source that says SLOW takes it 30 s: a candidate whose build runs past its limit)
    fs.writeFileSync(nvcc, `#!/bin/sh\nif [ "$1" = "--version" ]; then echo "fake nvcc"; exit 0; fi\nout=""; prev=""; for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\nif grep -q SLOW "$prev"; then sleep 30; fi\nprintf 'T' > "$out"\n`)
    fs.chmodSync(nvcc, 0o755)
    const trace = path.join(tmp, "trace.txt")
    Object.assign(process.env, { TESSERA_LIBCUDA: so, CUDA_HOME: path.join(tmp, "cuda"), TESSERA_CACHE_DIR: path.join(tmp, "cache"), TESSERA_FAKE_CUDA_TRACE: trace })
    const { measureCuda } = await import("../src/device/cuda/measure.js")

    // the stand-in's one kernel, axpb: y[i] = a[i] * 2 + 1 over grid.x * block.x elements
    const n = 96
    const buf = (name: string) => ({ name, dtype: "float32" as const, shape: [n], scope: "global" as const })
    const func: PrimFunc = { name: "axpb", params: [buf("a"), buf("y")], body: { kind: "seq", body: [] } }
    const reference = (inputs: ReadonlyMap<string, Tensor>) => new Map([["y", { dtype: "float32", shape: [n], data: Float32Array.from(inputs.get("a")!.data as Float32Array, (x) => x * 2 + 1) } as Tensor]])
    // t0, t1 right; t2 launches too few blocks (its last 32 outputs stay 0): a wrong answer; t3's
    // build runs past the limit (each candidate is a translation unit of its own); t4's config is
    // past the GPU's limits, which the emitter throws (GpuLimitError): its error, not the batch's
    // (a 60 s tune of ResNet-18 on an H100 died of one such config)
    const grids = [3, 3, 2, 3, 3]
    const render = (funcs: readonly { readonly name: string }[]) => {
      if (funcs.some((f) => f.name === "t4")) throw new Error('cuda kernel "t4": 56x28x16 threads per block (maxThreadsPerBlock: 25088 > 1024)')
      return funcs.map((f) => `// tessera-launches ${JSON.stringify({ name: f.name, workspace: [], launches: [{ function: "axpb", grid: [grids[Number(f.name.slice(1))], 1, 1], block: [32, 1, 1] }] })}${f.name === "t3" ? "\n// SLOW" : ""}`).join("\n")
    }
    const options = { measure: { ...defaultMeasureOptions, repeats: 3, minRepeatMs: 2, timeoutMs: 1500 }, threads: 1 } as unknown as MeasurerOptions
    const measured = await Effect.runPromise(
      measureCuda({ candidates: grids.map((_, k) => ({ config: { k }, func })), source: { outputs: new Set(["y"]), reference }, render, options }),
    )
    expect(measured.slice(0, 2).map((m) => m.error)).toEqual([undefined, undefined])
    for (const m of measured.slice(0, 2)) expect(m.cost).toBeGreaterThan(0)
    expect(measured[2].cost).toBeUndefined()
    expect(measured[2].error).toMatch(/^wrong answer: element 64 /)
    expect(measured[3].cost).toBeUndefined()
    expect(measured[3].error).toMatch(/^nvcc: .*nvcc ran past 1500 ms and was killed/)
    expect(measured[4].cost).toBeUndefined()
    expect(measured[4].error).toMatch(/^rejected: .*maxThreadsPerBlock: 25088 > 1024/)

    const calls = fs.readFileSync(trace, "utf8").trim().split("\n")
    const names = calls.map((c) => c.split(" ")[0])
    // a module per built candidate (t3's never built), each loaded before its first event and unloaded after its last
    expect(names.filter((c) => c === "cuModuleLoadData")).toHaveLength(3)
    expect(names.filter((c) => c === "cuModuleUnload")).toHaveLength(3)
    expect(names.indexOf("cuModuleLoadData")).toBeLessThan(names.indexOf("cuEventRecord"))
    const regions = timedRegions(calls)
    // two candidates timed (t2 never), each in `repeats` rounds at least
    expect(regions.length).toBeGreaterThanOrEqual(2 * 3)
    for (const r of regions) {
      expect(r.length).toBeGreaterThan(0)
      // nothing but launches, and only of the timed candidates' grids (3 blocks: t2's 2 never)
      expect(r.filter((c) => c !== "cuLaunchKernel 3")).toEqual([])
    }
    // each candidate's copies in, its check's launch, its synchronize and its copy out all come before its first event
    const firstEvent = names.indexOf("cuEventRecord")
    expect(names.slice(0, firstEvent)).toEqual(expect.arrayContaining(["cuMemcpyHtoD", "cuLaunchKernel", "cuCtxSynchronize", "cuMemcpyDtoH"]))
    // no module loaded or unloaded between two events (the regions above hold launches alone), and t0's unloaded before t1's is loaded
    const loads = names.flatMap((c, i) => (c === "cuModuleLoadData" ? [i] : []))
    const unloads = names.flatMap((c, i) => (c === "cuModuleUnload" ? [i] : []))
    expect(unloads[0]).toBeLessThan(loads[1])
  }, 60_000)

  it("bench's kernel time: a run's kernels launched back to back between two events, no copy or synchronize among them", async () => {
    // (after the test above: the stand-in, the nvcc script and the trace file are set)
    const trace = process.env.TESSERA_FAKE_CUDA_TRACE!
    fs.writeFileSync(trace, "")
    const { cudaDevice } = await import("../src/device/cuda/device.js")
    const n = 96
    const artifact = {
      kind: "cuda" as const,
      files: new Map([["tessera_kernels.cu", new TextEncoder().encode("// the stand-in's axpb")]]),
      manifest: { launches: [{ kernel: "k0", workspace: [], launches: [{ function: "axpb", grid: [3, 1, 1], block: [32, 1, 1], sharedBytes: 0 }] }, { kernel: "k1", workspace: [], launches: [{ function: "axpb", grid: [1, 1, 1], block: [32, 1, 1], sharedBytes: 0 }, { function: "axpb", grid: [2, 1, 1], block: [32, 1, 1], sharedBytes: 0 }] }] },
      kernels: [],
    }
    const mod = await Effect.runPromise(cudaDevice.load(artifact))
    const [ba, by] = mod.reserve([n * 4, n * 4])
    const a = mod.input(mod.view(ba, "float32", n), Float32Array.from({ length: n }, (_, i) => i))
    const y = mod.view(by, "float32", n)
    mod.run("k0", [a, y])
    expect(Array.from(mod.read(y) as Float32Array).slice(0, 3)).toEqual([1, 3, 5])
    fs.writeFileSync(trace, "")
    const s = mod.timeSequence!([{ kernel: "k0", args: [a, y] }, { kernel: "k1", args: [a, y] }], { repeats: 3, minMs: 1 })
    expect(s).toBeGreaterThan(0)
    const calls = fs.readFileSync(trace, "utf8").trim().split("\n")
    const regions = timedRegions(calls)
    expect(regions.length).toBeGreaterThanOrEqual(3)
    // each pass: k0's one launch and k1's two, in order, and nothing else
    for (const r of regions) {
      expect(r.length % 3).toBe(0)
      expect(r).toEqual(Array.from({ length: r.length }, (_, i) => `cuLaunchKernel ${[3, 1, 2][i % 3]}`))
    }
    mod.close()
  }, 60_000)
})

describe("the cuda target's tuning tasks", () => {
  it("are its GPU rules' space under the key compile looks up (cuda:sm_90): a candidate launches a grid of threads, and a record of one applies", async () => {
    const g = makeGraph({
      opset: 13,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 16, 14, 14] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 32, 14, 14] } }],
      initializers: new Map([["w", randomTensor("float32", [32, 16, 3, 3], 1)]]),
      nodes: [node("Conv", ["x", "w"], ["a"], { pads: attr.ints([1, 1, 1, 1]) }), node("Relu", ["a"], ["y"])],
    })
    const target: Target = { kind: "cuda", attrs: cudaAttrsForArch("sm_90") }
    const program = await Effect.runPromise(compileGraph(g, target))
    const tasks = tasksOfProgram(program, target)
    expect(tasks).toHaveLength(1)
    const [runner] = tasks
    expect(runner.task.template.name).toBe("cuda")
    expect(runner.task.workload.split("|").slice(0, 2)).toEqual(["cuda", "cuda:sm_90"])
    // the default config's launch: many blocks of many threads (the CPU template's gave one of one)
    const config = runner.task.template.defaults(runner.task.knobs, { vectorLanes: 1, cores: 1 })
    const source = BACKENDS.cuda.codegen!.renderCandidates!([{ name: "t0", func: runner.lowerConfig(config) }], target)
    const plan = JSON.parse(source.split("\n").find((l) => l.startsWith("// tessera-launches "))!.slice("// tessera-launches ".length)) as { launches: { grid: number[]; block: number[] }[] }
    const threads = plan.launches.map((l) => [...l.grid, ...l.block].reduce((a, b) => a * b, 1))
    expect(Math.min(...threads)).toBeGreaterThanOrEqual(32 * 14 * 14 / 4)
    // a tuning record of that task (not the default config) is what a cuda compile applies
    const other = runner.task.knobs.find((k) => k.candidates.length > 1 && !k.when)!
    const tunedConfig = { ...config, [other.name]: other.candidates.find((c) => c !== config[other.name])! }
    const record: TuningRecord = { v: RECORD_VERSION, task: runner.task.id, workload: runner.task.workload, target: "cuda", config: tunedConfig, costs: [1e-5], timestamp: "2026-11-26T00:00:00Z" }
    const tuned = await Effect.runPromise(compileGraph(g, target, { tuned: bestRecords([record], "cuda") }))
    expect(tuned.tuning.applied).toHaveLength(1)
    expect(tuned.tuning.skipped).toEqual([])
  }, 60_000)
})

describe("the executor's timeKernels", () => {
  it("hands the module's timeSequence the last run's compiled kernels, in order, on that run's buffers; none before a run, none where the module has no timeSequence", async () => {
    const g = makeGraph({
      opset: 13,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 8] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 4] } }],
      initializers: new Map([["w", randomTensor("float32", [8, 4], 1)]]),
      nodes: [node("MatMul", ["x", "w"], ["m"]), node("Softmax", ["m"], ["y"])],
    })
    const target = makeTarget("js")
    const program = await Effect.runPromise(compileGraph(g, target))
    const plain = await Effect.runPromise(loadProgram(program, target))
    expect(plain.timeKernels).toBeUndefined()
    let seen: readonly KernelCall[] = []
    const exec = createExecutor(program, { ...plain.module, timeSequence: (steps) => ((seen = steps), 0.25) })
    expect(() => exec.timeKernels!()).toThrow(ExecutorError)
    const feeds = new Map([["x", randomTensor("float32", [1, 8], 2)]])
    exec.run(feeds)
    expect(exec.timeKernels!()).toBe(0.25)
    const compiled = program.kernels.filter((k) => k.kind === "compiled")
    expect(compiled.length).toBeGreaterThan(0)
    expect(seen.map((c) => c.kernel)).toEqual(compiled.map((k) => k.name))
    expect(seen.map((c) => c.args.length)).toEqual(compiled.map((k) => k.args.length))
  }, 60_000)
})
