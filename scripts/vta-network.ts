// The whole-network section of `npm run vta-report` (issue 21's graph side): a quantized ResNet-18
// (default /work/tune/int8/resnet18.int8.onnx, Tessera's quantized zoo ResNet-18; `--model FILE`
// for another) re-quantized for VTA, partitioned, and run end to end — VTA layers on the simulator,
// the rest compiled for c — and checked bit for bit against the c target running the same integer
// graph. Printed: every offloaded layer with its cycles and utilization with one and two virtual
// threads and as run (1 to 4, the fewest cycles), the CPU/VTA copies, and the Amdahl picture: the VTA's cycles at the configuration's
// clock plus the CPU's measured time for the rest (median of runs on this machine), each side's
// share, beside the whole graph on the CPU alone.
import * as fs from "node:fs"
import { Effect } from "effect"
import type { Tensor } from "../src/ast/graph/tensor.js"
import { randomTensor } from "../src/cli/inputs.js"
import { amdahl, layerReports, loadVta, planVta } from "../src/cli/vta.js"
import { readModelSync } from "../src/device/files.js"
import { hostCpu } from "../src/device/host.js"
import { BACKENDS } from "../src/backend/index.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import type { VtaLayer } from "../src/rewrite/vta-partition.js"

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/**
 * The clip bounds the weights imply: per offloaded conv and output channel, the interval bound of
 * its accumulator (Σ max(w·lo, w·hi) + bias, the input in its producer's clip range — [lo, 127]
 * after a VTA layer, the int8 range after the CPU) shifted as the epilogue shifts. Where every
 * channel of a layer shifts to ≤ 127 (≥ its clipLo), its MIN (MAX) pass would be redundant.
 */
const impliedClips = (layers: readonly VtaLayer[]) => {
  const rangeOf = new Map<string, readonly [number, number]>()
  let convs = 0, channels = 0, minImplied = 0, maxImplied = 0, widest = 0
  for (const l of layers) {
    if (l.kind === "conv") {
      const [lo, hi] = rangeOf.get(l.input) ?? [-128, 127]
      const K = l.c * l.kh * l.kw
      const w = l.weights.data as ArrayLike<number>
      for (let m = 0; m < l.m; m++) {
        let up = l.bias?.[m] ?? 0
        let down = up
        for (let k = 0; k < K; k++) {
          up += Math.max(w[m * K + k] * lo, w[m * K + k] * hi)
          down += Math.min(w[m * K + k] * lo, w[m * K + k] * hi)
        }
        const u = Math.floor(up / 2 ** l.shift)
        const dn = Math.floor(down / 2 ** l.shift)
        if (u <= 127) minImplied++
        if (dn >= l.clipLo) maxImplied++
        widest = Math.max(widest, u, -dn)
      }
      convs++
      channels += l.m
    }
    rangeOf.set(l.output, [l.clipLo, 127])
  }
  return { convs, channels, minImplied, maxImplied, widest }
}

export const networkReport = async (argv: readonly string[] = process.argv.slice(2)): Promise<string[]> => {
  const k = argv.indexOf("--model")
  const file = k >= 0 ? argv[k + 1] : "/work/tune/int8/resnet18.int8.onnx"
  if (!fs.existsSync(file)) return [`(whole network: no model at ${file}; make one with 'tessera zoo resnet18 --out r.onnx' and 'tessera quantize r.onnx --out r.int8.onnx', then --model r.int8.onnx)`]
  const graph = readModelSync(file)
  const input = graph.inputs[0]
  const shape = input.type.shape.map((d) => (typeof d === "number" ? d : 1))
  const plan = planVta(graph, new Map([[input.name, shape]]))
  const feeds = new Map<string, Tensor>([[input.name, randomTensor(input.type.dtype, shape, 0, 0)]])
  const model = await Effect.runPromise(loadVta(plan))
  const runs = [0, 1, 2, 3, 4].map(() => model.run(feeds))
  const e = runs[0]
  const target = BACKENDS.c.target(hostCpu(), 1)
  const whole = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(plan.graph, target, {})), target))
  const want = whole.run(feeds)
  const cpuOnly: number[] = []
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now()
    whole.run(feeds)
    cpuOnly.push(performance.now() - t0)
  }
  const outs = plan.graph.outputs.map((o) => o.name)
  const same = outs.every((o) => {
    const a = e.outputs.get(o)!.data
    const b = want.get(o)!.data
    return a.length === b.length && Array.from(a as ArrayLike<number>).every((x, i) => Object.is(x, (b as ArrayLike<number>)[i]))
  })
  const a = amdahl(plan.d, { layers: e.layers, cpuMs: [median(runs.map((r) => r.cpuMs.reduce((s, x) => s + x, 0)))] })
  const reports = layerReports(plan)
  const serialCycles = reports.reduce((s, r) => s + r.serial.stats.totalCycles, 0)
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`
  const lines = [
    "",
    `## Whole network: ${file} on vta + c`,
    "",
    `Re-quantized for VTA (rewrite.VtaRequantize): ${plan.requantize.converted.length} nodes, one activation scale ${plan.requantize.activationScale}. Segments: ${plan.partition.segments.map((s) => (s.device === "c" ? `c (${s.graph.nodes.length} nodes)` : `vta (${s.layers.length} layers)`)).join(" → ")}.`,
    `Outputs equal to the c target running the same integer graph, bit for bit: ${same ? "yes" : "NO"} (${outs.join(", ")}).`,
    "",
    "| # | offloaded layer | kind | shape | cycles 1 vthread | util 1 | cycles 2 vthreads | util 2 | run with (vthreads) | cycles as run | util as run |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
    ...reports.map((r, i) => `| ${i} | ${r.name} | ${r.kind} | ${r.shape} | ${r.serial.stats.totalCycles} | ${pct(r.serial.stats.utilization)} | ${r.latencyHiding?.stats.totalCycles ?? "-"} | ${r.latencyHiding ? pct(r.latencyHiding.stats.utilization) : "-"} | ${plan.programs.get(r.name)!.vthreads} | ${r.best.stats.totalCycles} | ${pct(r.best.stats.utilization)} |`),
    "",
    ((c) => `Clip bounds the weights imply (each channel's accumulator bounded over its input's clip range, then shifted): MIN 127 on ${c.minImplied}, MAX clipLo on ${c.maxImplied} of the ${c.channels} channels of ${c.convs} convs (shifted bounds up to ±${c.widest}) — ${c.minImplied + c.maxImplied === 0 ? "no ALU pass of the epilogue is redundant" : "some ALU passes are redundant"}.`)(impliedClips(plan.partition.segments.flatMap((g) => (g.device === "vta" ? g.layers : [])))),
    "",
    `Copies: ${e.copies.map((c) => `${c.direction} ${c.value} (${c.bytes} B)`).join("; ")}.`,
    "",
    "| side | time | share |",
    "|---|---|---|",
    `| VTA (${plan.partition.offloaded.length} layers) | ${a.vtaCycles} cycles = ${a.vtaMs.toFixed(2)} ms at ${a.clockMhz} MHz (all with one virtual thread: ${serialCycles} cycles = ${((serialCycles / (a.clockMhz * 1e6)) * 1e3).toFixed(2)} ms) | ${pct(a.vtaShare)} |`,
    `| CPU, c target, 1 thread (${e.cpuMs.length} segments; median of 5 runs, this machine) | ${a.cpuMs.toFixed(2)} ms | ${pct(a.cpuShare)} |`,
    `| total | ${(a.vtaMs + a.cpuMs).toFixed(2)} ms | |`,
    `| the whole integer graph on the CPU alone (c, 1 thread, median of 5) | ${median(cpuOnly).toFixed(2)} ms | |`,
  ]
  return lines
}
