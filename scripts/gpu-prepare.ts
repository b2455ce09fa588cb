// node dist/scripts/gpu-prepare.js [--out .gpu] [--models resnet18,mobilenetv2] [--cuda-arch sm_90] [--seed 0]
//
// The artifacts a GPU machine with the CUDA toolkit, python3 and no Node needs for
// scripts/gpu-check.sh, in one folder: per zoo model (seeded weights, batch 1, fp32) its cuda
// artifact (`tessera compile --target cuda`: sources, launcher, runner, Makefile, manifest.json,
// and constants.bin gzipped), a seeded input as .npy and onnxruntime-node's CPU outputs for that input as .npy,
// and models.json saying which is which. Deterministic: the same flags, the same bytes.
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { prng } from "../src/ast/graph/arbitrary.js"
import { fromNumbers } from "../src/ast/graph/dtype.js"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { artifactFiles } from "../src/cli/compile.js"
import { targetSettings } from "../src/cli/targets.js"
import { serializeNpy } from "../src/device/npy.js"
import { loadOrt, runOrt } from "../src/device/onnxruntime.js"
import { compileGraph, emitArtifact } from "../src/pipeline.js"
import { zooGraph, zooModel } from "../src/zoo/index.js"
import { bindSync } from "../src/ast/graph/infer.js"
import { nodeFlops } from "../src/rewrite/report.js"

const args = process.argv.slice(2)
const flag = (name: string, fallback: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback)
const out = flag("--out", ".gpu")
const models = flag("--models", "resnet18,mobilenetv2").split(",")
const arch = flag("--cuda-arch", "sm_90")
const seed = Number(flag("--seed", "0"))
const safe = (name: string) => name.replace(/[^A-Za-z0-9_.-]/g, "_")

const main = Effect.gen(function* () {
  const ort = yield* loadOrt()
  if (typeof ort === "string") return yield* Effect.die(new Error(ort))
  fs.rmSync(out, { recursive: true, force: true })
  const entries = []
  for (const name of models) {
    const dir = path.join(out, name)
    const graph = zooGraph(name)
    const settings = targetSettings("cuda", 1, { cudaArch: arch })
    const program = yield* compileGraph(graph, settings.target)
    const artifact = yield* emitArtifact(program, settings.target)
    const files = artifactFiles(`${name}.onnx`, settings, 3, program, artifact)
    fs.mkdirSync(path.join(dir, "inputs"), { recursive: true })
    fs.mkdirSync(path.join(dir, "reference"), { recursive: true })
    // the weights gzipped (7% smaller: what travels to the GPU machine is limited); gpu-check unpacks them
    for (const [file, bytes] of files)
      if (file === "constants.bin") fs.writeFileSync(path.join(dir, "constants.bin.gz"), zlib.gzipSync(bytes, { level: 6 }))
      else fs.writeFileSync(path.join(dir, file), bytes)
    // a seeded input in [-1, 1) per graph input
    const rng = prng(seed)
    const feeds = new Map<string, Tensor>()
    const inputs = graph.inputs.map((i) => {
      const shape = i.type.shape as number[]
      const n = shape.reduce((a, b) => a * b, 1)
      const t: Tensor = { dtype: i.type.dtype, shape, data: fromNumbers(i.type.dtype, Array.from({ length: n }, () => rng.float(-1, 1))) }
      feeds.set(i.name, t)
      const file = `inputs/${safe(i.name)}.npy`
      fs.writeFileSync(path.join(dir, file), serializeNpy(t))
      return { name: i.name, file, shape, dtype: i.type.dtype }
    })
    const ref = yield* runOrt(ort, zooModel(name), feeds, { threads: 0, runs: 0 })
    if (typeof ref === "string") return yield* Effect.die(new Error(ref))
    const outputs = graph.outputs.map((o) => {
      const r = ref.outputs.get(o.name)!
      const file = `reference/${safe(o.name)}.npy`
      fs.writeFileSync(path.join(dir, file), serializeNpy({ dtype: "float32", shape: r.shape, data: Float32Array.from(r.data) }))
      return { name: o.name, file: `${safe(o.name)}.npy`, reference: file, shape: r.shape }
    })
    const kernels = program.kernels.length
    // the model's floating-point operations (a multiply-add is two), for the fraction of peak
    const bound = bindSync(graph, new Map())
    const flops = bound.nodes.reduce((s, n) => s + nodeFlops(bound, n), 0)
    entries.push({ model: name, dir: name, torchvision: name === "mobilenetv2" ? "mobilenet_v2" : name, arch, inputs, outputs, kernels, flops })
    console.log(`${name}: ${kernels} kernels, ${[...files.values()].reduce((s, b) => s + b.length, 0)} bytes of artifact in ${dir}`)
  }
  fs.writeFileSync(path.join(out, "models.json"), `${JSON.stringify({ seed, arch, models: entries }, null, 2)}\n`)
  const bytes = (p: string): number => (fs.statSync(p).isDirectory() ? fs.readdirSync(p).reduce((s, f) => s + bytes(path.join(p, f)), 0) : fs.statSync(p).size)
  console.log(`${out}: ${(bytes(out) / 2 ** 20).toFixed(1)} MiB in all`)
})

Effect.runPromise(main).catch((e: unknown) => {
  console.error(`gpu-prepare: ${e instanceof Error ? e.message : String(e)}`)
  process.exit(1)
})
