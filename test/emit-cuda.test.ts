// The cuda target: goldens hold; the golden programs' launches compute what their TE says; the
// static GPU checks name the kernel and the limit; a launch that cannot be one, and a group with no
// GPU kernel, are typed errors; emission is deterministic; and a small network compiled end to end
// — kernels, launcher over one arena, runner — builds with nvcc for sm_80 and sm_90, and, built by
// the host compiler with the kernels emulated on the CPU (no GPU here), computes what the
// reference interpreter does.
//
// Goldens: golden/cuda/<case>.cu (cases in scripts/cuda-goldens.ts). After a reviewed change, run
//   UPDATE_GOLDENS=1 npx vitest run test/emit-cuda.test.ts
// and review the printed summary and `git diff golden/cuda`.
//
// What needs nvcc (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin) or g++ skips, visibly, without it.
// TESSERA_CUDA_ZOO=1 also builds every kernel of the zoo's ResNet-18 and MobileNetV2 for sm_80 and
// sm_90 (a minute of nvcc).
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import type { Graph } from "../src/ast/graph/graph.js"
import { exactValues, fromArray, tensor, wideTensor, type Tensor } from "../src/ast/graph/tensor.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { evaluatePrimFunc } from "../src/ast/tir/evaluate.js"
import { add, c, mul, v } from "../src/ast/te/expr.js"
import { cudaAttrsForArch, TargetError } from "../src/ast/target.js"
import type { PrimFunc, Stmt } from "../src/ast/tir/tir.js"
import { prng } from "../src/ast/graph/arbitrary.js"
import { artifactFiles } from "../src/cli/compile.js"
import { errorLine } from "../src/cli/errors.js"
import { targetSettings } from "../src/cli/targets.js"
import { buildCubin, findNvcc, parsePtxas } from "../src/device/cuda/nvcc.js"
import { parseNpy, serializeNpy } from "../src/device/npy.js"
import { constantsLayout } from "../src/emit/cuda/host.js"
import { emitCuda } from "../src/emit/cuda/emit.js"
import { needsLaunchBounds } from "../src/emit/cuda/dialect.js"
import { BACKENDS } from "../src/backend/index.js"
import { parseCandidateLaunches } from "../src/device/cuda/measure.js"
import { cudaGpuHere } from "../src/device/cuda/device.js"
import { splitLaunches } from "../src/emit/cuda/launch.js"
import { CUDA_PRELUDE } from "../src/emit/cuda/prelude.js"
import { EMULATE_HEADER } from "../src/emit/cuda/emulate.js"
import { storageElements } from "../src/ast/tir/analysis.js"
import { GpuLimitError, sharedBytes, verifyLaunch } from "../src/emit/cuda/verify.js"
import type { Program } from "../src/lowering/program.js"
import { compileGraph, emitArtifact, loadProgram } from "../src/pipeline.js"
import { packConstants } from "../src/cli/compile.js"
import { conv, NetBuilder } from "../src/zoo/builder.js"
import { zooGraph } from "../src/zoo/index.js"
import { runEmulated, tinyNet, writeAll } from "./support/cuda-tiny.js"
import { assertAllClose } from "../laws/support.js"
import { evaluateLaunches } from "../laws/support-cuda.js"
import { CUDA_GOLDEN_CASES, cudaGoldenFunc, cudaGoldenText, GOLDEN_CUDA_ATTRS } from "../scripts/cuda-goldens.js"
import { CUDA_GOLDEN_DIR, updateCudaGoldens } from "../scripts/update-goldens.js"

const NVCC = findNvcc()
const HAVE_GXX = spawnSync("g++", ["--version"], { stdio: "ignore" }).status === 0
const SM90 = cudaAttrsForArch("sm_90")

/** The names of the shared buffers a launch allocates. */
const collectSharedNames = (s: Stmt): string[] => {
  const out: string[] = []
  const rec = (x: Stmt): void => {
    if (x.kind === "allocate") {
      if (x.buffer.scope === "shared") out.push(x.buffer.name)
      rec(x.body)
    } else if (x.kind === "seq") x.body.forEach(rec)
    else if (x.kind === "for" || x.kind === "let") rec(x.body)
    else if (x.kind === "if") {
      rec(x.then)
      if (x.else) rec(x.else)
    }
  }
  rec(s)
  return out
}


const compiled = (g: Graph, arch = "sm_90") =>
  Effect.runPromise(
    Effect.gen(function* () {
      const settings = targetSettings("cuda", 1, { cudaArch: arch })
      const program = yield* compileGraph(g, settings.target)
      const artifact = yield* emitArtifact(program, settings.target)
      return { settings, program: program as Program, artifact, files: artifactFiles("tiny.onnx", settings, 3, program, artifact) }
    }),
  )

/**
 * Float32 kernels emitted for the cuda target, built by g++ over tessera_emulate.h with a generated
 * main that reads each kernel's inputs, runs its launches in order (workspace zeroed) and writes
 * every param back: each kernel's params after its run.
 */
const emulateKernels = (funcs: readonly PrimFunc[], inputs: readonly ReadonlyMap<string, Tensor>[]): Map<string, Tensor>[] => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-cuda-kernels-"))
  try {
    const e = emitCuda(funcs, GOLDEN_CUDA_ATTRS)
    const main: string[] = ["int main() {"]
    e.kernels.forEach((k, i) => {
      const bufs = [...k.params, ...k.workspace]
      bufs.forEach((b, j) => {
        const n = storageElements(b)
        const given = inputs[i].get(b.name)
        if (given) writeFileSync(path.join(dir, `in_${i}_${j}.bin`), new Uint8Array(Float32Array.from(given.data as Float32Array).buffer))
        main.push(`  float* k${i}_${j} = (float*)calloc(${n}, 4);`)
        if (given) main.push(`  { FILE* f = fopen("in_${i}_${j}.bin", "rb"); if (fread(k${i}_${j}, 4, ${n}, f) != ${n}) return 1; fclose(f); }`)
      })
      const args = bufs.map((_, j) => `k${i}_${j}`).join(", ")
      for (const l of k.launches) main.push(`  ${l.barriers ? "TESSERA_LAUNCH_SYNC" : "TESSERA_LAUNCH"}(${l.symbol}, dim3(${l.grid.join(", ")}), dim3(${l.block.join(", ")}), 0, ${args});`)
      k.params.forEach((b, j) => main.push(`  { FILE* f = fopen("out_${i}_${j}.bin", "wb"); fwrite(k${i}_${j}, 4, ${storageElements(b)}, f); fclose(f); }`))
    })
    main.push("  return 0;", "}")
    writeFileSync(path.join(dir, "tessera_emulate.h"), EMULATE_HEADER)
    writeFileSync(path.join(dir, "main.cpp"), ['#include "tessera_emulate.h"', e.source, ...main].join("\n"))
    const cc = spawnSync("g++", ["-O1", "-std=c++17", "-o", "main", "main.cpp"], { cwd: dir, encoding: "utf8" })
    expect(cc.status, cc.stderr).toBe(0)
    const run = spawnSync("./main", [], { cwd: dir, encoding: "utf8" })
    expect(run.status, run.stderr).toBe(0)
    const floats = (file: string) => {
      const b = readFileSync(path.join(dir, file))
      return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))
    }
    return e.kernels.map((k, i) => new Map(k.params.map((b, j) => [b.name, tensor("float32", b.view?.shape ?? b.shape, floats(`out_${i}_${j}.bin`))] as const)))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

// ---------------------------------------------------------------------------------------------
// Goldens

describe("cuda target: goldens", () => {
  if (process.env.UPDATE_GOLDENS) void updateCudaGoldens()
  const holds = (name: string, text: string) => {
    const file = path.join(CUDA_GOLDEN_DIR, name)
    expect(existsSync(file), `${file} is missing: UPDATE_GOLDENS=1 npx vitest run test/emit-cuda.test.ts`).toBe(true)
    expect(text === readFileSync(file, "utf8"), `${name} changed: review, then UPDATE_GOLDENS=1 npx vitest run test/emit-cuda.test.ts`).toBe(true)
  }
  for (const mk of CUDA_GOLDEN_CASES)
    it(`golden/cuda: the case ${mk.name} is what the emitter writes`, () => {
      const g = mk()
      holds(`${g.name}.cu`, cudaGoldenText(g))
    })
  it("golden/cuda: the prelude is what the emitter writes", () => holds("tessera_cuda_prelude.cuh", CUDA_PRELUDE))

  it("the golden programs' launches, run in order by the TIR evaluator, compute what their TE says", () => {
    for (const mk of CUDA_GOLDEN_CASES) {
      const g = mk()
      const k = splitLaunches(cudaGoldenFunc(g))
      for (const l of k.launches) verifyLaunch(l, GOLDEN_CUDA_ATTRS)
      const got = evaluateLaunches(k, g.inputs)
      assertAllClose(g.outputs.map((o) => got.get(o.name)!), evaluateTE(g.outputs, g.inputs), 1e-4, 1e-5)
    }
  })

  it("the goldens cover shared memory with barriers, several launches with a workspace, and thread-local arrays", () => {
    const text = new Map(CUDA_GOLDEN_CASES.map((mk) => mk()).map((g) => [g.name, cudaGoldenText(g)] as const))
    expect(text.get("dense")).toMatch(/__shared__/)
    expect(text.get("dense")).toMatch(/__syncthreads\(\);/)
    expect(text.get("softmax")).toMatch(/workspace/)
    expect(text.get("softmax")).toMatch(/softmax_2<<</)
    expect(text.get("conv2d_add_relu")).toMatch(/of the thread \*\//)
  })

  it.skipIf(!HAVE_GXX)("the golden kernels built by the host compiler and emulated on the CPU (shared memory and barriers too) compute what their TE says", () => {
    const cases = CUDA_GOLDEN_CASES.map((mk) => mk())
    const got = emulateKernels(cases.map(cudaGoldenFunc), cases.map((g) => g.inputs))
    cases.forEach((g, k) => assertAllClose(g.outputs.map((o) => got[k].get(o.name)!), evaluateTE(g.outputs, g.inputs), 1e-4, 1e-5))
  })

  it.skipIf(!NVCC)("nvcc compiles every golden kernel for sm_80 and sm_90 (ptxas reports each)", async () => {
    const funcs = CUDA_GOLDEN_CASES.map((mk) => cudaGoldenFunc(mk()))
    const { source } = emitCuda(funcs, GOLDEN_CUDA_ATTRS)
    for (const arch of ["sm_80", "sm_90"]) {
      const { functions } = await Effect.runPromise(buildCubin(NVCC!, source, arch))
      expect([...functions.keys()].sort()).toEqual(expect.arrayContaining(["conv2d", "dense", "softmax_0", "softmax_1", "softmax_2", "conv1x1_fetch_widths"]))
    }
  })
})

// ---------------------------------------------------------------------------------------------
// Static checks and typed errors

/** A launch's PrimFunc: `body` over one float32 param of 4096 elements. */
const func = (body: Stmt): PrimFunc => ({ name: "k0", params: [{ name: "out", dtype: "float32", shape: [4096], scope: "global" }], body })
const loop = (tag: string | undefined, extent: number, body: Stmt, kind: "thread" | "serial" | "vectorized" = tag ? "thread" : "serial"): Stmt =>
  ({ kind: "for", var: v(`i${tag ?? ""}${extent}`), min: c(0), extent: c(extent), forKind: kind, ...(tag ? { thread: tag } : {}), body }) as Stmt
const store = (i: string): Stmt => ({ kind: "store", buffer: "out", indices: [v(i)], value: c(1, "float32") })
const limitOf = (f: PrimFunc) => {
  try {
    for (const l of splitLaunches(f).launches) verifyLaunch(l, SM90)
    return undefined
  } catch (e) {
    return e instanceof GpuLimitError ? e : (e as Error)
  }
}

describe("cuda target: static checks (VerifyGPUCode)", () => {
  it("threads per block past the record's limit: GpuLimitError naming the kernel and maxThreadsPerBlock", () => {
    const e = limitOf(func(loop("blockIdx.x", 2, loop("threadIdx.x", 2048, store("ithreadIdx.x2048")))))
    expect(e).toMatchObject({ _tag: "GpuLimitError", kernel: "k0", limit: "maxThreadsPerBlock", value: 2048, max: 1024 })
    expect(e?.message).toMatch(/cuda kernel "k0"/)
  })
  it("a block dimension z past 64: maxBlockDim.z", () => {
    expect(limitOf(func(loop("threadIdx.z", 128, store("ithreadIdx.z128"))))).toMatchObject({ limit: "maxBlockDim.z", value: 128, max: 64 })
  })
  it("shared memory per block past 48 KiB: sharedMemoryPerBlock", () => {
    const alloc: Stmt = { kind: "allocate", buffer: { name: "tile", dtype: "float32", shape: [16384], scope: "shared" }, body: loop("threadIdx.x", 32, store("ithreadIdx.x32")) }
    expect(limitOf(func(loop("blockIdx.x", 4, alloc)))).toMatchObject({ limit: "sharedMemoryPerBlock", value: 65536, max: 48 * 1024 })
    // the same bytes per thread are the thread's own (no shared memory)
    const own: Stmt = loop("threadIdx.x", 32, { kind: "allocate", buffer: { name: "tile", dtype: "float32", shape: [16384], scope: "local" }, body: store("ithreadIdx.x32") })
    expect(limitOf(func(loop("blockIdx.x", 4, own)))).toBeUndefined()
  })
  it("a vectorized loop wider than 16 bytes: maxVectorBytes", () => {
    expect(limitOf(func(loop("threadIdx.x", 32, loop(undefined, 8, store("i8"), "vectorized"))))).toMatchObject({ limit: "maxVectorBytes", value: 32, max: 16 })
    expect(limitOf(func(loop("threadIdx.x", 32, loop(undefined, 4, store("i4"), "vectorized"))))).toBeUndefined()
  })
  it("a barrier under a thread guard or a condition on threadIdx: uniformBarrier; under block-uniform control it passes", () => {
    const barrier: Stmt = { kind: "barrier" }
    // a thread loop narrower than the block (64 wide from the other loop) guards its body
    const narrow = func(loop("blockIdx.x", 2, { kind: "seq", body: [loop("threadIdx.x", 64, store("ithreadIdx.x64")), loop("threadIdx.x", 32, barrier)] }))
    expect(limitOf(narrow)).toMatchObject({ limit: "uniformBarrier" })
    const cond = func(loop("threadIdx.x", 64, { kind: "if", cond: { kind: "bin", op: "lt", a: v("ithreadIdx.x64"), b: c(3), dtype: "bool" }, then: barrier }))
    expect(limitOf(cond)).toMatchObject({ limit: "uniformBarrier" })
    const uniform = func(loop("blockIdx.x", 4, loop("threadIdx.x", 64, { kind: "if", cond: { kind: "bin", op: "lt", a: v("iblockIdx.x4"), b: c(3), dtype: "bool" }, then: barrier })))
    expect(limitOf(uniform)).toBeUndefined()
  })
  it.skipIf(!HAVE_GXX)("a statement of a block outside its thread loops runs once per block (one thread, between barriers), as in the evaluator", () => {
    // out[b*64 + i] = 1 for every i, once per block; then each thread adds its index to its element
    const init: Stmt = { kind: "for", var: v("i"), min: c(0), extent: c(64), forKind: "serial", body: { kind: "store", buffer: "out", indices: [add(mul(v("b"), c(64)), v("i"))], value: c(1, "float32") } }
    const at = add(mul(v("b"), c(64)), v("t"))
    const bump: Stmt = { kind: "store", buffer: "out", indices: [at], value: add({ kind: "read", source: "out", indices: [at], dtype: "float32" }, { kind: "cast", value: v("t"), dtype: "float32" }) }
    const body: Stmt = { kind: "for", var: v("b"), min: c(0), extent: c(2), forKind: "thread", thread: "blockIdx.x", body: { kind: "seq", body: [init, { kind: "for", var: v("t"), min: c(0), extent: c(64), forKind: "thread", thread: "threadIdx.x", body: bump }] } }
    const f: PrimFunc = { name: "k0", params: [{ name: "out", dtype: "float32", shape: [128], scope: "global" }], body }
    const want = evaluatePrimFunc(f, new Map()).get("out")!
    expect([...want.data].slice(0, 3)).toEqual([1, 2, 3])
    const [got] = emulateKernels([f], [new Map()])
    assertAllClose([got.get("out")!], [want], 0, 0)
    expect(emitCuda([f], SM90).source).toMatch(/__syncthreads\(\);\n\s*\{ const int v\d+ = \(int\)threadIdx\.x; if \(v\d+ < 1\) \{/)
  })

  it("loop variables are int where every integer of the launch fits 32 bits, int64_t where one may not", () => {
    const big = (n: number): PrimFunc => ({
      name: "k0",
      params: [{ name: "out", dtype: "float32", shape: [4096], scope: "global" }],
      body: { kind: "for", var: v("i"), min: c(0), extent: c(n), forKind: "serial", body: { kind: "store", buffer: "out", indices: [{ kind: "bin", op: "floormod", a: mul(v("i"), c(70000)), b: c(4096), dtype: "int32" }], value: c(1, "float32") } },
    })
    expect(emitCuda([big(30000)], SM90).source).toMatch(/for \(int v0 = 0; v0 < 30000; \+\+v0\)/)
    // 40000 · 70000 > 2^31 - 1
    expect(emitCuda([big(40000)], SM90).source).toMatch(/for \(int64_t v0 = 0; v0 < 40000; \+\+v0\)/)
  })

  it("a blockIdx loop under a serial loop cannot be a launch: EmitError naming the kernel", () => {
    expect(limitOf(func(loop(undefined, 3, loop("blockIdx.x", 4, store("iblockIdx.x4")))))).toMatchObject({ _tag: "EmitError", target: "cuda", kernel: "k0" })
  })
  it("an unknown --cuda-arch is a TargetError", () => {
    expect(() => cudaAttrsForArch("sm_99")).toThrow(TargetError)
    expect(cudaAttrsForArch("sm_80")).toMatchObject({ computeCapability: { major: 8, minor: 0 }, multiprocessors: 108, sharedMemoryPerBlockOptin: 163 * 1024 })
  })
  it("__launch_bounds__ only where a block could need more registers than it may hold (ptxas's 255 a thread, 8 at a time, a warp at a time)", () => {
    // 256 threads × 256 registers = 64 Ki, sm_90's registers a block: no bound needed up to there
    for (const t of [32, 96, 196, 224, 245, 256]) expect(needsLaunchBounds(t, SM90)).toBe(false)
    for (const t of [257, 288, 512, 1024]) expect(needsLaunchBounds(t, SM90)).toBe(true)
    // a record whose threads have fewer registers: bounded from where a block could exceed them
    expect(needsLaunchBounds(512, { ...SM90, maxRegistersPerThread: 128 })).toBe(false)
    expect(needsLaunchBounds(513, { ...SM90, maxRegistersPerThread: 128 })).toBe(true)
    const text = (threads: number) => emitCuda([func(loop("threadIdx.x", threads, store(`ithreadIdx.x${threads}`)))], SM90).source
    expect(text(196)).toMatch(/extern "C" __global__ void k0\(/)
    expect(text(512)).toMatch(/extern "C" __global__ void __launch_bounds__\(512\) k0\(/)
  })
  it("ptxas's report is read per function", () => {
    const r = parsePtxas(
      "ptxas info    : Compiling entry function 'k1' for 'sm_90'\nptxas info    : Function properties for k1\n    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\nptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem\n",
    )
    expect(r.get("k1")).toEqual({ registers: 40, spillStores: 4, spillLoads: 4, stackBytes: 8, sharedBytes: 2048 })
  })
})

// ---------------------------------------------------------------------------------------------
// A small network end to end

describe("cuda target: a small network end to end", () => {
  it(`emits the same bytes twice; the arena keeps constants.bin's layout; loading it where no GPU is is a NoGpuError${cudaGpuHere().ok ? " (a GPU is here: the load is the backends test's)" : ""}`, async () => {
    const g = tinyNet()
    const a = await compiled(g)
    const b = await compiled(g)
    expect([...a.files.keys()]).toEqual([...b.files.keys()])
    for (const [name, bytes] of a.files) expect(Buffer.from(bytes).equals(Buffer.from(b.files.get(name)!)), name).toBe(true)
    const packed = packConstants(a.program.graph)
    const layout = constantsLayout(a.program.graph)
    expect(layout.bytes).toBe(packed.bin.length)
    for (const t of packed.index as { name: string; offset: number }[]) expect(layout.offsets.get(t.name)).toBe(t.offset)
    if (!cudaGpuHere().ok) {
      const failure = await Effect.runPromise(Effect.flip(loadProgram(a.program, a.settings.target)))
      expect(failure).toMatchObject({ _tag: "NoGpuError" })
      expect(String(failure.message)).toMatch(/^no CUDA GPU here: /)
    }
  })

  it("a softmax over 128 (BERT's attention): its max and sum reductions each keep their own shared partials (storage rewriting shares no shared buffer across launches); the launches compute the softmax", async () => {
    const b = new NetBuilder(3, 13)
    const x = b.input("input", { dtype: "float32", shape: [1, 2, 4, 128] })
    b.op("Softmax", [x], "output", { axis: attr.int(-1) })
    const g = b.build("softmax", [{ name: "output", type: { dtype: "float32", shape: [1, 2, 4, 128] } }])
    const { program } = await compiled(g)
    const [k] = program.kernels.filter((k) => k.kind === "compiled")
    if (k.kind !== "compiled") throw new Error("no compiled kernel")
    const split = splitLaunches(k.func)
    const shared = split.launches.flatMap((l) => collectSharedNames(l.func.body))
    expect(new Set(shared).size).toBe(shared.length)
    const r = prng(5)
    const input = tensor("float32", [1, 2, 4, 128], Float32Array.from({ length: 1024 }, () => r.float(-4, 4)))
    const [want] = runGraph(g, new Map([["input", input]]))
    const p0 = k.func.params[0].name
    const out = k.func.params[k.func.params.length - 1].name
    const got = evaluateLaunches(split, new Map([[p0, input]])).get(out)!
    assertAllClose([got], [want], 1e-5, 1e-6)
  })

  it("a patch embedding (ViT's 16×16 conv at stride 16 over 224²): the tiling defaults fit the record's shared memory (a block of 14×14 outputs had read a 224×224 input tile, 200 KiB)", async () => {
    const b = new NetBuilder(2, 13)
    const x = b.input("input", { dtype: "float32", shape: [1, 3, 224, 224] })
    conv(b, x, "output", { cin: 3, cout: 8, k: 16, stride: 16, bias: true })
    const g = b.build("patch", [{ name: "output", type: { dtype: "float32", shape: [1, 8, 14, 14] } }])
    const { program } = await compiled(g)
    for (const k of program.kernels) if (k.kind === "compiled") for (const l of splitLaunches(k.func).launches) expect(sharedBytes(l)).toBeLessThanOrEqual(SM90.sharedMemoryPerBlock / 2)
  })

  it("a group with no GPU kernel is an EmitError naming its op", async () => {
    const b = new NetBuilder(1, 13)
    const x = b.input("input", { dtype: "float32", shape: [1, 4] })
    // a Relu in float16 is rounded after the op: its group runs its reference kernel on the host on the CPU targets
    const h = b.op("Relu", [b.op("Cast", [x], "half", { to: attr.int(10) })], "relu")
    b.op("Cast", [h], "output", { to: attr.int(1) })
    const g = b.build("half", [{ name: "output", type: { dtype: "float32", shape: [1, 4] } }])
    const e = await Effect.runPromise(
      Effect.flip(
        Effect.gen(function* () {
          const settings = targetSettings("cuda", 1)
          const program = yield* compileGraph(g, settings.target)
          return yield* emitArtifact(program, settings.target)
        }),
      ),
    )
    expect(e).toMatchObject({ _tag: "EmitError", target: "cuda" })
    expect(e.message).toMatch(/group 0 has no GPU kernel: Cast "half", Relu "relu", Cast "output" would run on the host/)
    // the command line's one line says what to do (not "a bug in the emitter")
    expect(errorLine("compile", e)).toMatch(/has no GPU kernel yet; compile for --target c, or report the op$/)
  })

  it.skipIf(!NVCC)("its artifact builds with nvcc alone: the kernels for sm_80, the runner for sm_90", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-cuda-"))
    try {
      const { files } = await compiled(tinyNet(), "sm_80")
      writeAll(dir, files)
      const env = { ...process.env, PATH: `${path.dirname(NVCC!)}:${process.env.PATH}` }
      const cubin = spawnSync("make", ["-C", dir, "kernels.cubin"], { encoding: "utf8", env })
      expect(cubin.status, cubin.stderr).toBe(0)
      const model = spawnSync("make", ["-C", dir, "model", "CUDA_ARCH=sm_90"], { encoding: "utf8", env })
      expect(model.status, model.stderr).toBe(0)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)

  it.skipIf(!HAVE_GXX)("built by the host compiler with its kernels emulated, its runner computes what the interpreter does", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-cuda-emulate-"))
    try {
      const g = tinyNet()
      const { build, run, input: x, output: got } = runEmulated(dir, (await compiled(g)).files, { runs: 2, warmup: 1 })
      expect(build.status, build.stderr).toBe(0)
      expect(run!.status, run!.stderr).toBe(0)
      expect(JSON.parse(run!.stdout.trim())).toMatchObject({ runs: 2, warmup: 1 })
      const [want] = runGraph(g, new Map([["input", x!]]))
      assertAllClose([got!], [want], 1e-4, 1e-6)
      // the runner's own checks, before any device call: a missing input, a wrong shape
      const missing = spawnSync(path.join(dir, "model-emulated"), ["--runs", "1"], { encoding: "utf8" })
      expect(missing.status).toBe(2)
      expect(missing.stderr).toMatch(/input 'input' is missing/)
      writeFileSync(path.join(dir, "bad.npy"), serializeNpy(fromArray("float32", [1, 3, 16], Array.from({ length: 48 }, () => 0))))
      const bad = spawnSync(path.join(dir, "model-emulated"), ["--input", `input=${path.join(dir, "bad.npy")}`], { encoding: "utf8" })
      expect(bad.status).toBe(2)
      expect(bad.stderr).toMatch(/shape \(1, 3, 16\), input 'input' is \(1, 3, 16, 16\)/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)

  it.skipIf(!HAVE_GXX)("int64 past 2^53 goes in, through a kernel and out of the runner exactly (int64_t in the arena, as in constants.bin)", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-cuda-int64-"))
    try {
      const b = new NetBuilder(7, 13)
      const x = b.input("x", { dtype: "int64", shape: [4] })
      const k = b.constant("k", wideTensor("int64", [4], BigInt64Array.from([1n, 2n, 0n, 2n ** 60n])))
      b.op("Add", [x, k], "y")
      const g = b.build("int64", [{ name: "y", type: { dtype: "int64", shape: [4] } }])
      const { files, program } = await compiled(g)
      expect(program.kernels.every((kk) => kk.kind === "compiled")).toBe(true)
      writeAll(dir, files)
      const build = spawnSync("make", ["-C", dir, "emulate"], { encoding: "utf8" })
      expect(build.status, build.stderr).toBe(0)
      const feed = wideTensor("int64", [4], BigInt64Array.from([2n ** 53n + 1n, 2n ** 62n + 7n, -(2n ** 63n), 2n ** 60n - 3n]))
      writeFileSync(path.join(dir, "x.npy"), serializeNpy(feed))
      mkdirSync(path.join(dir, "out"))
      const run = spawnSync(path.join(dir, "model-emulated"), ["--input", `x=${path.join(dir, "x.npy")}`, "--out", path.join(dir, "out"), "--runs", "1", "--warmup", "0"], { encoding: "utf8" })
      expect(run.status, run.stderr).toBe(0)
      const got = parseNpy(new Uint8Array(readFileSync(path.join(dir, "out", "y.npy"))))
      expect(Array.from(exactValues(got))).toEqual([2n ** 53n + 2n, 2n ** 62n + 9n, -(2n ** 63n), 2n ** 61n - 3n])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)

  for (const model of ["resnet18", "mobilenetv2"])
    it.skipIf(!NVCC || !process.env.TESSERA_CUDA_ZOO)(`(TESSERA_CUDA_ZOO=1) every kernel of the zoo's ${model} compiles with nvcc for sm_80 and sm_90`, async () => {
      for (const arch of ["sm_80", "sm_90"]) {
        const { artifact } = await compiled(zooGraph(model), arch)
        const source = new TextDecoder().decode(artifact.files.get("tessera_kernels.cu"))
        const { functions } = await Effect.runPromise(buildCubin(NVCC!, source, arch))
        expect(functions.size).toBeGreaterThan(10)
      }
    }, 600_000)

  it("tuning candidates render with their launches for the GPU measurer: each candidate's functions are in the source, its grid and block those the emitter verified", () => {
    const funcs = CUDA_GOLDEN_CASES.map((mk, k) => ({ name: `t${k}`, func: cudaGoldenFunc(mk()) }))
    const source = BACKENDS.cuda.codegen!.renderCandidates!(funcs, { kind: "cuda", attrs: GOLDEN_CUDA_ATTRS })
    const plans = parseCandidateLaunches(source)
    expect([...plans.keys()]).toEqual(funcs.map((f) => f.name))
    const direct = emitCuda(funcs.map((f) => ({ ...f.func, name: f.name })), GOLDEN_CUDA_ATTRS)
    for (const k of direct.kernels) {
      const p = plans.get(k.name)!
      expect(p.launches).toEqual(k.launches.map((l) => ({ function: l.symbol, grid: l.grid, block: l.block })))
      for (const l of p.launches) expect(source).toContain(` ${l.function}(`)
      expect(p.workspace.length).toBe(k.workspace.length)
    }
  })

  it("tuning candidates are checked against the tuned target's record (--cuda-arch), not the default sm_90's", () => {
    const funcs = CUDA_GOLDEN_CASES.map((mk, k) => ({ name: `t${k}`, func: cudaGoldenFunc(mk()) }))
    const render = BACKENDS.cuda.codegen!.renderCandidates!
    // sm_80 renders as sm_90 does; a record whose blocks hold 16 threads refuses the goldens' blocks of 64
    expect(render(funcs, { kind: "cuda", attrs: cudaAttrsForArch("sm_80") })).toContain("// tessera-launches ")
    expect(() => render(funcs, { kind: "cuda", attrs: { ...cudaAttrsForArch("sm_80"), maxThreadsPerBlock: 16 } })).toThrow(/maxThreadsPerBlock|threads/)
  })
})
