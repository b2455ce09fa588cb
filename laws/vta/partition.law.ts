// rewrite.VtaPartition and the graph pack, as laws:
// - a partitioned graph evaluates equal to the unpartitioned one: random shift-requantized int8
//   networks (channels padded or whole blocks, residual blocks, biases or none, ReLU or not, a
//   strided 1×1 head) run with their c segments on the graph evaluator and their VTA layers on
//   the simulator (one executor, explicit packed copies) give the evaluator's output bit for bit;
// - pack ∘ unpack is the identity on activations (NCHW1n16c) and weights (OIHW16o16i), and unpack
//   ∘ pack too on the packed layout's live lanes.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { runGraph } from "../../src/ast/graph/evaluate.js"
import { bindSync } from "../../src/ast/graph/infer.js"
import { defaultVtaConfig, deriveVta } from "../../src/ast/vta/config.js"
import { runPartitioned } from "../../src/device/vta/executor.js"
import { VtaScheduleError } from "../../src/lowering/vta/conv2d.js"
import { compileVtaLayer, vtaFits } from "../../src/lowering/vta/layers.js"
import { packActivation, packWeights, unpackActivation, unpackWeights } from "../../src/lowering/vta/pack.js"
import { partitionForVta } from "../../src/rewrite/vta-partition.js"
import { lawParams } from "../support.js"
import { vtaNet, vtaNetInput } from "./net-cases.js"

const d = deriveVta(defaultVtaConfig)

describe("rewrite.VtaPartition", () => {
  it("a partitioned graph evaluates equal to the unpartitioned one", () => {
    fc.assert(
      fc.property(
        fc.record({ c: fc.constantFrom(8, 16, 20, 32), h: fc.integer({ min: 3, max: 7 }), w: fc.integer({ min: 3, max: 7 }), blocks: fc.integer({ min: 1, max: 2 }), out: fc.constantFrom(16, 24), vthreads: fc.constantFrom(1 as const, 2 as const), seed: fc.nat() }),
        (spec) => {
          const g = bindSync(vtaNet(spec), new Map())
          const input = vtaNetInput(spec)
          const want = runGraph(g, new Map([["input", input]]))[0]
          const part = partitionForVta(g, { fits: vtaFits(d) })
          expect(part.offloaded.length).toBe(3 * spec.blocks + 1)
          // the layers with the drawn virtual threads (one where no schedule for two fits)
          const compile = (l: (typeof part.offloaded)[number]) => {
            try {
              return compileVtaLayer(d, l, spec.vthreads)
            } catch (e) {
              if (e instanceof VtaScheduleError) return compileVtaLayer(d, l, 1)
              throw e
            }
          }
          const programs = new Map(part.offloaded.map((l) => [l.name, compile(l)] as const))
          const got = runPartitioned(d, part.segments, ["output"], programs, (_, sg, feeds) => {
            const outs = runGraph(sg, feeds)
            return new Map(sg.outputs.map((o, k) => [o.name, outs[k]] as const))
          }, new Map([["input", input]])).outputs.get("output")!
          expect(got.shape).toEqual(want.shape)
          expect(Array.from(got.data as Float32Array)).toEqual(Array.from(want.data as Float32Array))
        },
      ),
      lawParams(12),
    )
  }, 120_000)
})

describe("the graph pack", () => {
  it("unpack ∘ pack is the identity on activations and weights, channels padded or not", () => {
    fc.assert(
      fc.property(
        fc.record({ block: fc.constantFrom(16, 32), bo: fc.constantFrom(16, 32), c: fc.integer({ min: 1, max: 40 }), o: fc.integer({ min: 1, max: 40 }), h: fc.integer({ min: 1, max: 5 }), w: fc.integer({ min: 1, max: 5 }), k: fc.constantFrom(1, 3), seed: fc.nat() }),
        (r) => {
          const act = Int8Array.from({ length: r.c * r.h * r.w }, (_, i) => ((i * 37 + r.seed) % 256) - 128)
          expect(Array.from(unpackActivation(r.block, r.c, r.h, r.w, packActivation(r.block, r.c, r.h, r.w, act)))).toEqual(Array.from(act))
          const wgt = Int8Array.from({ length: r.o * r.c * r.k * r.k }, (_, i) => ((i * 53 + r.seed) % 256) - 128)
          expect(Array.from(unpackWeights(r.bo, r.block, r.o, r.c, r.k, r.k, packWeights(r.bo, r.block, r.o, r.c, r.k, r.k, wgt)))).toEqual(Array.from(wgt))
        },
      ),
      lawParams(200),
    )
  })

  it("pack ∘ unpack is the identity on packed activations whose padded lanes are zero", () => {
    fc.assert(
      fc.property(fc.record({ block: fc.constantFrom(16, 32), c: fc.integer({ min: 1, max: 40 }), h: fc.integer({ min: 1, max: 5 }), w: fc.integer({ min: 1, max: 5 }), seed: fc.nat() }), (r) => {
        const cb = Math.ceil(r.c / r.block)
        const packed = new Int8Array(cb * r.h * r.w * r.block)
        for (let i = 0; i < packed.length; i++) if (i % r.block < r.c - Math.floor(i / (r.h * r.w * r.block)) * r.block) packed[i] = ((i * 29 + r.seed) % 256) - 128
        expect(Array.from(packActivation(r.block, r.c, r.h, r.w, unpackActivation(r.block, r.c, r.h, r.w, packed)))).toEqual(Array.from(packed))
      }),
      lawParams(200),
    )
  })
})
