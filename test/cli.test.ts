// The `tessera` command line, run as users run it: `node bin/tessera.js ...` after `npm run build`
// (built once into dist/ for the whole run: test/support/dist.ts), on small models written to a temporary folder.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { exactValues, fromArray, wideTensor } from "../src/ast/graph/tensor.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { randomTensor } from "../src/cli/inputs.js"
import { parseNpy, serializeNpy } from "../src/device/npy.js"
import { ZOO_NAMES, zooModel } from "../src/zoo/index.js"
import { initializer, intsAttr, modelBytes, transposeModel, twoOutputModel, valueInfo } from "./cli-models.js"
import { cudaGpuHere } from "../src/device/cuda/device.js"
import { BIN } from "./support/dist.js"

let tmp = ""

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-cli-"))
})
afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
})

const tessera = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { cwd: tmp, encoding: "utf8", timeout: 120_000 })

/** Runs a command expected to succeed; its stdout. */
const ok = (...args: string[]): string => {
  const r = tessera(...args)
  expect(r.stderr).toBe("")
  expect(r.status).toBe(0)
  return r.stdout
}
/** The JSON object on the last line of stdout. */
const lastJson = (stdout: string) => JSON.parse(stdout.trim().split("\n").at(-1)!)

const write = (name: string, bytes: Uint8Array): string => {
  const f = path.join(tmp, name)
  fs.writeFileSync(f, bytes)
  return f
}

describe("tessera", () => {
  it("--help lists the commands", () => {
    const out = ok("--help")
    for (const c of ["run", "compile", "bench", "inspect", "zoo", "demo"]) expect(out).toMatch(new RegExp(`^\\s+${c}\\s`, "m"))
  })
  it("run --help documents the flags", () => {
    const out = ok("run", "--help")
    for (const f of ["--target", "--input", "--shape", "--out", "--seed", "--opt-level", "--dump-ir", "--report"]) expect(out).toContain(f)
  })
})

describe("tessera run", () => {
  it("runs with seeded random inputs, prints one JSON line and writes DIR/NAME.npy", () => {
    const model = write("t.onnx", transposeModel())
    const out = path.join(tmp, "run1")
    const stdout = ok("run", model, "--shape", "x=4x3", "--seed", "7", "--out", out)
    expect(stdout.trim().split("\n")).toHaveLength(1)
    const summary = JSON.parse(stdout)
    expect(summary).toMatchObject({
      model,
      target: "interp",
      inputs: [{ name: "x", dtype: "float32", shape: [4, 3], source: "random(seed 7)" }],
      outputs: [{ name: "y", dtype: "float32", shape: [3, 4], file: path.join(out, "y.npy") }],
    })
    expect(typeof summary.ms).toBe("number")
    // the output is the model's meaning on the seeded input
    const x = randomTensor("float32", [4, 3], 7, 0)
    const [want] = runGraph(decodeModelSync(transposeModel()), new Map([["x", x]]))
    const got = parseNpy(fs.readFileSync(path.join(out, "y.npy")))
    expect(got.shape).toEqual([3, 4])
    expect(Array.from(got.data)).toEqual(Array.from(want.data))
    expect(fs.readdirSync(out)).toEqual(["y.npy"]) // no temporary files left
  })

  it("is deterministic for a seed, and the seed matters", () => {
    const model = write("t.onnx", transposeModel())
    const a = path.join(tmp, "seedA")
    const b = path.join(tmp, "seedB")
    const c = path.join(tmp, "seedC")
    ok("run", model, "--shape", "x=2x3", "--seed", "1", "--out", a)
    ok("run", model, "--shape", "x=2x3", "--seed", "1", "--out", b)
    ok("run", model, "--shape", "x=2x3", "--seed", "2", "--out", c)
    expect(fs.readFileSync(path.join(a, "y.npy"))).toEqual(fs.readFileSync(path.join(b, "y.npy")))
    expect(fs.readFileSync(path.join(a, "y.npy"))).not.toEqual(fs.readFileSync(path.join(c, "y.npy")))
  })

  it("an --input file binds the symbolic dims", () => {
    const model = write("t.onnx", transposeModel())
    const x = write("x.npy", serializeNpy(fromArray("float32", [5, 3], Array.from({ length: 15 }, (_, i) => i))))
    const out = path.join(tmp, "bound")
    const summary = JSON.parse(ok("run", model, "--input", `x=${x}`, "--out", out))
    expect(summary.inputs).toEqual([{ name: "x", dtype: "float32", shape: [5, 3], source: x }])
    expect(summary.outputs[0].shape).toEqual([3, 5])
    const y = parseNpy(fs.readFileSync(path.join(out, "y.npy")))
    expect(Array.from(y.data)).toEqual([0, 3, 6, 9, 12, 1, 4, 7, 10, 13, 2, 5, 8, 11, 14])
  })

  it("writes nothing without --out", () => {
    const model = write("t.onnx", transposeModel())
    const before = fs.readdirSync(tmp).sort()
    const summary = JSON.parse(ok("run", model, "--shape", "x=1x3"))
    expect(summary.outputs).toEqual([{ name: "y", dtype: "float32", shape: [3, 1] }])
    expect(fs.readdirSync(tmp).sort()).toEqual(before)
  })

  it("names output files after the outputs, with unsafe characters replaced by '_'", () => {
    const model = write("two.onnx", twoOutputModel())
    const b = write("b.npy", serializeNpy(fromArray("int64", [4], [1, -2, 3, 2 ** 40])))
    const out = path.join(tmp, "two")
    const summary = JSON.parse(ok("run", model, "--input", `b/in=${b}`, "--out", out))
    expect(summary.outputs.map((o: { name: string; file: string }) => [o.name, path.basename(o.file)])).toEqual([
      ["out:a", "out_a.npy"],
      ["out/b", "out_b.npy"],
    ])
    expect(fs.readdirSync(out).sort()).toEqual(["out_a.npy", "out_b.npy"])
    const ob = parseNpy(fs.readFileSync(path.join(out, "out_b.npy")))
    expect(ob.dtype).toBe("int64")
    expect(Array.from(ob.data)).toEqual([1, -2, 3, 2 ** 40, 1, -2, 3, 2 ** 40])
  })

  it("int64 past 2^53 comes back exact from run on every target (issue 19: 2^53+1 came back as 2^53, 2^62+7 as 2^62)", () => {
    const big = [2n ** 53n + 1n, 2n ** 62n + 7n, -(2n ** 63n), 2n ** 63n - 2n]
    const model = write(
      "i64.onnx",
      modelBytes({
        inputs: [valueInfo("x", "int64", [4])],
        outputs: [valueInfo("y", "int64", [4]), valueInfo("z", "int64", [4])],
        nodes: [
          { op: "Add", inputs: ["x", "one"], outputs: ["y"] },
          { op: "Identity", inputs: ["x"], outputs: ["z"] },
        ],
        initializers: [initializer(wideTensor("int64", [1], BigInt64Array.of(1n)), "one")],
      }),
    )
    const x = write("x64.npy", serializeNpy(wideTensor("int64", [4], BigInt64Array.from(big))))
    for (const target of ["interp", "js", "wasm", "c"]) {
      const out = path.join(tmp, `i64-${target}`)
      ok("run", model, "--target", target, "--input", `x=${x}`, "--out", out)
      const read = (f: string) => [...exactValues(parseNpy(fs.readFileSync(path.join(out, f))))].map(String)
      expect(read("y.npy"), target).toEqual(big.map((v) => String(v + 1n)))
      expect(read("z.npy"), target).toEqual(big.map(String))
    }
  })

  it("--input splits at the last '=' (input names may contain '=')", () => {
    const model = write(
      "eq.onnx",
      modelBytes({
        inputs: [valueInfo("k=v", "float32", [2])],
        outputs: [valueInfo("y", "float32", [2])],
        nodes: [{ op: "Transpose", inputs: ["k=v"], outputs: ["y"] }],
      }),
    )
    const x = write("kv.npy", serializeNpy(fromArray("float32", [2], [1.5, -1])))
    const summary = JSON.parse(ok("run", model, "--input", `k=v=${x}`))
    expect(summary.inputs[0]).toMatchObject({ name: "k=v", source: x })
  })

  it("overwrites earlier outputs atomically", () => {
    const model = write("t.onnx", transposeModel())
    const out = path.join(tmp, "again")
    ok("run", model, "--shape", "x=2x3", "--out", out)
    ok("run", model, "--shape", "x=3x3", "--out", out)
    expect(parseNpy(fs.readFileSync(path.join(out, "y.npy"))).shape).toEqual([3, 3])
    expect(fs.readdirSync(out)).toEqual(["y.npy"])
  })
})

describe("tessera inspect", () => {
  const reshape = () =>
    write(
      "reshape.onnx",
      modelBytes({
        inputs: [valueInfo("x", "float32", ["N", 4])],
        outputs: [valueInfo("y", "float32", [2, "M"])],
        initializers: [initializer(fromArray("int64", [2], [2, -1]), "shape")],
        nodes: [{ op: "Reshape", inputs: ["x", "shape"], outputs: ["y"], name: "flatten_it" }],
      }),
    )

  it("text: a summary, then the graph as printGraph shows it", () => {
    const out = ok("inspect", reshape(), "--shape", "x=3x4")
    expect(out).toContain("inputs:  x: float32[3,4]")
    expect(out).toContain("outputs: y: float32[2,6]")
    expect(out).toMatch(/nodes: 1, parameters: 2 \(16 B\)/)
    expect(out).toContain("ops: Reshape×1")
    expect(out).toContain("graph test (opset 17) {")
    expect(out).toContain("%y: float32[2,6] = Reshape(%x, %shape)  # flatten_it")
  })

  it("json: one object on the last line", () => {
    const j = lastJson(ok("inspect", reshape(), "--format", "json"))
    expect(j).toMatchObject({
      graph: "test",
      opset: 17,
      inputs: [{ name: "x", type: "float32[N,4]" }],
      ops: { Reshape: 1 },
      nodes: 1,
      parameters: 2,
      parameterBytes: 16,
      flops: null, // N unbound
      nodeList: [{ name: "flatten_it", op: "Reshape", inputs: ["x", "shape"], outputs: ["y"] }],
    })
    expect(lastJson(ok("inspect", reshape(), "--format", "json", "--shape", "x=3x4")).flops).toBe(12)
  })

  it("--fused adds the groups and the memory plan", () => {
    const j = lastJson(ok("inspect", reshape(), "--format", "json", "--fused", "--shape", "x=3x4"))
    expect(j.groups.map((g: { ops: string[] }) => g.ops)).toEqual([["Reshape"]])
    expect(j.memory).toHaveProperty("plannedBytes")
    expect(j.memory).toHaveProperty("naiveBytes")
  })

  it("dot: a Graphviz graph", () => expect(ok("inspect", reshape(), "--format", "dot")).toMatch(/^digraph tessera \{/))
})

describe("tessera zoo", () => {
  it("lists the zoo without a name", () => {
    const out = ok("zoo")
    for (const n of ["resnet18", "mobilenetv2", "mlp", "bert", "vit-b16", "bert-base"]) expect(out).toMatch(new RegExp(`^${n}\\s`, "m"))
  })
  it("writes a network with seeded weights, the same bytes as the library's, that runs", () => {
    const file = path.join(tmp, "zoo", "mlp.onnx")
    const summary = lastJson(ok("zoo", "mlp", "--out", file, "--seed", "3"))
    expect(summary).toEqual({ model: "mlp", seed: 3, file, bytes: fs.statSync(file).size })
    expect(Buffer.compare(fs.readFileSync(file), zooModel("mlp", 3))).toBe(0) // (toEqual on 2 MB is slow)
    expect(decodeModelSync(fs.readFileSync(file)).outputs.map((o) => o.name)).toEqual(["output"])
    const run = JSON.parse(ok("run", file))
    expect(run.outputs).toEqual([{ name: "output", dtype: "float32", shape: [1, 10] }])
  })
  it("an unknown network: one line, exit 2, no file", () => {
    const r = tessera("zoo", "resnet1000", "--out", path.join(tmp, "r.onnx"))
    expect(r.status).toBe(2)
    expect(r.stderr.trim()).toBe(`tessera zoo: NAME: no zoo model 'resnet1000' (the zoo has: ${ZOO_NAMES.join(", ")}) (see 'tessera zoo --help')`)
    expect(fs.existsSync(path.join(tmp, "r.onnx"))).toBe(false)
  })
})

describe("tessera demo", () => {
  it("runs a zoo network through Tessera and onnxruntime and compares (mlp: small enough for a test)", () => {
    const out = ok("demo", "--model", "mlp")
    const row = out.split("\n").find((l) => l.startsWith("mlp "))
    expect(row, out).toBeDefined()
    // with onnxruntime-node: times on both sides, a tiny difference, the same top-5 classes
    if (!/onnxruntime-node is not available/.test(out)) {
      const [, ours, interp, ort, diff, agree] = row!.split(/\s{2,}/)
      expect(Number(ours)).toBeGreaterThan(0)
      expect(Number(interp)).toBeGreaterThan(0)
      expect(Number(ort)).toBeGreaterThan(0)
      expect(Number(diff)).toBeLessThan(1e-4)
      expect(agree).toMatch(/^yes \(\d+(,\d+){4}\)$/)
    }
  })
})

/** x: float32[1,3,8,8] → Conv 3x3 pad 1 (4 channels, bias) → Relu → MaxPool 2x2 → y: float32[1,4,4,4]. */
const convModel = (): Uint8Array => {
  const w = randomTensor("float32", [4, 3, 3, 3], 11, 0)
  const b = randomTensor("float32", [4], 11, 1)
  return modelBytes({
    inputs: [valueInfo("x", "float32", [1, 3, 8, 8])],
    outputs: [valueInfo("y", "float32", [1, 4, 4, 4])],
    initializers: [initializer(w, "w"), initializer(b, "b")],
    nodes: [
      { op: "Conv", inputs: ["x", "w", "b"], outputs: ["c"], attrs: [intsAttr("pads", [1, 1, 1, 1]), intsAttr("kernel_shape", [3, 3])] },
      { op: "Relu", inputs: ["c"], outputs: ["r"] },
      { op: "MaxPool", inputs: ["r"], outputs: ["y"], attrs: [intsAttr("kernel_shape", [2, 2]), intsAttr("strides", [2, 2])] },
    ],
  })
}

const npyOut = (dir: string, name: string) => parseNpy(fs.readFileSync(path.join(dir, `${name}.npy`)))
const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  expect(a.length).toBe(b.length)
  let d = 0
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]))
  return d
}

describe("tessera run --target / --opt-level / --dump-ir / --report", () => {
  it("the js target computes what the interpreter computes (zoo mlp, a small conv net), at opt levels 0 and 3", () => {
    const mlp = write("mlp.onnx", zooModel("mlp", 1))
    const conv = write("conv.onnx", convModel())
    for (const [model, out] of [[mlp, "output"], [conv, "y"]] as const) {
      const interp = path.join(tmp, `${out}-interp`)
      const js = path.join(tmp, `${out}-js`)
      const o0 = path.join(tmp, `${out}-o0`)
      expect(lastJson(ok("run", model, "--target", "js", "--out", js))).toMatchObject({ target: "js", optLevel: 3, kernels: { fallback: 0 } })
      ok("run", model, "--out", interp)
      ok("run", model, "--opt-level", "0", "--out", o0)
      const want = npyOut(o0, out).data
      expect(maxDiff(npyOut(interp, out).data, want)).toBeLessThan(1e-5)
      expect(maxDiff(npyOut(js, out).data, want)).toBeLessThan(1e-5)
    }
  })

  it("--dump-ir writes the graph after each pass and each kernel's TIR; --report times the passes (stderr and summary)", () => {
    const conv = write("conv.onnx", convModel())
    const dir = path.join(tmp, "ir")
    const r = tessera("run", conv, "--target", "js", "--dump-ir", dir, "--report")
    expect(r.status, r.stderr).toBe(0)
    const files = fs.readdirSync(dir)
    expect(files[0]).toBe("00-input.txt")
    // (QdqToInteger runs first: FoldConstants would dequantize a QDQ model's 8-bit weights)
    expect(files).toContain("01-rewrite.QdqToInteger.txt")
    expect(files).toContain("02-rewrite.FoldConstants.txt")
    expect(files.some((f) => /^\d\d-rewrite\.FuseOps\.txt$/.test(f))).toBe(true)
    expect(files.some((f) => /^\d\d-lowering\.k0\.txt$/.test(f))).toBe(true)
    expect(files.every((f) => /^\d\d-[A-Za-z0-9_.-]+\.txt$/.test(f))).toBe(true) // no temporary files left
    expect(fs.readFileSync(path.join(dir, files.find((f) => f.includes("lowering.k0"))!), "utf8")).toMatch(/primfunc /)
    const summary = lastJson(r.stdout)
    expect(summary.irFiles).toBe(files.length)
    expect(summary.passes.map((p: { pass: string }) => p.pass)).toContain("rewrite.FoldConstants")
    expect(r.stderr).toMatch(/^pass\s+ms\s+nodes$/m)
    expect(r.stderr).toMatch(/rewrite\.EliminateDeadCode\s+\d+\.\d{3}\s+\d+ → \d+/)
  })

  it("the wasm target (and c, where gcc is installed) compute what the interpreter computes", () => {
    const conv = write("conv.onnx", convModel())
    const want = path.join(tmp, "conv-ref")
    ok("run", conv, "--opt-level", "0", "--out", want)
    for (const target of ["wasm", "c"]) {
      if (target === "c" && spawnSync("gcc", ["--version"]).status !== 0) {
        console.warn("skipped: run --target c (gcc is not installed)")
        continue
      }
      const dir = path.join(tmp, `conv-${target}`)
      expect(lastJson(ok("run", conv, "--target", target, "--out", dir))).toMatchObject({ target, kernels: { fallback: 0 } })
      expect(maxDiff(npyOut(dir, "y").data, npyOut(want, "y").data)).toBeLessThan(1e-5)
    }
  })

  it("an unknown target is one clear line naming the targets", () => {
    const r = tessera("run", write("t.onnx", transposeModel()), "--target", "tpu", "--shape", "x=1x3")
    expect(r.status).toBe(2)
    expect(r.stderr.trim()).toBe("tessera run: --target: no target 'tpu' here (choose one of: interp, js, c, wasm, cuda) (see 'tessera run --help')")
  })

  it.skipIf(cudaGpuHere().ok)(`--target cuda without a GPU (no CUDA driver or no device): a NoGpuError naming why, exit 2${cudaGpuHere().ok ? " (skipped: a GPU is here)" : ""}`, () => {
    const r = tessera("run", write("t.onnx", transposeModel()), "--target", "cuda", "--shape", "x=1x3")
    expect(r.status).toBe(2)
    expect(r.stderr).toMatch(/^tessera run: .*no CUDA GPU here: /)
  })
})

describe("tessera compile", () => {
  it("writes the js artifact deterministically: module, constants and manifest", () => {
    const conv = write("conv.onnx", convModel())
    const a = path.join(tmp, "artA")
    const b = path.join(tmp, "artB")
    const sa = lastJson(ok("compile", conv, "--target", "js", "--out", a))
    ok("compile", conv, "--target", "js", "--out", b)
    expect(sa.files.sort()).toEqual(["constants.bin", "manifest.json", "model.js"])
    expect(fs.readdirSync(a).sort()).toEqual(["constants.bin", "manifest.json", "model.js"])
    for (const f of sa.files) expect(Buffer.compare(fs.readFileSync(path.join(a, f)), fs.readFileSync(path.join(b, f))), f).toBe(0)
    const m = JSON.parse(fs.readFileSync(path.join(a, "manifest.json"), "utf8"))
    expect(m).toMatchObject({ model: "conv.onnx", target: { kind: "js" }, inputs: [{ name: "x", dtype: "float32", shape: [1, 3, 8, 8] }], outputs: [{ name: "y" }], fallback: [] })
    expect(m.kernels.length).toBeGreaterThan(0)
    expect(m.memory).toHaveProperty("plannedBytes")
    expect(m.constants.tensors.reduce((s: number, t: { bytes: number }) => s + t.bytes, 0)).toBeGreaterThanOrEqual((4 * 27 + 4) * 4)
    expect(fs.readFileSync(path.join(a, "model.js"), "utf8")).toMatch(/export function k0\(/)
  })

  it("--target cuda writes the CUDA sources, launcher, runner and Makefile deterministically, nvcc or not; --cuda-arch names the GPU", () => {
    const conv = write("conv.onnx", convModel())
    const a = path.join(tmp, "cudaA")
    const b = path.join(tmp, "cudaB")
    const r = tessera("compile", conv, "--target", "cuda", "--cuda-arch", "sm_80", "--out", a)
    expect(r.status, r.stderr).toBe(0)
    // nvcc here: its report; none: a line saying that nothing was built
    expect(r.stderr).toMatch(/tessera compile: (nvcc built \d+ kernels for sm_80|nvcc was not found .* nothing was built)/)
    expect(tessera("compile", conv, "--target", "cuda", "--cuda-arch", "sm_80", "--out", b).status).toBe(0)
    const files = ["Makefile", "constants.bin", "manifest.json", "runner.cu", "tessera_emulate.h", "tessera_kernels.cu", "tessera_launcher.cu", "tessera_model.h"]
    expect(lastJson(r.stdout).files.sort()).toEqual(files)
    for (const f of files) expect(Buffer.compare(fs.readFileSync(path.join(a, f)), fs.readFileSync(path.join(b, f))), f).toBe(0)
    const m = JSON.parse(fs.readFileSync(path.join(a, "manifest.json"), "utf8"))
    expect(m.files).toMatchObject({ arch: "sm_80", kernels: "tessera_kernels.cu", program: "model" })
    // the conv's launch: its grid and block from the bindings, its shared tiles within sm_80's default 48 KiB
    const first = m.files.launches[0].launches[0]
    expect(first).toMatchObject({ grid: [expect.any(Number), 1, 1], block: [expect.any(Number), 1, 1], sharedBytes: expect.any(Number) })
    expect(first.sharedBytes).toBeLessThanOrEqual(48 * 1024)
    expect(fs.readFileSync(path.join(a, "Makefile"), "utf8")).toMatch(/CUDA_ARCH \?= sm_80/)
    expect(fs.readFileSync(path.join(a, "tessera_kernels.cu"), "utf8")).toMatch(/extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?k0\(/)
    // without nvcc: the same sources, and a line saying that nothing was built
    const c = path.join(tmp, "cudaC")
    const bare = spawnSync(process.execPath, [BIN, "compile", conv, "--target", "cuda", "--cuda-arch", "sm_80", "--out", c], {
      cwd: tmp,
      encoding: "utf8",
      env: { ...process.env, CUDA_HOME: path.join(tmp, "no-cuda"), PATH: path.dirname(process.execPath) },
    })
    expect(bare.status, bare.stderr).toBe(0)
    expect(bare.stderr).toMatch(/nvcc was not found .*nothing was built/)
    expect(JSON.parse(fs.readFileSync(path.join(c, "manifest.json"), "utf8")).files.build).toEqual({ nvcc: null })
    for (const f of files.filter((f) => f !== "manifest.json")) expect(Buffer.compare(fs.readFileSync(path.join(a, f)), fs.readFileSync(path.join(c, f))), f).toBe(0)
    const unknown = tessera("compile", conv, "--target", "cuda", "--cuda-arch", "sm_99", "--out", a)
    expect(unknown.status).toBe(2)
    expect(unknown.stderr).toMatch(/^tessera compile: --cuda-arch: 'sm_99' is not one Tessera knows \(sm_70, .*sm_90\)/)
    const notCuda = tessera("compile", conv, "--target", "c", "--cuda-arch", "sm_80", "--out", a)
    expect(notCuda.status).toBe(2)
    expect(notCuda.stderr).toMatch(/^tessera compile: --cuda-arch: is for --target cuda, not c/)
  })

  it("--target cuda --precision fp16 writes __half kernels and halved weights (float32 inputs and outputs); another precision, or another target, is a usage error", () => {
    const conv = write("conv.onnx", convModel())
    const bare = (...args: string[]) =>
      spawnSync(process.execPath, [BIN, ...args], { cwd: tmp, encoding: "utf8", env: { ...process.env, CUDA_HOME: path.join(tmp, "no-cuda"), PATH: path.dirname(process.execPath) } })
    const h = path.join(tmp, "cudaH")
    const r = bare("compile", conv, "--target", "cuda", "--precision", "fp16", "--out", h)
    expect(r.status, r.stderr).toBe(0)
    const m = JSON.parse(fs.readFileSync(path.join(h, "manifest.json"), "utf8"))
    expect(m.files.precision).toBe("fp16")
    expect(m.inputs.every((i: { dtype: string }) => i.dtype === "float32")).toBe(true)
    expect(fs.readFileSync(path.join(h, "tessera_kernels.cu"), "utf8")).toMatch(/const __half\* __restrict__/)
    // every float32 weight 2 bytes an element
    const tensors = m.constants.tensors as { dtype: string; stored?: string; shape: number[]; bytes: number }[]
    for (const t of tensors.filter((t) => t.dtype === "float32")) expect(t).toMatchObject({ stored: "float16", bytes: 2 * t.shape.reduce((a, b) => a * b, 1) })
    const unknown = tessera("compile", conv, "--target", "cuda", "--precision", "fp8", "--out", h)
    expect(unknown.status).toBe(2)
    expect(unknown.stderr).toMatch(/^tessera compile: --precision: 'fp8' is not one Tessera knows \(fp32, fp16\)/)
    const notCuda = tessera("compile", conv, "--target", "c", "--precision", "fp16", "--out", h)
    expect(notCuda.status).toBe(2)
    expect(notCuda.stderr).toMatch(/^tessera compile: --precision: is for --target cuda, not c/)
  })
})

describe("tessera bench", () => {
  it("--format json: one object on the last line", () => {
    const j = lastJson(ok("bench", write("mlp.onnx", zooModel("mlp", 1)), "--target", "js", "--runs", "3", "--format", "json"))
    expect(Object.keys(j).slice(0, 7)).toEqual(["model", "target", "threads", "median_ms", "runs", "onnxruntime_ms", "ratio"])
    expect(j).toMatchObject({ target: "js", threads: 1, runs: 3 })
    expect(j.median_ms).toBeGreaterThan(0)
    if (j.onnxruntime_ms !== null) {
      expect(Math.abs(j.ratio / (j.median_ms / j.onnxruntime_ms) - 1)).toBeLessThan(0.02) // (times rounded to µs)
      expect(j.max_abs_diff).toBeLessThan(1e-4)
    }
  })
})

describe("tessera inspect --format svg", () => {
  it("renders the fused groups with Graphviz", () => {
    const svg = ok("inspect", write("conv.onnx", convModel()), "--fused", "--format", "svg")
    expect(svg.startsWith("<svg")).toBe(true)
    expect(svg.trimEnd().endsWith("</svg>")).toBe(true)
    expect(svg).toContain("Conv")
  })
})
