// ResNet-18's C2–C12 through VTA's TIR pass pipeline (src/lowering/vta/tir/) beside the direct
// generator (lowerConv2dGenerator), at the same knobs (defaultConv2dSchedule for 1–4 virtual threads):
// simulated cycles and utilization of each (timing-only runs, the cycle model of record), and, with
// --check, a full functional run of the pipeline's program compared bit for bit with the layer's
// integer reference (the TE's formula in plain loops) and with the generator's output.
//   npm run vta-tir-report [-- --check]   (about 10 s; --check adds the full runs, minutes)
import { defaultVtaConfig, deriveVta } from "../src/ast/vta/config.js"
import { VTA_CYCLE_MODEL } from "../src/device/vta/cycle-model.js"
import { runVtaSync } from "../src/device/vta/simulator.js"
import { defaultConv2dSchedule, lowerConv2dGenerator, outSize, readOut, withTensors, type VtaConv2d } from "../src/lowering/vta/conv2d.js"
import { lowerConv2dTir } from "../src/lowering/vta/tir/pipeline.js"

const CHECK = process.argv.includes("--check")
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

/** The TE's meaning in plain loops: clip(floor(Σ data·kernel / 2^shift), 0, 127), packed layouts. */
const reference = (x: VtaConv2d, data: Int8Array, kernel: Int8Array): Int8Array => {
  const { oh: OH, ow: OW } = outSize(x)
  const B = d.blockIn
  const out = new Int8Array(x.co * OH * OW * d.blockOut)
  for (let co = 0; co < x.co; co++)
    for (let y = 0; y < OH; y++)
      for (let xx = 0; xx < OW; xx++)
        for (let oc = 0; oc < d.blockOut; oc++) {
          let s = 0
          for (let ci = 0; ci < x.ci; ci++)
            for (let i = 0; i < x.kh; i++)
              for (let j = 0; j < x.kw; j++) {
                const yy = y * x.stride + i - x.pad
                const xs = xx * x.stride + j - x.pad
                if (yy < 0 || yy >= x.h || xs < 0 || xs >= x.w) continue
                const di = ((ci * x.h + yy) * x.w + xs) * B
                const ki = ((((co * x.ci + ci) * x.kh + i) * x.kw + j) * d.blockOut + oc) * B
                for (let ic = 0; ic < B; ic++) s += data[di + ic] * kernel[ki + ic]
              }
          out[((co * OH + y) * OW + xx) * d.blockOut + oc] = Math.min(Math.max(Math.floor(s / 2 ** x.shift), x.clipLo ?? 0), 127)
        }
  return out
}

const pct = (u: number) => `${(100 * u).toFixed(1)}%`
console.log("| layer | V | schedule (oh × co × ci) | generator cycles | util | passes cycles | util | passes / generator | insns gen / passes |" + (CHECK ? " bit-exact |" : ""))
console.log("|---|---|---|---|---|---|---|---|---|" + (CHECK ? "---|" : ""))
for (const [name, x] of layers) {
  for (const V of [1, 2, 3, 4]) {
    const s = defaultConv2dSchedule(d, x, V)
    const gen = lowerConv2dGenerator(d, x, s)
    const tir = lowerConv2dTir(d, x, s)
    const g = runVtaSync(d, gen.insns, gen.dram, VTA_CYCLE_MODEL, { functional: false }).stats
    const t = runVtaSync(d, tir.insns, tir.dram, VTA_CYCLE_MODEL, { functional: false }).stats
    let exact = ""
    if (CHECK) {
      const data = seeded(x.ci * x.h * x.w * 16, 1)
      const kernel = seeded(x.co * x.ci * x.kh * x.kw * 256, 2)
      const want = reference(x, data, kernel)
      const got = readOut(d, x, tir, runVtaSync(d, tir.insns, withTensors(tir, data, kernel)).dram)
      const genOut = readOut(d, x, gen, runVtaSync(d, gen.insns, withTensors(gen, data, kernel)).dram)
      const same = (a: Int8Array) => a.length === want.length && a.every((v, k) => v === want[k])
      exact = ` ${same(got) ? "yes" : "NO"} (generator ${same(genOut) ? "yes" : "NO"}) |`
    }
    console.log(`| ${name} | ${V} | ${s.tileOh} × ${s.tileCo} × ${s.tileCi} | ${g.totalCycles} | ${pct(g.utilization)} | ${t.totalCycles} | ${pct(t.utilization)} | ${(t.totalCycles / g.totalCycles).toFixed(3)} | ${gen.insns.length} / ${tir.insns.length} |${exact}`)
  }
}
