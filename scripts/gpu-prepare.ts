// node dist/scripts/gpu-prepare.js [--out .gpu] [--models resnet18,mobilenetv2] [--cuda-arch sm_90] [--seed 0]
//                                   [--variants K | K1,K2…] [--tuning-log LOG] [--ablation] [--fp16]
//                                   [--references DIR]
//
// The artifacts a GPU machine with the CUDA toolkit, python3 and no Node needs for
// scripts/gpu-check.sh, in one folder: per zoo model (seeded weights, batch 1, fp32) its cuda
// artifact (`tessera compile --target cuda`: sources, launcher, runner, Makefile, manifest.json,
// and constants.bin gzipped), a seeded input as .npy and onnxruntime-node's CPU outputs for that input as .npy,
// and models.json saying which is which. Deterministic: the same flags, the same bytes.
//
// --variants K (one K for every model, or one per model in --models order): besides each model's
// default artifact, K variants <model>-v<j>/ of its sources only (gzipped; they share the model's
// constants.bin through the runner's --weights), each compiled with every task (workload) at one
// config of its `cuda` space: v0 AutoTVM's template at its defaults on every conv2d task (the
// rest at their defaults), v1 and v2 (K ≥ 3) the defaults and AutoTVM's template with every
// tiled kernel's `launch_bounds` knob at 1 (bounded, autotvm-bounded: the bound ptxas otherwise
// gets only where a block needs it), v3… seeded random valid configs (a config the static GPU
// verifier rejects is drawn again). <model>-variants.json maps each variant's kernels to their task and
// config; scripts/gpu-check.sh DIR --variants measures them into DIR/sweep.json, and
// gpu-tune-apply turns that into a tuning log. --tuning-log LOG: each model's artifact compiled
// with the log's fastest record per workload, and the default as its one variant (measured side
// by side by --variants). --ablation: three more variants per model, the defaults emitted without
// warp shuffles (no-shuffle: every cross-thread task's `_shuffle` knob 0), without float4 accesses
// (no-float4: the record's maxVectorBytes 4) and without both (previous: the emitter before them),
// so gpu-check --variants measures each against the default in one call. --fp16: each model also
// compiled with --precision fp16 into <model>-fp16/ (scripts/gpu-fp16.sh measures it).
// --references DIR: onnxruntime's outputs read from DIR/<model>/reference/ (a folder an earlier run
// wrote, e.g. copied out of .gpu) instead of computed, so the script runs where onnxruntime-node is
// not installed: on the GPU machine itself, with the Node bundle of scripts/gpu-node-bundle.mjs —
// the artifacts are written there rather than carried (ResNet-18's weights alone are 43 MiB of the
// 64 a call may carry). The same flags give the same bytes either way.
import { Effect, Result } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { prng } from "../src/ast/graph/arbitrary.js"
import { keyOf, type Target } from "../src/ast/target.js"
import type { TunedLookup } from "../src/backend/index.js"
import { artifactFiles } from "../src/cli/compile.js"
import { targetSettings, type TargetSettings } from "../src/cli/targets.js"
import { parseNpy, serializeNpy } from "../src/device/npy.js"
import { loadOrt, runOrt } from "../src/device/onnxruntime.js"
import { baseSchedule } from "../src/lowering/lower-group.js"
import { lowerSync } from "../src/lowering/lower.js"
import { autotvmConfig, gpuLimits, LAUNCH_BOUNDS_KNOB, verifyGpuFunc } from "../src/lowering/templates/gpu/index.js"
import type { Config, Knob } from "../src/lowering/templates/template.js"
import { compileGraph, emitArtifact } from "../src/pipeline.js"
import type { SweepTask, SweepVariant, VariantsFile } from "../src/search/gpu-sweep.js"
import { bestRecords, parseLog, type TuningRecord } from "../src/search/records.js"
import { fnv1a, sampleConfig, spaceSize, workloadOf } from "../src/search/task.js"
import { zooGraph, zooModel } from "../src/zoo/index.js"
import { bindSync } from "../src/ast/graph/infer.js"
import { safeFileName as safe, writeSeededInputs } from "./seeded-inputs.js"
import { nodeFlops } from "../src/rewrite/report.js"
import type { Graph } from "../src/ast/graph/graph.js"
import type { Stmt } from "../src/ast/tir/tir.js"

const args = process.argv.slice(2)
const flag = (name: string, fallback: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback)
const out = flag("--out", ".gpu")
const models = flag("--models", "resnet18,mobilenetv2").split(",")
const arch = flag("--cuda-arch", "sm_90")
const seed = Number(flag("--seed", "0"))
const variantCounts = flag("--variants", "0").split(",").map(Number)
const tuningLog = args.includes("--tuning-log") ? flag("--tuning-log", "") : undefined
const ablation = args.includes("--ablation")
/** --fp16: beside each model's artifact, the same compiled with `--precision fp16` in <model>-fp16/ (its own halved weights; the model's inputs and references copied), for scripts/gpu-fp16.sh. */
const fp16 = args.includes("--fp16")
/** --references DIR: each model's onnxruntime outputs from DIR/<model>/reference/<output>.npy, not computed. */
const references = args.includes("--references") ? flag("--references", "") : undefined

/** The defaults with every cross-thread reduction's partials summed serially (`_shuffle` 0). */
const noShuffle: Choose = (knobs, defaults) => ({ ...defaults, ...Object.fromEntries(knobs.filter((k) => k.name.endsWith("_shuffle")).map((k) => [k.name, 0])) })
/** The settings with no vector access wider than one fp32 (the emitter's float4 / float2 copies off). */
const scalarAccess = (s: TargetSettings): TargetSettings => {
  const t = s.target as Target<"cuda">
  return { ...s, target: { ...t, attrs: { ...t.attrs, maxVectorBytes: 4 } } as Target<"cuda"> as TargetSettings["target"] }
}

/** How a variant chooses each task's config: from its knobs, its defaults and a check that a config passes the static GPU verifier. */
type Choose = (knobs: readonly Knob[], defaults: Config, valid: (c: Config) => boolean, rng: () => number) => Config | undefined

interface Compiled {
  readonly files: Map<string, Uint8Array>
  readonly program: { readonly kernels: readonly { readonly kind: string; readonly name: string; readonly group: number }[] }
  readonly tasks: Map<string, SweepTask>
  readonly configs: Map<string, Config>
  readonly kernels: Record<string, { readonly group: number; readonly task: string }>
  readonly tuning?: unknown
}

/**
 * A model compiled for cuda with each task's config from `choose` (the same config for every
 * group of a task; its random draws seeded by the variant's seed and the task's id), the tasks and
 * configs it used, and its kernels' tasks.
 */
const compileWith = (name: string, graph: Graph, settings: TargetSettings, choose: Choose | undefined, variantSeed: number, tuned?: ReadonlyMap<string, TuningRecord>, redraws: ReadonlyMap<string, number> = new Map()) =>
  Effect.gen(function* () {
    const target = settings.target as Target<"cuda">
    const l = gpuLimits(target.attrs)
    const tasks = new Map<string, { workload: string; label: string; groups: number[] }>()
    const configs = new Map<string, Config>()
    const groupTask = new Map<number, string>()
    const tunedKeys = tuned ? new Map([...tuned].map(([w, r]) => [w, r.config])) : undefined
    const lookup: TunedLookup = (group, template, knobs, outputs) => {
      const workload = workloadOf(outputs, template, keyOf(target))
      const id = fnv1a(workload)
      groupTask.set(group.id, id)
      const task = tasks.get(id)
      if (task) task.groups.push(group.id)
      else tasks.set(id, { workload, label: `${group.ops.join("+")} ${outputs[outputs.length - 1].shape.join("x")}`, groups: [group.id] })
      const known = configs.get(id)
      if (known) return known
      const base = baseSchedule(outputs)
      const defaults = template.defaults(knobs, { vectorLanes: 1, cores: 1 })
      const valid = (c: Config) => {
        try {
          const f = lowerSync(template.apply(outputs, base, c))
          return verifyGpuFunc(f, l).problems.length === 0 && withinBlockDims(f.body, target.attrs.maxBlockDim, target.attrs.maxGridDim)
        } catch {
          return false
        }
      }
      const redraw = redraws.get(id) ?? 0
      const rng = prng((variantSeed * 2654435761 + parseInt(id, 16) + redraw * 40503) >>> 0)
      const config = tunedKeys?.get(workload) ?? (redraw < 0 ? undefined : choose?.(knobs, defaults, valid, () => rng.next())) ?? defaults
      configs.set(id, config)
      return config
    }
    const program = yield* compileGraph(graph, settings.target, { lookup })
    const artifact = yield* emitArtifact(program, settings.target)
    const files = artifactFiles(`${name}.onnx`, settings, 3, program, artifact)
    const byName = new Map(program.graph.nodes.map((n) => [n.name, n] as const))
    const flopsOf = (g: number) => program.fused.groups.find((x) => x.id === g)!.nodes.reduce((s, n) => s + nodeFlops(program.graph, byName.get(n)!), 0)
    const kernels: Record<string, { group: number; task: string }> = {}
    for (const k of program.kernels) if (k.kind === "compiled" && groupTask.has(k.group)) kernels[k.name] = { group: k.group, task: groupTask.get(k.group)! }
    const sweepTasks = new Map([...tasks].map(([id, t]) => [id, { ...t, flops: t.groups.reduce((s, g) => s + flopsOf(g), 0) } satisfies SweepTask]))
    return { files, program, tasks: sweepTasks, configs, kernels } satisfies Compiled
  })

/**
 * Whether every threadIdx (blockIdx) loop is within the record's block (grid) dimension on its
 * axis (the emitter's verifier checks this; the templates' verifier checks the threads' product only).
 */
const withinBlockDims = (s: Stmt, max: readonly [number, number, number], grid: readonly [number, number, number]): boolean => {
  switch (s.kind) {
    case "for": {
      const axis = s.thread?.startsWith("threadIdx.") ? "xyz".indexOf(s.thread.slice(10)) : -1
      const gridAxis = s.thread?.startsWith("blockIdx.") ? "xyz".indexOf(s.thread.slice(9)) : -1
      if (axis >= 0 && s.extent.kind === "const" && s.extent.value > max[axis]) return false
      if (gridAxis >= 0 && s.extent.kind === "const" && s.extent.value > grid[gridAxis]) return false
      return withinBlockDims(s.body, max, grid)
    }
    case "seq":
      return s.body.every((b) => withinBlockDims(b, max, grid))
    case "allocate":
    case "let":
      return withinBlockDims(s.body, max, grid)
    case "if":
      return withinBlockDims(s.then, max, grid) && (!s.else || withinBlockDims(s.else, max, grid))
    default:
      return true
  }
}

/** Per task, the bytes of CUDA source of its kernels' functions in the kernels file. */
const taskSourceBytes = (c: Compiled): Map<string, number> => {
  const text = new TextDecoder().decode(c.files.get("tessera_kernels.cu"))
  // each __global__ function to the next is its source; a function's kernel is its name's k<N> (k3, k3_1)
  const starts = [...text.matchAll(/extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(k\d+)\w*\(/g)].map((m) => ({ kernel: m[1], at: m.index }))
  const out = new Map<string, number>()
  starts.forEach((x, k) => {
    const task = c.kernels[x.kernel]?.task
    if (task) out.set(task, (out.get(task) ?? 0) + (starts[k + 1]?.at ?? text.length) - x.at)
  })
  return out
}

/**
 * A task's source may grow to this much of its default's (3×, and 16 KB): the space's explicit
 * unrolls reach megabytes of CUDA per kernel that nvcc takes minutes over, more than the device
 * check's time allows; such a task's config is drawn again (twice), then left at its default.
 */
const sourceBound = (defaultBytes: number) => 3 * defaultBytes + 16384

/** A seeded random config of a task's space that the static GPU verifier accepts (the defaults after 50 rejected draws). */
const randomConfig: Choose = (knobs, defaults, valid, rng) => {
  for (let k = 0; k < 50; k++) {
    const c = sampleConfig(knobs, spaceSize(knobs), { next: rng })
    if (valid(c)) return c
  }
  return defaults
}

/** AutoTVM's template at its defaults on a conv2d task, the defaults elsewhere. */
const autotvmChoice: Choose = (knobs, defaults) => autotvmConfig(knobs, defaults) ?? defaults

/** `choose`'s config with every tiled kernel's `launch_bounds` at 1 (a task without the knob as it was). */
const bounded =
  (choose: Choose): Choose =>
  (knobs, defaults, valid, rng) => {
    const c = choose(knobs, defaults, valid, rng) ?? defaults
    return knobs.some((k) => k.name === LAUNCH_BOUNDS_KNOB.name) ? { ...c, [LAUNCH_BOUNDS_KNOB.name]: 1 } : c
  }
const firstVariants = [
  { kind: "autotvm" as const, choose: autotvmChoice },
  { kind: "bounded" as const, choose: bounded((_, defaults) => defaults) },
  { kind: "autotvm-bounded" as const, choose: bounded(autotvmChoice) },
]

const variantOf = (c: Compiled, name: string, dir: string, kind: SweepVariant["kind"]): SweepVariant => ({
  name,
  dir,
  kind,
  configs: Object.fromEntries([...c.configs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
  kernels: c.kernels,
})

const main = Effect.gen(function* () {
  const ort = references === undefined ? yield* loadOrt() : undefined
  if (typeof ort === "string") return yield* Effect.die(new Error(ort))
  // (read before the folder is emptied: the log may lie in it)
  const tuned = tuningLog === undefined ? undefined : bestRecords(parseLog(fs.readFileSync(tuningLog, "utf8")).records, "cuda")
  fs.rmSync(out, { recursive: true, force: true })
  const entries = []
  for (const name of models) {
    const dir = path.join(out, name)
    const graph = zooGraph(name)
    const settings = targetSettings("cuda", 1, { cudaArch: arch })
    const main = yield* compileWith(name, graph, settings, undefined, seed, tuned)
    const { program, files } = main
    if (tuned) {
      const applied = [...main.configs.keys()].filter((id) => tuned.has(main.tasks.get(id)!.workload)).length
      console.log(`${name}: ${tuningLog}: ${applied} of ${main.tasks.size} tasks tuned (the rest at their defaults)`)
    }
    fs.mkdirSync(path.join(dir, "inputs"), { recursive: true })
    fs.mkdirSync(path.join(dir, "reference"), { recursive: true })
    // the weights gzipped (7% smaller: what travels to the GPU machine is limited); gpu-check unpacks them
    for (const [file, bytes] of files)
      if (file === "constants.bin") fs.writeFileSync(path.join(dir, "constants.bin.gz"), zlib.gzipSync(bytes, { level: 6 }))
      else fs.writeFileSync(path.join(dir, file), bytes)
    const { feeds, inputs } = writeSeededInputs(graph, seed, dir, "inputs/")
    const ref = ort === undefined ? undefined : yield* runOrt(ort, zooModel(name), feeds, { threads: 0, runs: 0 })
    if (typeof ref === "string") return yield* Effect.die(new Error(ref))
    const outputs = graph.outputs.map((o) => {
      const file = `reference/${safe(o.name)}.npy`
      const r = ref !== undefined ? ref.outputs.get(o.name)! : parseNpy(fs.readFileSync(path.join(references!, name, file)), `${references}/${name}/${file}`)
      fs.writeFileSync(path.join(dir, file), serializeNpy({ dtype: "float32", shape: r.shape, data: Float32Array.from(r.data as ArrayLike<number>) }))
      return { name: o.name, file: `${safe(o.name)}.npy`, reference: file, shape: r.shape }
    })
    const kernels = program.kernels.length
    if (fp16) {
      const h = yield* compileWith(name, graph, targetSettings("cuda", 1, { cudaArch: arch, precision: "fp16" }), undefined, seed, tuned)
      const hdir = path.join(out, `${name}-fp16`)
      fs.mkdirSync(hdir, { recursive: true })
      for (const [file, bytes] of h.files)
        if (file === "constants.bin") fs.writeFileSync(path.join(hdir, "constants.bin.gz"), zlib.gzipSync(bytes, { level: 6 }))
        else fs.writeFileSync(path.join(hdir, file), bytes)
      for (const sub of ["inputs", "reference"]) fs.cpSync(path.join(dir, sub), path.join(hdir, sub), { recursive: true })
      console.log(`${name}: fp16 artifact (${(h.files.get("constants.bin")!.length / 2 ** 20).toFixed(1)} MiB of weights against ${(files.get("constants.bin")!.length / 2 ** 20).toFixed(1)}) in ${hdir}`)
    }
    // the model's floating-point operations (a multiply-add is two), for the fraction of peak
    const bound = bindSync(graph, new Map())
    const flops = bound.nodes.reduce((s, n) => s + nodeFlops(bound, n), 0)
    console.log(`${name}: ${kernels} kernels, ${[...files.values()].reduce((s, b) => s + b.length, 0)} bytes of artifact in ${dir}`)
    // the variants: sources only, gzipped, each checked to share the model's weights
    const count = variantCounts[models.indexOf(name)] ?? variantCounts[0] ?? 0
    const plan: { kind: SweepVariant["kind"]; choose: Choose | undefined; settings?: TargetSettings }[] = [
      ...(tuned
        ? [{ kind: "default" as const, choose: undefined }]
        : Array.from({ length: count }, (_, j) => firstVariants[j] ?? { kind: "random" as const, choose: randomConfig })),
      ...(ablation
        ? [
            { kind: "no-shuffle" as const, choose: noShuffle },
            { kind: "no-float4" as const, choose: undefined, settings: scalarAccess(settings) },
            { kind: "previous" as const, choose: noShuffle, settings: scalarAccess(settings) },
          ]
        : []),
    ]
    const variants: SweepVariant[] = [variantOf(main, tuned ? "tuned" : "default", name, tuned ? "tuned" : "default")]
    for (const [j, v] of plan.entries()) {
      const vdir = `${name}-v${j}`
      // a random variant the emitter's verifier rejects is drawn again (another seed), three times at most
      let compiled = yield* Effect.result(compileWith(name, graph, v.settings ?? settings, v.choose, seed * 1000 + j))
      for (let retry = 1; retry < 3 && v.kind === "random" && Result.isFailure(compiled); retry++) {
        console.log(`${name}: variant v${j} rejected (${String((compiled.failure as { message?: string }).message ?? compiled.failure)}), drawn again`)
        compiled = yield* Effect.result(compileWith(name, graph, v.settings ?? settings, v.choose, seed * 1000 + j + 100000 * retry))
      }
      if (Result.isFailure(compiled)) {
        console.log(`${name}: variant v${j} (${v.kind}) did not compile, left out: ${String((compiled.failure as { message?: string }).message ?? compiled.failure)}`)
        continue
      }
      let c = compiled.success
      // tasks whose source outgrows the bound are drawn again, then left at their defaults
      const mainBytes = taskSourceBytes(main)
      const redraws = new Map<string, number>()
      for (let round = 0; round < 3; round++) {
        const big = [...taskSourceBytes(c)].filter(([id, b]) => b > sourceBound(mainBytes.get(id) ?? 0)).map(([id]) => id)
        if (!big.length) break
        for (const id of big) redraws.set(id, round === 2 ? -1 : (redraws.get(id) ?? 0) + 1)
        const again = yield* Effect.result(compileWith(name, graph, v.settings ?? settings, v.choose, seed * 1000 + j, undefined, redraws))
        if (Result.isFailure(again)) break
        c = again.success
      }
      if (redraws.size) console.log(`${name}: v${j}: ${redraws.size} tasks drawn again for their source's size (${[...redraws.values()].filter((x) => x < 0).length} left at their defaults)`)
      const weights = c.files.get("constants.bin")!
      if (Buffer.compare(Buffer.from(weights), Buffer.from(files.get("constants.bin")!)) !== 0) return yield* Effect.die(new Error(`${name} v${j}: its constants differ from the default artifact's (it cannot share them)`))
      fs.mkdirSync(path.join(out, vdir), { recursive: true })
      for (const [file, bytes] of c.files) if (file !== "constants.bin" && file !== "manifest.json") fs.writeFileSync(path.join(out, vdir, `${file}.gz`), zlib.gzipSync(bytes, { level: 9 }))
      variants.push(variantOf(c, v.kind === "random" ? `r${j}` : v.kind, vdir, v.kind))
    }
    const variantsFile = `${name}-variants.json`
    if (variants.length > 1) {
      const vf: VariantsFile = { model: name, target: "cuda", seed, tasks: Object.fromEntries(main.tasks), variants }
      fs.writeFileSync(path.join(out, variantsFile), `${JSON.stringify(vf)}\n`)
      console.log(`${name}: ${variants.length - 1} variants (${plan.map((p) => p.kind).join(", ")}) over ${main.tasks.size} tasks in ${variantsFile}`)
    }
    entries.push({
      model: name,
      dir: name,
      torchvision: name === "mobilenetv2" ? "mobilenet_v2" : name,
      arch,
      inputs,
      outputs,
      kernels,
      flops,
      ...(variants.length > 1 ? { variants: variants.map((v) => ({ name: v.name, dir: v.dir, kind: v.kind })), variants_file: variantsFile } : {}),
      ...(tuningLog !== undefined ? { tuning_log: path.basename(tuningLog) } : {}),
      ...(fp16 ? { fp16: `${name}-fp16` } : {}),
    })
  }
  fs.writeFileSync(path.join(out, "models.json"), `${JSON.stringify({ seed, arch, models: entries }, null, 2)}\n`)
  const bytes = (p: string): number => (fs.statSync(p).isDirectory() ? fs.readdirSync(p).reduce((s, f) => s + bytes(path.join(p, f)), 0) : fs.statSync(p).size)
  console.log(`${out}: ${(bytes(out) / 2 ** 20).toFixed(1)} MiB in all`)
})

Effect.runPromise(main).catch((e: unknown) => {
  console.error(`gpu-prepare: ${e instanceof Error ? e.message : String(e)}`)
  process.exit(1)
})
