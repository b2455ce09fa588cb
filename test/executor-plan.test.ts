// The c executor's plan (src/device/executor.ts, src/device/c/load.ts, the plan unit of
// src/emit/c/emit.ts): where every group is compiled and no kernel reads by a data-given index, a
// run is one native call through the library's table of wrappers, on the reserved buffers, the
// feeds copied in and the outputs out. Its outputs are the per-kernel path's byte for byte (zoo
// networks, a chain with the caller's output arrays, OpenMP at 2 threads); a caller that wraps
// `module.run` in place (the network check, run-profile) still sees every kernel call; a model
// with a host group runs per kernel; the plan unit is its own, its names safe in a batched unit.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { prng } from "../src/ast/graph/arbitrary.js"
import { attr } from "../src/ast/graph/attrs.js"
import { makeGraph, node, type Graph } from "../src/ast/graph/graph.js"
import { tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { cpuAttrs } from "../src/ast/target.js"
import { BACKENDS, cBackend } from "../src/backend/index.js"
import { createExecutor, type Executor } from "../src/device/executor.js"
import type { DeviceModule } from "../src/device/device.js"
import { hostCpu } from "../src/device/host.js"
import { C_PLAN_FILE, C_RUNTIME_FILE, emitC } from "../src/emit/c/emit.js"
import { compiledKernels, type Program } from "../src/lowering/program.js"
import { pipelineOf } from "../src/pipeline-core.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { zooGraph } from "../src/zoo/index.js"
import { existsSync, readFileSync } from "node:fs"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { kernelChain } from "./support/kernel-chain.js"
import { listCases, ONNX_TESTS, readTensorFile } from "./support/onnx-cases.js"

const HAVE_GCC = BACKENDS.c.unavailable() === undefined
const rng = prng(20261127)
const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))
const bytes = (t: Tensor) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength)

const chain = kernelChain(rand)

/** The module with its plan counted: how many plans were made and how many runs went through one. */
const counted = (mod: DeviceModule) => {
  const seen = { plans: 0, runs: 0 }
  const plan = mod.plan
  expect(plan, "the c module has a plan").toBeDefined()
  return {
    seen,
    mod: {
      ...mod,
      plan: (calls: Parameters<NonNullable<DeviceModule["plan"]>>[0]) => {
        seen.plans++
        const run = plan!(calls)
        return () => {
          seen.runs++
          run()
        }
      },
    } satisfies DeviceModule,
  }
}

const sameOutputs = (a: Map<string, Tensor>, b: Map<string, Tensor>) => {
  expect([...a.keys()]).toEqual([...b.keys()])
  for (const [k, t] of a) expect(bytes(t).equals(bytes(b.get(k)!)), `output ${k}`).toBe(true)
}

/** Compiles `graph` for the c target (through `pipeline`), loads it, and runs `check` on the loaded executor. */
const withLoaded = async (graph: Graph, threads: number, check: (exec: Executor, program: Program) => void, pipeline = { compileGraph, loadProgram }) => {
  const target = BACKENDS.c.target(hostCpu(), threads)
  const program = await Effect.runPromise(pipeline.compileGraph(graph, target))
  const exec = await Effect.runPromise(pipeline.loadProgram(program, target, { threads }))
  try {
    check(exec, program)
  } finally {
    exec.module.close()
  }
}

describe.skipIf(!HAVE_GCC)("the c executor's plan", () => {
  it("runs a chain in one call a run, each run its own feeds' answer byte for byte as per kernel, into fresh arrays and the caller's", async () => {
    const target = BACKENDS.c.target(cpuAttrs({ isa: "avx2" }), 1)
    const program = await Effect.runPromise(compileGraph(chain, target))
    expect(compiledKernels(program).length).toBeGreaterThan(1)
    const loaded = await Effect.runPromise(loadProgram(program, target))
    try {
      const { seen, mod } = counted(loaded.module)
      const plan = createExecutor(program, mod)
      const perKernel = createExecutor(program, loaded.module, { plan: false })
      expect(seen.plans).toBe(1)
      const out = new Float32Array(36)
      for (let r = 0; r < 3; r++) {
        const feeds = new Map([["x", rand([6, 6])]])
        const want = perKernel.run(feeds)
        const got = plan.run(feeds)
        sameOutputs(got, want)
        // (a fresh array each run: the next run writes the reserved buffer again)
        expect(got.get("y")!.data).not.toBe(plan.run(new Map([["x", rand([6, 6])]])).get("y")!.data)
        sameOutputs(got, want)
        const into = plan.run(feeds, new Map([["y", out]]))
        expect(into.get("y")!.data).toBe(out)
        sameOutputs(into, want)
      }
      expect(seen.runs).toBe(3 * 3)
    } finally {
      loaded.module.close()
    }
  }, 120_000)

  it("gives way to a caller that wraps module.run in place (the network check, run-profile): every kernel call goes through it", async () => {
    await withLoaded(chain, 1, (exec) => {
      const feeds = new Map([["x", rand([6, 6])]])
      const want = exec.run(feeds)
      const m = exec.module as { run: DeviceModule["run"] }
      const inner = m.run
      const calls: string[] = []
      m.run = (k, a) => {
        calls.push(k)
        inner(k, a)
      }
      try {
        sameOutputs(exec.run(feeds), want)
      } finally {
        m.run = inner
      }
      expect(calls.length).toBeGreaterThan(1)
    })
  }, 120_000)

  it("runs a model with a host group (ScatterElements: the fallback) per kernel, correctly", async () => {
    const g = makeGraph({
      opset: 13,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 4, 6, 6] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 4, 6, 6] } }],
      initializers: new Map([
        ["idx", tensor("int64", [1, 4, 1, 6], Float64Array.from({ length: 24 }, (_, k) => k % 6))],
        ["upd", rand([1, 4, 1, 6])],
      ]),
      nodes: [node("Relu", ["x"], ["r"]), node("ScatterElements", ["r", "idx", "upd"], ["s"], { axis: attr.int(3) }), node("Add", ["s", "x"], ["y"])],
    })
    const target = BACKENDS.c.target(hostCpu(), 1)
    const program = await Effect.runPromise(compileGraph(g, target))
    expect(program.kernels.map((k) => k.kind)).toContain("fallback")
    const loaded = await Effect.runPromise(loadProgram(program, target))
    try {
      const { seen, mod } = counted(loaded.module)
      const exec = createExecutor(program, mod)
      const feeds = new Map([["x", rand([1, 4, 6, 6])]])
      sameOutputs(exec.run(feeds), createExecutor(program, loaded.module, { plan: false }).run(feeds))
      expect(seen).toEqual({ plans: 0, runs: 0 })
    } finally {
      loaded.module.close()
    }
  }, 120_000)

  // zoo networks: the plan's outputs the per-kernel path's, byte for byte; OpenMP's parallel regions at 2 threads too
  const cases = [
    ["mobilenetv2", "pool", 1],
    ["bert", "pool", 1],
    ["squeezenet1.1", "openmp", 2],
  ] as const
  it.each(cases)("%s (%s, %i threads): the plan's outputs are the per-kernel path's, byte for byte", async (name, parallel, threads) => {
    const graph = zooGraph(name, 0)
    const input = graph.inputs[0]
    const feeds = new Map([[input.name, rand(input.type.shape as number[])]])
    const pipeline = parallel === "pool" ? { compileGraph, loadProgram } : pipelineOf({ ...BACKENDS, c: cBackend("openmp") })
    await withLoaded(
      graph,
      threads,
      (exec, program) => {
        const perKernel = createExecutor(program, exec.module, { plan: false })
        sameOutputs(exec.run(feeds), perKernel.run(feeds))
      },
      pipeline,
    )
  }, 600_000)
})

// ONNX conformance cases (float, int64 and double outputs; most compiled whole on c), run both ways
const CASES = [
  "test_conv_with_strides_padding",
  "test_gemm_all_attributes",
  "test_softmax_axis_1",
  "test_sigmoid",
  "test_matmul_3d",
  "test_maxpool_2d_pads",
  "test_averagepool_2d_default",
  "test_add_bcast",
  "test_transpose_all_permutations_0",
  "test_reduce_mean_keepdims_example",
  "test_instancenorm_example",
  "test_batchnorm_example",
  "test_lrn",
  "test_gelu_default_1",
  "test_cast_FLOAT_to_DOUBLE",
  "test_argmax_keepdims_example",
  "test_where_long_example",
]
const onnxCases = existsSync(ONNX_TESTS) ? listCases().filter((c) => c.suite === "node" && CASES.includes(c.name)) : []
describe.skipIf(!HAVE_GCC || onnxCases.length === 0)("the c executor's plan on ONNX conformance cases", () => {
  it("gives the per-kernel path's outputs byte for byte on each case the plan runs", async () => {
    const target = BACKENDS.c.target(hostCpu(), 1)
    let planned = 0
    for (const c of onnxCases) {
      const graph = decodeModelSync(readFileSync(c.model))
      const feeds = new Map<string, Tensor>()
      c.dataSets[0].inputs.forEach((file, j) => {
        const { name, tensor: t } = readTensorFile(file)
        feeds.set((graph.inputs.find((i) => i.name === name) ?? graph.inputs[j]).name, t)
      })
      const program = await Effect.runPromise(compileGraph(graph, target, { shapes: new Map([...feeds].map(([n, t]) => [n, t.shape] as const)) }))
      const loaded = await Effect.runPromise(loadProgram(program, target))
      try {
        const whole = program.kernels.every((k) => k.kind === "compiled")
        // (a program with no compiled kernel has no plan unit)
        const { seen, mod } = loaded.module.plan ? counted(loaded.module) : { seen: { plans: 0, runs: 0 }, mod: loaded.module }
        const got = createExecutor(program, mod).run(feeds)
        sameOutputs(got, createExecutor(program, loaded.module, { plan: false }).run(feeds))
        // (a case with a host group runs per kernel)
        expect(seen, c.name).toEqual(whole ? { plans: 1, runs: 1 } : { plans: 0, runs: 0 })
        planned += seen.runs
      } finally {
        loaded.module.close()
      }
    }
    expect(planned).toBeGreaterThanOrEqual(10)
  }, 600_000)
})

describe("the plan unit", () => {
  const funcs = () => {
    const target = BACKENDS.c.target(cpuAttrs({ isa: "avx2" }), 1)
    return Effect.runPromise(compileGraph(chain, target)).then((p) => compiledKernels(p).map((k) => k.func))
  }
  it("is the last unit, only where asked for; the runtime unit the same bytes with it or without; same funcs, same bytes", async () => {
    const fs = await funcs()
    const withPlan = emitC(fs, { plan: true })
    const without = emitC(fs)
    expect(without.units.map((u) => u.file)).not.toContain(C_PLAN_FILE)
    expect(withPlan.units.at(-1)!.file).toBe(C_PLAN_FILE)
    expect(withPlan.units.slice(0, -1)).toEqual(without.units)
    expect(withPlan.units.find((u) => u.file === C_RUNTIME_FILE)!.source).toBe(emitC([]).units.find((u) => u.file === C_RUNTIME_FILE)!.source)
    expect(emitC(fs, { plan: true })).toEqual(withPlan)
    // (no kernels: no plan)
    expect(emitC([], { plan: true }).units.map((u) => u.file)).toEqual([C_RUNTIME_FILE])
  })
  it("calls every kernel in order through a static wrapper named tessera_plan_<kernel>, and exports only tessera_plan_* names", async () => {
    const fs = await funcs()
    const plan = emitC(fs, { plan: true }).units.at(-1)!.source
    for (const f of fs) expect(plan).toContain(`static void tessera_plan_${f.name}(void* const* a) { ${f.name}(${f.params.map((_, k) => `a[${k}]`).join(", ")}); }`)
    const table = plan.slice(plan.indexOf("tessera_plan_table["))
    const order = fs.map((f) => table.indexOf(`tessera_plan_${f.name},`))
    expect(order.every((at, k) => at > 0 && (k === 0 || at > order[k - 1]))).toBe(true)
    const defined = [...plan.matchAll(/^(?:int|void) (\w+)\(.*\{/gm)].map((m) => m[1])
    expect(defined).toEqual(["tessera_plan_size", "tessera_plan_args", "tessera_plan_run"])
  })
})
