// ResNet-18's convolution layers C2–C12 (batch 1, the paper's shapes) on the VTA simulator with the
// default configuration: cycles, GEMM utilization and DRAM bytes per layer, with the same tiles
// serial (one virtual thread) and with two virtual threads. Deterministic: the simulator's cycle
// model, not this machine's clock. Run: npm run vta-report
import { defaultVtaConfig, deriveVta } from "../src/ast/vta/config.js"
import { runVtaSync } from "../src/device/vta/simulator.js"
import { defaultConv2dSchedule, lowerConv2d, withTensors, type VtaConv2d } from "../src/lowering/vta/conv2d.js"
import { networkReport } from "./vta-network.js"

const d = deriveVta(defaultVtaConfig)
const conv = (h: number, cin: number, cout: number, k: number, stride: number): VtaConv2d => ({ ci: cin / 16, co: cout / 16, h, w: h, kh: k, kw: k, stride, pad: k === 3 ? 1 : 0, shift: 8 })
const layers: [string, VtaConv2d][] = [
  ["C2", conv(56, 64, 64, 3, 1)],
  ["C3", conv(56, 64, 64, 1, 1)],
  ["C4", conv(56, 64, 128, 3, 2)],
  ["C5", conv(56, 64, 128, 1, 2)],
  ["C6", conv(28, 128, 128, 3, 1)],
  ["C7", conv(28, 128, 256, 3, 2)],
  ["C8", conv(28, 128, 256, 1, 2)],
  ["C9", conv(14, 256, 256, 3, 1)],
  ["C10", conv(14, 256, 512, 3, 2)],
  ["C11", conv(14, 256, 512, 1, 2)],
  ["C12", conv(7, 512, 512, 3, 1)],
]

const seeded = (n: number, seed: number): Int8Array => {
  let x = seed
  return Int8Array.from({ length: n }, () => {
    x = (x * 1103515245 + 12345) >>> 0
    return ((x >>> 16) % 17) - 8
  })
}

const rows: string[] = ["| layer | tiles (oh × co blocks) | cycles 1 vthread | util 1 | cycles 2 vthreads | util 2 | speedup | inp / wgt / out KiB (2 vt) |", "|---|---|---|---|---|---|---|---|"]
const utils: [number, number][] = []
for (const [name, x] of layers) {
  const sched = defaultConv2dSchedule(d, x, 2)
  const data = seeded(x.ci * x.h * x.w * 16, 1)
  const kernel = seeded(x.co * x.ci * x.kh * x.kw * 256, 2)
  const stats = ([1, 2] as const).map((vthreads) => {
    const p = lowerConv2d(d, x, { ...sched, vthreads })
    return runVtaSync(d, p.insns, withTensors(p, data, kernel)).stats
  })
  const [a, b] = stats
  utils.push([a.utilization, b.utilization])
  const kib = (n: number) => (n / 1024).toFixed(0)
  rows.push(`| ${name} | ${sched.tileOh} × ${sched.tileCo} | ${a.totalCycles} | ${(100 * a.utilization).toFixed(1)}% | ${b.totalCycles} | ${(100 * b.utilization).toFixed(1)}% | ${(a.totalCycles / b.totalCycles).toFixed(2)} | ${kib(b.bytes.inp)} / ${kib(b.bytes.wgt)} / ${kib(b.bytes.out)} |`)
}
const mean = (k: 0 | 1) => (100 * utils.reduce((s, u) => s + u[k], 0)) / utils.length
rows.push(`| mean | | | ${mean(0).toFixed(1)}% | | ${mean(1).toFixed(1)}% | | |`)
console.log(rows.join("\n"))

// The whole network on vta + c, the Amdahl picture (scripts/vta-network.ts)
console.log((await networkReport()).join("\n"))
