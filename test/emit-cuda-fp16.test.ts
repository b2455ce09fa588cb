// The cuda target's `--precision fp16`: the artifact's arena holds float32 tensors as `__half`
// (weights converted at compile time), every kernel computes and accumulates in float32, the
// model's inputs and outputs stay float32. Checked without a GPU: the artifact built by g++ over
// tessera_emulate.h (its __half converting as the device does) and run by its runner equals the
// TIR evaluator running the same kernels with float16 stores rounded to nearest even (to float32's
// 1e-5: sums in another order), and is within 5e-3 of the fp32 interpreter (softmax outputs);
// broken on purpose: __float2half_rn truncating instead of rounding fails it (3.3e-5 apart);
// the goldens `conv2d_fp16` and `dense_fp16` are what the emitter writes and nvcc builds them for
// sm_80 and sm_90; what fp16 cannot hold is an EmitError naming the node and op.
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import type { Graph } from "../src/ast/graph/graph.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { roundF16 } from "../src/ast/graph/dtype.js"
import { artifactFiles } from "../src/cli/compile.js"
import { targetSettings } from "../src/cli/targets.js"
import { buildCubin, findNvcc } from "../src/device/cuda/nvcc.js"
import { splitLaunches } from "../src/emit/cuda/launch.js"
import { halfKernel, halfValues } from "../src/emit/cuda/precision.js"
import { compiledKernels, type Program } from "../src/lowering/program.js"
import { compileGraph, emitArtifact } from "../src/pipeline.js"
import { NetBuilder } from "../src/zoo/builder.js"
import { scalar } from "../src/zoo/layers.js"
import { runEmulated, tinyNet, writeAll } from "./support/cuda-tiny.js"
import { evaluateLaunches } from "../laws/support-cuda.js"
import { cudaGoldenSource, cudaGoldenText, FP16_GOLDEN_CASES } from "../scripts/cuda-goldens.js"

const NVCC = findNvcc()
const HAVE_GXX = spawnSync("g++", ["--version"], { stdio: "ignore" }).status === 0


const compile = (g: Graph, precision: "fp16" | "fp32" = "fp16", arch = "sm_90") =>
  Effect.gen(function* () {
    const settings = targetSettings("cuda", 1, { cudaArch: arch, precision })
    const program = yield* compileGraph(g, settings.target)
    const artifact = yield* emitArtifact(program, settings.target)
    return { settings, program: program as Program, artifact, files: artifactFiles("tiny.onnx", settings, 3, program, artifact) }
  })
const compiled = (g: Graph, precision: "fp16" | "fp32" = "fp16", arch = "sm_90") => Effect.runPromise(compile(g, precision, arch))

/**
 * The program's kernels as the fp16 artifact runs them, by the TIR evaluator: each kernel's
 * half-stored params float16 buffers (every store rounded to nearest even through float32, as
 * __float2half_rn), its launches in order, values passed between kernels by name.
 */
const evaluateHalfProgram = (program: Program, inputs: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
  const half = halfValues(program)
  const attrs = targetSettings("cuda", 1, { precision: "fp16" }).target.attrs as Parameters<typeof halfKernel>[3]
  const values = new Map<string, Tensor>(inputs)
  for (const [name, t] of program.graph.initializers) values.set(name, half.has(name) ? { ...t, data: Float32Array.from(t.data as Float32Array, roundF16) } : t)
  for (const k of compiledKernels(program)) {
    const f = halfKernel(program, k, half, attrs)
    const args = new Map<string, Tensor>()
    k.args.forEach((a, j) => {
      const t = values.get(a)
      if (t && !k.outputs.includes(a)) args.set(f.params[j].name, t)
    })
    const out = evaluateLaunches(splitLaunches(f), args)
    k.args.forEach((a, j) => {
      if (k.outputs.includes(a)) values.set(a, out.get(f.params[j].name)!)
    })
  }
  return values
}

describe("cuda --precision fp16", () => {
  for (const mk of FP16_GOLDEN_CASES)
    it(`golden/cuda: the case ${mk().name} is what the emitter writes`, () => {
      const g = mk()
      const file = path.join("golden", "cuda", `${g.name}.cu`)
      const text = cudaGoldenText(g)
      if (process.env.UPDATE_GOLDENS) writeFileSync(file, text)
      expect(text).toBe(readFileSync(file, "utf8"))
    })

  it("the artifact holds halves: __half params, weights packed as 2-byte halves at compile time, float32 inputs and outputs; fp32 is as it was", async () => {
    const g = tinyNet()
    const h = await compiled(g)
    const f = await compiled(g, "fp32")
    const kernels = new TextDecoder().decode(h.files.get("tessera_kernels.cu"))
    expect(kernels).toContain("#include <cuda_fp16.h>")
    expect(kernels).toMatch(/const __half\* __restrict__ b\d/)
    expect(kernels).toContain("__float2half_rn(")
    expect(new TextDecoder().decode(f.files.get("tessera_kernels.cu"))).not.toContain("__half")
    // the weights: half the bytes of fp32's (each tensor still 64-byte aligned)
    expect(h.files.get("constants.bin")!.length).toBeLessThan(f.files.get("constants.bin")!.length * 0.6)
    const manifest = JSON.parse(new TextDecoder().decode(h.files.get("manifest.json"))) as { files: { precision: string }; inputs: { dtype: string }[]; outputs: { dtype: string }[] }
    expect(manifest.files.precision).toBe("fp16")
    expect(manifest.inputs.map((i) => i.dtype)).toEqual(["float32"])
    expect(manifest.outputs.map((i) => i.dtype)).toEqual(["float32"])
    // the launcher's table: the input and output 4-byte floats at the boundary
    expect(new TextDecoder().decode(h.files.get("tessera_launcher.cu"))).toMatch(/\{"input", "float32", "<f4", "raw", 4,/)
  })

  it.skipIf(!HAVE_GXX)("built by the host compiler with its kernels emulated, the fp16 runner equals the TIR evaluator with half stores (to float32's 1e-5: the softmax output is float32), and the fp32 interpreter within 5e-3", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-cuda-fp16-"))
    try {
      const g = tinyNet()
      const { files, program } = await compiled(g)
      const { build, run, input, output } = runEmulated(dir, files, { runs: 1, warmup: 0 })
      expect(build.status, build.stderr).toBe(0)
      expect(run!.status, run!.stderr).toBe(0)
      const [x, got] = [input!, output!]
      expect(got.dtype).toBe("float32")
      const sim = evaluateHalfProgram(program, new Map([["input", x]])).get("output")!
      // softmax's output is float32 (the model's), computed from the Gemm's half-stored logits: the two agree to float32 rounding
      for (let i = 0; i < got.data.length; i++) expect(Math.abs(Number(got.data[i]) - Number(sim.data[i]))).toBeLessThanOrEqual(1e-6 + 1e-5 * Math.abs(Number(sim.data[i])))
      // against fp32: half storage of every intermediate (a relative 2^-11 a rounding), through 6 kernels
      const [want] = runGraph(g, new Map([["input", x]]))
      for (let i = 0; i < got.data.length; i++) expect(Math.abs(Number(got.data[i]) - Number(want.data[i]))).toBeLessThanOrEqual(5e-3)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)

  it.skipIf(!NVCC)("nvcc builds the fp16 goldens for sm_80 and sm_90, and the fp16 artifact's runner (kernels, launcher and runner) for sm_90", async () => {
    const goldens = cudaGoldenSource(FP16_GOLDEN_CASES.map((mk) => mk()))
    for (const arch of ["sm_80", "sm_90"]) expect((await Effect.runPromise(buildCubin(NVCC!, goldens, arch))).functions.size).toBe(3)
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-cuda-fp16-nvcc-"))
    try {
      writeAll(dir, (await compiled(tinyNet())).files)
      const env = { ...process.env, PATH: `${path.dirname(NVCC!)}:${process.env.PATH}` }
      const model = spawnSync("make", ["-C", dir, "model", "CUDA_ARCH=sm_90"], { encoding: "utf8", env })
      expect(model.status, model.stderr).toBe(0)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 300_000)

  it("a model's own float16 input (at fp32 too) is a __half in the arena: 2 bytes, read raw from a '<f2' .npy, widened by the kernel that casts it", async () => {
    const b = new NetBuilder(1, 13)
    const x = b.input("input", { dtype: "float16", shape: [1, 8] })
    b.op("Relu", [b.op("Cast", [x], "wide", { to: attr.int(1) })], "output")
    const g = b.build("f16in", [{ name: "output", type: { dtype: "float32", shape: [1, 8] } }])
    const { files } = await compiled(g, "fp32")
    expect(new TextDecoder().decode(files.get("tessera_launcher.cu"))).toMatch(/\{"input", "float16", "<f2", "raw", 2,/)
    const kernels = new TextDecoder().decode(files.get("tessera_kernels.cu"))
    expect(kernels).toMatch(/const __half\* __restrict__ b0/)
    expect(kernels).toContain("__half2float(b0[")
  })

  it("a weight beyond float16's range is an EmitError naming the node and op that read it", async () => {
    const b = new NetBuilder(1, 13)
    const x = b.input("input", { dtype: "float32", shape: [1, 4] })
    const big = b.op("Mul", [x, scalar(b, "huge", 1e5)], "scale")
    b.op("Relu", [b.op("Mul", [big, scalar(b, "two", 2)], "double")], "output")
    const g = b.build("huge", [{ name: "output", type: { dtype: "float32", shape: [1, 4] } }])
    const e = await Effect.runPromise(Effect.flip(compile(g)))
    expect(e).toMatchObject({ _tag: "EmitError", target: "cuda", node: { name: "scale", op: "Mul" } })
    expect(e.message).toMatch(/node Mul "scale": --precision fp16: the constant "huge" \(read by Mul "scale"\) holds 100000 at element 0, beyond float16's ±65504/)
  })
})
