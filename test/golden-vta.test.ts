// Goldens of the vta target: disassembled instruction streams and micro-op kernels for fixed cases
// with fixed schedules — a 3×3 conv, the same split into reduction steps of one input block, a 1×1
// stride-2 conv, a tiled GEMM, each serial and with two
// virtual threads, a residual add on the ALU, and add.ts's residual add serial and with two
// virtual threads. The conv cases are the direct generator's (lowerConv2d's "generator" path);
// tir-conv3x3-* are the 3×3 conv through the TIR passes (the default path): the stream, and the
// TIR after each pass. Any byte change fails; to accept a reviewed change:
//   UPDATE_GOLDENS=1 npx vitest run test/golden-vta.test.ts
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { defaultVtaConfig, deriveVta } from "../src/ast/vta/config.js"
import { disassemble, formatUop } from "../src/ast/vta/disasm.js"
import { layoutDram, writeUops, type DramLayout } from "../src/ast/vta/dram-image.js"
import { decodeUop, noDeps, type VtaInsn } from "../src/ast/vta/isa.js"
import { lowerAdd } from "../src/lowering/vta/add.js"
import { lowerConv2d, type VtaConv2d } from "../src/lowering/vta/conv2d.js"
import { printVStmt } from "../src/lowering/vta/tir/ir.js"
import { conv2dTirStages } from "../src/lowering/vta/tir/pipeline.js"
import { alu, buildTiledGemm, mem, seededInt8 } from "../laws/vta/programs.js"

const DIR = path.resolve(import.meta.dirname, "../golden/vta")
const d = deriveVta(defaultVtaConfig)

/** The stream, then the micro-ops the program loads (from its DRAM image's uop region). */
const render = (insns: readonly VtaInsn[], dram: Uint8Array, layout: DramLayout): string => {
  const r = layout.regions.get("uop")!
  const view = new DataView(dram.buffer, dram.byteOffset + r.byteOffset, r.elems * 4)
  const uops = Array.from({ length: r.elems }, (_, k) => `${String(k).padStart(4, "0")}  ${formatUop(decodeUop(d, view.getUint32(4 * k, true)))}`)
  return `${disassemble(insns)}\nmicro-ops:\n${uops.join("\n")}\n`
}

const conv3: VtaConv2d = { ci: 2, co: 2, h: 8, w: 8, kh: 3, kw: 3, stride: 1, pad: 1, shift: 8 }
const conv1: VtaConv2d = { ci: 2, co: 2, h: 8, w: 8, kh: 1, kw: 1, stride: 2, pad: 0, shift: 8 }

const residualAdd = (): string => {
  const L = layoutDram(d, [
    { name: "uop", kind: "uop", elems: 1 },
    { name: "acc", kind: "acc", elems: 8 },
    { name: "c", kind: "out", elems: 4 },
  ])
  const dram = new Uint8Array(L.bytes)
  writeUops(d, dram, L, "uop", [{ dst: 0, src: 4, wgt: 0 }])
  const R = (n: string) => L.regions.get(n)!.base
  const insns: VtaInsn[] = [
    mem("LOAD", "uop", 0, R("uop"), 1, 1, 1),
    mem("LOAD", "acc", 0, R("acc"), 1, 8, 8),
    alu("ADD", 0, 4, undefined, {}, 1),
    alu("MAX", 0, 4, 0),
    alu("MIN", 0, 4, 127, { pushNext: true }),
    mem("STORE", "out", 0, R("c"), 1, 4, 4, { popPrev: true }),
    { op: "FINISH", deps: noDeps },
  ]
  return render(insns, dram, L)
}

const CASES: readonly (readonly [string, () => string])[] = [
  ...([1, 2] as const).flatMap((v) => [
    [`conv3x3-vt${v}`, () => {
      const p = lowerConv2d(d, conv3, { tileOh: 4, tileCo: 1, vthreads: v }, "generator")
      return render(p.insns, p.dram, p.layout)
    }] as const,
    [`conv1x1-s2-vt${v}`, () => {
      const p = lowerConv2d(d, conv1, { tileOh: 2, tileCo: 1, vthreads: v }, "generator")
      return render(p.insns, p.dram, p.layout)
    }] as const,
    [`conv3x3-steps-vt${v}`, () => {
      const p = lowerConv2d(d, conv3, { tileOh: 8, tileCo: 1, tileCi: 1, vthreads: v }, "generator")
      return render(p.insns, p.dram, p.layout)
    }] as const,
    // the same 3×3 conv through the TIR passes (lowerConv2d's path): the stream, and the TIR after each pass
    [`tir-conv3x3-vt${v}`, () => {
      const p = lowerConv2d(d, conv3, { tileOh: 4, tileCo: 1, vthreads: v })
      return render(p.insns, p.dram, p.layout)
    }] as const,
    [`tir-conv3x3-vt${v}-passes`, () => {
      const st = conv2dTirStages(d, conv3, { tileOh: 4, tileCo: 1, vthreads: v })
      return (["schedule", "dma", "alu", "folded", "vthreads"] as const).map((k) => `== ${k}\n${printVStmt(st[k].body)}\n`).join("")
    }] as const,
    [`gemm-vt${v}`, () => {
      const p = buildTiledGemm(d, { M: 4, K: 2, N: 3, shift: 6, depth: v, a: seededInt8(1, 4 * 2 * 16), w: seededInt8(2, 3 * 16 * 2 * 16) })
      return render(p.insns, p.dram, p.layout)
    }] as const,
  ]),
  ["residual-add", residualAdd],
  // add.ts's lowering: 10 entries in chunks of 4 (3 chunks), serial and in two slots
  ...([1, 2] as const).map((v) => [`add-vt${v}`, () => {
    const p = lowerAdd(d, { entries: 10, clipLo: 0, vthreads: v }, 4)
    return render(p.insns, p.dram, p.layout)
  }] as const),
]

describe("golden/vta", () => {
  if (process.env.UPDATE_GOLDENS) {
    mkdirSync(DIR, { recursive: true })
    for (const [name, mk] of CASES) {
      const file = path.join(DIR, `${name}.txt`)
      const text = mk()
      const old = existsSync(file) ? readFileSync(file, "utf8") : undefined
      if (old !== text) {
        writeFileSync(file, text)
        console.log(`${old === undefined ? "added" : "changed"} golden/vta/${name}.txt`)
      }
    }
  }
  for (const [name, mk] of CASES)
    it(`the case ${name} is byte-for-byte the golden`, () => {
      const file = path.join(DIR, `${name}.txt`)
      expect(existsSync(file), `${file} is missing: UPDATE_GOLDENS=1 npx vitest run test/golden-vta.test.ts`).toBe(true)
      expect(mk() === readFileSync(file, "utf8"), `${name} changed: review the diff, then UPDATE_GOLDENS=1 npx vitest run test/golden-vta.test.ts`).toBe(true)
      expect(mk()).toBe(mk())
    })
})
