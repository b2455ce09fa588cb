// npm run op-bench — single operators the zoo networks are made of, Tessera's c target against
// onnxruntime-node in one process, runs alternating: a transformer's linear layers, a 1×1 conv with
// a SiLU epilogue, a softmax over attention scores, attention's two batched products, a 3×3 conv and a
// depthwise conv; a sum over a long axis and two matrix-vector products (the rfactor rule's cases).
// Medians, the ratio c / ort, GFLOP/s and the share of this CPU's measured peak.
// Speed is reported, never asserted. Tessera's runs write the outputs into arrays the script holds
// (the executor's `into`: a fresh 1.9 MB output a run cost the softmax 0.8 ms of page faults), and
// also, in the last column, into fresh arrays each run; onnxruntime's allocate their own.
//
// `--cpu` times both sides by the process's CPU time instead of the wall clock (1 thread: each
// side's own time; on a core shared with other jobs, wall time counts theirs too).
//
//   npm run op-bench -- [--threads 1] [--runs 21] [--only linear,softmax] [--cpu]
import { Effect } from "effect"
import { attr } from "../src/ast/graph/attrs.js"
import type { Graph } from "../src/ast/graph/graph.js"
import { allocate } from "../src/ast/graph/dtype.js"
import { sizeOf, type Tensor } from "../src/ast/graph/tensor.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { BACKENDS } from "../src/backend/index.js"
import { randomTensor } from "../src/cli/inputs.js"
import { hostCpu } from "../src/device/host.js"
import { alternateRuns, loadOrt, median, openOrtSession } from "../src/device/onnxruntime.js"
import { peakGflops } from "../src/device/peak.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { nodeFlops } from "../src/rewrite/report.js"
import { conv, NetBuilder } from "../src/zoo/builder.js"

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : d
}
const THREADS = Number(arg("threads", "1"))
process.env.OMP_NUM_THREADS = String(THREADS)
const RUNS = Number(arg("runs", "21"))
const ONLY = arg("only", "").split(",").filter((s) => s.length > 0)
const CPU = process.argv.includes("--cpu")

/** Milliseconds of this process's CPU time that f takes. */
const cpuMs = async (f: () => unknown): Promise<number> => {
  const u = process.cpuUsage()
  await f()
  const d = process.cpuUsage(u)
  return (d.user + d.system) / 1000
}
/** Both sides alternating, each run timed by CPU time (blocks of 5, as alternateRuns). */
const alternateCpu = async (ours: () => void, session: { time: () => Promise<number> }, runs: number) => {
  const mine: number[] = []
  const theirs: number[] = []
  ours()
  await session.time()
  while (mine.length < runs) {
    for (let i = 0; i < 5; i++) mine.push(await cpuMs(ours))
    for (let i = 0; i < 5; i++) theirs.push(await cpuMs(() => session.time()))
  }
  return { ours: mine, theirs }
}

/** A transformer's linear layer: x [1, rows, k] · W [k, n] + b, W and b seeded constants. */
const linear = (name: string, rows: number, k: number, n: number): Graph => {
  const b = new NetBuilder(0, 17)
  const x = b.input("x", { dtype: "float32", shape: [1, rows, k] })
  const w = b.normal("w", [k, n], 0.03)
  const y = b.op("Add", [b.op("MatMul", [x, w], "mm"), b.normal("bias", [n], 0.1)], "y")
  return b.build(name, [{ name: y, type: { dtype: "float32", shape: [1, rows, n] } }])
}

/** Each case's graph (opset 17), its weights seeded. */
const CASES: { readonly [name: string]: () => Graph } = {
  // ViT-B / BERT-base: x [1, 50, 768] · W [768, 3072] + b
  linear: () => linear("linear", 50, 768, 3072),
  // ViT-B/16's attention projections at 197 tokens: [1, 197, 768] · [768, 768] + b
  "linear-197x768": () => linear("linear-197x768", 197, 768, 768),
  // BERT-base's MLP at sequence 128: up [1, 128, 768] · [768, 3072] + b, down [1, 128, 3072] · [3072, 768] + b
  "linear-128x3072": () => linear("linear-128x3072", 128, 768, 3072),
  "linear-128x768-down": () => linear("linear-128x768-down", 128, 3072, 768),
  // EfficientNet's expansion: 1×1 conv 96 → 384 at 56×56, then SiLU as Sigmoid · Mul
  "conv1x1-silu": () => {
    const b = new NetBuilder(0, 17)
    const x = b.input("x", { dtype: "float32", shape: [1, 96, 56, 56] })
    const c = conv(b, x, "conv", { cin: 96, cout: 384, k: 1, bias: true })
    const y = b.op("Mul", [c, b.op("Sigmoid", [c], "sig")], "y")
    return b.build("conv1x1-silu", [{ name: y, type: { dtype: "float32", shape: [1, 384, 56, 56] } }])
  },
  // ViT-B's attention scores
  softmax: () => {
    const b = new NetBuilder(0, 17)
    const x = b.input("x", { dtype: "float32", shape: [1, 12, 197, 197] })
    const y = b.op("Softmax", [x], "y", { axis: attr.int(-1) })
    return b.build("softmax", [{ name: y, type: { dtype: "float32", shape: [1, 12, 197, 197] } }])
  },
  // attention's scores: Q [1, 12, 197, 64] · Kᵀ [1, 12, 64, 197] (197 columns: no vector divides them)
  "attention-scores": () => {
    const b = new NetBuilder(0, 17)
    const q = b.input("q", { dtype: "float32", shape: [1, 12, 197, 64] })
    const k = b.input("kt", { dtype: "float32", shape: [1, 12, 64, 197] })
    const y = b.op("MatMul", [q, k], "y")
    return b.build("attention-scores", [{ name: y, type: { dtype: "float32", shape: [1, 12, 197, 197] } }])
  },
  // attention's second product: probabilities [1, 12, 197, 197] · V [1, 12, 197, 64]
  "batch-matmul": () => {
    const b = new NetBuilder(0, 17)
    const p = b.input("p", { dtype: "float32", shape: [1, 12, 197, 197] })
    const v = b.input("v", { dtype: "float32", shape: [1, 12, 197, 64] })
    const y = b.op("MatMul", [p, v], "y")
    return b.build("batch-matmul", [{ name: y, type: { dtype: "float32", shape: [1, 12, 197, 64] } }])
  },
  // ResNet's 3×3 conv at stage 2: 128 → 128 at 28×28, bias, ReLU
  "conv3x3-relu": () => {
    const b = new NetBuilder(0, 17)
    const x = b.input("x", { dtype: "float32", shape: [1, 128, 28, 28] })
    const y = b.op("Relu", [conv(b, x, "conv", { cin: 128, cout: 128, k: 3, pad: 1, bias: true })], "y")
    return b.build("conv3x3-relu", [{ name: y, type: { dtype: "float32", shape: [1, 128, 28, 28] } }])
  },
  // ResNet-50's stride-2 3×3 convs at the start of stages 3 and 4 (layer3.0.conv2, layer4.0.conv2):
  // 256 → 256 at 28×28 → 14×14 and 512 → 512 at 14×14 → 7×7, bias, ReLU
  "conv3x3-s2-256": () => {
    const b = new NetBuilder(0, 17)
    const x = b.input("x", { dtype: "float32", shape: [1, 256, 28, 28] })
    const y = b.op("Relu", [conv(b, x, "conv", { cin: 256, cout: 256, k: 3, stride: 2, pad: 1, bias: true })], "y")
    return b.build("conv3x3-s2-256", [{ name: y, type: { dtype: "float32", shape: [1, 256, 14, 14] } }])
  },
  // ResNet-50's stride-2 3×3 conv into stage 2 (layer2.0.conv2): 128 → 128 at 56×56 → 28×28
  "conv3x3-s2-128": () => {
    const b = new NetBuilder(0, 17)
    const x = b.input("x", { dtype: "float32", shape: [1, 128, 56, 56] })
    const y = b.op("Relu", [conv(b, x, "conv", { cin: 128, cout: 128, k: 3, stride: 2, pad: 1, bias: true })], "y")
    return b.build("conv3x3-s2-128", [{ name: y, type: { dtype: "float32", shape: [1, 128, 28, 28] } }])
  },
  // ResNet-50's bottleneck 1×1 convs: the reduction of stage 4 (2048 → 512 at 7×7, ReLU) and the
  // expansions with the residual Add and ReLU (64 → 256 at 56×56, 128 → 512 at 28×28)
  "conv1x1-2048-512": () => {
    const b = new NetBuilder(0, 17)
    const x = b.input("x", { dtype: "float32", shape: [1, 2048, 7, 7] })
    const y = b.op("Relu", [conv(b, x, "conv", { cin: 2048, cout: 512, k: 1, bias: true })], "y")
    return b.build("conv1x1-2048-512", [{ name: y, type: { dtype: "float32", shape: [1, 512, 7, 7] } }])
  },
  ...Object.fromEntries(
    ([[64, 56], [128, 28]] as const).map(([cin, hw]) => [
      `conv1x1-add-${hw}`,
      () => {
        const b = new NetBuilder(0, 17)
        const x = b.input("x", { dtype: "float32", shape: [1, cin, hw, hw] })
        const r = b.input("r", { dtype: "float32", shape: [1, 4 * cin, hw, hw] })
        const y = b.op("Relu", [b.op("Add", [conv(b, x, "conv", { cin, cout: 4 * cin, k: 1, bias: true }), r], "sum")], "y")
        return b.build(`conv1x1-add-${hw}`, [{ name: y, type: { dtype: "float32", shape: [1, 4 * cin, hw, hw] } }])
      },
    ]),
  ),
  "conv3x3-s2-512": () => {
    const b = new NetBuilder(0, 17)
    const x = b.input("x", { dtype: "float32", shape: [1, 512, 14, 14] })
    const y = b.op("Relu", [conv(b, x, "conv", { cin: 512, cout: 512, k: 3, stride: 2, pad: 1, bias: true })], "y")
    return b.build("conv3x3-s2-512", [{ name: y, type: { dtype: "float32", shape: [1, 512, 7, 7] } }])
  },
  // a sum over a long axis to one value (a loss, a norm): one output, no spatial parallelism
  "sum-long": () => {
    const b = new NetBuilder(0, 17)
    const x = b.input("x", { dtype: "float32", shape: [1, 262144] })
    const y = b.op("ReduceSum", [x, b.int64s("axes", [1])], "y", { keepdims: attr.int(1) })
    return b.build("sum-long", [{ name: y, type: { dtype: "float32", shape: [1, 1] } }])
  },
  // a matrix-vector product with few outputs: [1, 16384] · [16384, 16]
  "gemv-narrow": () => {
    const b = new NetBuilder(0, 17)
    const x = b.input("x", { dtype: "float32", shape: [1, 16384] })
    const y = b.op("MatMul", [x, b.normal("w", [16384, 16], 0.03)], "y")
    return b.build("gemv-narrow", [{ name: y, type: { dtype: "float32", shape: [1, 16] } }])
  },
  // ResNet-50's classifier head: a batch-1 dense layer [1, 2048] · [2048, 1000] (enough outputs: rfactor does not fire)
  gemv: () => {
    const b = new NetBuilder(0, 17)
    const x = b.input("x", { dtype: "float32", shape: [1, 2048] })
    const y = b.op("MatMul", [x, b.normal("w", [2048, 1000], 0.03)], "y")
    return b.build("gemv", [{ name: y, type: { dtype: "float32", shape: [1, 1000] } }])
  },
  // MobileNetV2's depthwise: 3×3, 144 channels at 56×56, stride 1
  depthwise: () => {
    const b = new NetBuilder(0, 17)
    const x = b.input("x", { dtype: "float32", shape: [1, 144, 56, 56] })
    const y = conv(b, x, "dw", { cin: 144, cout: 144, k: 3, pad: 1, group: 144, bias: true })
    return b.build("depthwise", [{ name: y, type: { dtype: "float32", shape: [1, 144, 56, 56] } }])
  },
}

const run = <A, E>(eff: Effect.Effect<A, E>) => Effect.runPromise(eff as Effect.Effect<A, never>)

const cpu = hostCpu()
const peak = peakGflops(Math.max(1, cpu.vectorLanes))
const ort = await run(loadOrt())
if (typeof ort === "string") throw new Error(ort)
const target = BACKENDS.c.target(cpu, THREADS)
console.log(
  `CPU: ${cpu.isa}, ${cpu.vectorLanes} lanes, FMA ${cpu.fmaUnits} pipe(s) × latency ${cpu.fmaLatency}; peak fp32 one core (measured): ${peak ? `${peak.toFixed(0)} GFLOP/s` : "unknown"}; ${THREADS} thread(s), ${RUNS} runs, medians${CPU ? " of CPU time" : ""}`,
)
console.log("| op | tessera c ms | onnxruntime-node ms | c / ort | c GFLOP/s | % of peak | c ms, fresh outputs |")
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for (const [name, make] of Object.entries(CASES)) {
  if (ONLY.length && !ONLY.includes(name)) continue
  const graph = make()
  const feeds = new Map<string, Tensor>(graph.inputs.map((i, k) => [i.name, randomTensor(i.type.dtype, i.type.shape as number[], k + 1)] as const))
  const program = await run(compileGraph(graph, target, { optLevel: 3 }))
  const flops = program.graph.nodes.reduce((s, n) => s + nodeFlops(program.graph, n), 0)
  const exec = await run(loadProgram(program, target, { threads: THREADS }))
  const session = await run(openOrtSession(ort, encodeOnnx(graph), feeds, THREADS))
  if (typeof session === "string") throw new Error(session)
  const into = new Map(program.graph.outputs.map((o) => [o.name, allocate(o.type.dtype, sizeOf(o.type.shape as number[]))] as const))
  exec.run(feeds, into)
  const timed = CPU ? await alternateCpu(() => void exec.run(feeds, into), session, RUNS) : await alternateRuns(() => void exec.run(feeds, into), session, RUNS)
  const fresh = await alternateRuns(() => void exec.run(feeds), undefined, RUNS)
  await session.release()
  exec.module.close()
  const [ours, theirs] = [median(timed.ours), median(timed.theirs)]
  const gf = flops / ours / 1e6
  console.log(`| ${name} | ${ours.toFixed(3)} | ${theirs.toFixed(3)} | ${(ours / theirs).toFixed(2)} | ${gf.toFixed(1)} | ${peak ? ((100 * gf) / (peak * THREADS)).toFixed(0) : "-"} | ${median(fresh.ours).toFixed(3)} |`)
}
