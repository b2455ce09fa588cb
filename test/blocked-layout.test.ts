// The blocked layout end to end: convolutions with pooling and residual adds move into NCHW{c}c
// (PoolNCHWc for max and average pooling), the conv template's register-blocked schedule is the
// default, and the compiled model (js and c) gives the evaluator's answers.
import { cpuTir, scheduleTarget } from "../src/backend/cpu.js"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { makeGraph, node, type Graph } from "../src/ast/graph/graph.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { prng } from "../src/ast/graph/arbitrary.js"
import { tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { makeTarget } from "../src/ast/target.js"
import { compilerAvailable } from "../src/device/c/build.js"
import { baseSchedule, buildGroupTE, lowerGroup } from "../src/lowering/lower-group.js"
import { convTemplate } from "../src/lowering/templates/conv2d-nchwc.js"
import { reductionTemplate } from "../src/lowering/templates/reduction.js"
import { defaultSchedule, templateFor } from "../src/lowering/templates/template-for.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { alterLayoutSync } from "../src/rewrite/alter-layout.js"
import * as fs from "node:fs"
import { OPS, TESSERA_OPS } from "../src/ast/graph/ops/index.js"
import { OP_COMPUTES } from "../src/lowering/op-library.js"
import { zooGraph } from "../src/zoo/index.js"
import { assertAllClose } from "../laws/support.js"

const rng = prng(23)
const rand = (shape: number[]): Tensor => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))

/** conv 3×3 → relu → maxpool 3×3/2 (padded) → conv → + pooled → averagepool 2×2 (count_include_pad). */
const graph: Graph = makeGraph({
  opset: 13,
  inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 3, 13, 13] } }],
  outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 32, 4, 4] } }],
  initializers: new Map([
    ["w1", rand([32, 3, 3, 3])],
    ["b1", rand([32])],
    ["w2", rand([32, 32, 3, 3])],
  ]),
  nodes: [
    node("Conv", ["x", "w1", "b1"], ["c1"], { pads: attr.ints([1, 1, 1, 1]), kernel_shape: attr.ints([3, 3]) }),
    node("Relu", ["c1"], ["r1"]),
    node("MaxPool", ["r1"], ["p1"], { kernel_shape: attr.ints([3, 3]), strides: attr.ints([2, 2]), pads: attr.ints([1, 1, 1, 1]) }),
    node("Conv", ["p1", "w2"], ["c2"], { pads: attr.ints([1, 1, 1, 1]), kernel_shape: attr.ints([3, 3]) }),
    node("Add", ["c2", "p1"], ["s"]),
    node("AveragePool", ["s"], ["y"], { kernel_shape: attr.ints([2, 2]), strides: attr.ints([2, 2]), pads: attr.ints([0, 0, 1, 1]), count_include_pad: attr.int(1) }),
  ],
})
const feeds = new Map([["x", rand([1, 3, 13, 13])]])
const want = runGraph(graph, feeds)

describe("blocked layout", () => {
  it("moves pooling and the residual add into NCHW{c}c: one transform in, one out", () => {
    for (const lanes of [16, 4]) {
      const after = alterLayoutSync(graph, { vectorLanes: lanes })
      const ops = after.nodes.map((n) => n.op)
      expect(ops.filter((o) => o === "PoolNCHWc")).toHaveLength(2)
      expect(ops.filter((o) => o === "LayoutTransform")).toHaveLength(2)
      assertAllClose([...runGraph(after, feeds).values()], [...want.values()], 1e-4, 1e-5)
    }
  })

  it("schedules blocked convolutions with the conv template (register tile, padding computed first)", async () => {
    const program = await Effect.runPromise(compileGraph(graph, makeTarget("js", { vectorLanes: 16 }), { optLevel: 3 }))
    // the second conv (32 channels on 7×7) is Winograd F(2×2, 3×3): its own template
    const wino = program.fused.groups.filter((g) => g.ops[0] === "ConvWinogradNCHWc")
    expect(wino.length).toBe(1)
    expect(templateFor(baseSchedule(buildGroupTE(program.fused, wino[0]).outputs)).name).toBe("winograd_NCHWc")
    const convGroups = program.fused.groups.filter((g) => g.ops[0] === "ConvNCHWc")
    expect(convGroups.length).toBe(1)
    for (const g of convGroups) {
      const { outputs } = buildGroupTE(program.fused, g)
      const base = baseSchedule(outputs)
      const t = templateFor(base)
      expect(t.name).toBe("conv2d_NCHWc")
      const d = t.defaults(t.space(outputs, base), { vectorLanes: 16, cores: 1, vectorRegisters: 32, fmaUnits: 1, fmaLatency: 4 })
      expect(d).toMatchObject({ reduce_order: "ic_only", unroll_kh: true, unroll_kw: true, pad_root: true, tile_oh: 1 })
      // (13 columns of one block: 13 accumulators, fewer bytes per FMA than one column of two blocks)
      expect([d.tile_ow, d.tile_oc]).toEqual([13, 1])
    }
  })

  it("the conv defaults keep a tile's weights in L2 (one channel block for 512-channel 3×3 layers) and fit the register file", () => {
    const knobs = (ic: number, ocb: number, ow: number) =>
      [
        { kind: "split", name: "tile_ow", extent: ow, candidates: [1, 2, 4, 7, 8, 14, 28, 56].filter((d) => ow % d === 0) },
        { kind: "split", name: "tile_oh", extent: ow, candidates: [1, 2, 4, 7, 8].filter((d) => ow % d === 0) },
        { kind: "split", name: "tile_oc", extent: ocb, candidates: [1, 2, 4, 8].filter((d) => ocb % d === 0) },
        { kind: "split", name: "tile_ic", extent: ic, candidates: [1, 2, 4, 8, 16, 32, 64] },
        { kind: "choice", name: "reduce_order", candidates: ["ic_kernel", "kernel_ic", "ic_only"] },
        { kind: "choice", name: "unroll_kh", candidates: [false, true], extent: 3 },
        { kind: "choice", name: "unroll_kw", candidates: [false, true], extent: 3 },
      ] as const
    // AVX-512 as on Zen 4 (32 registers, one 512-bit FMA pipe of latency 4)
    const avx512 = { vectorLanes: 16, cores: 1, vectorRegisters: 32, fmaUnits: 1, fmaLatency: 4 }
    // ResNet-18's last stage: 512 input channels × 3×3 × 16 lanes = 288 KiB per output block
    expect(convTemplate.defaults(knobs(512, 32, 7), avx512)).toMatchObject({ tile_oc: 1, tile_ow: 7 })
    // its first stage: 64 channels, 36 KiB per block, up to three blocks: 8 columns of two blocks
    // (10 loads for 16 FMAs a step, one 512-bit FMA and load a cycle) — one block would broadcast
    // for every FMA (15 loads for 14 FMAs: load-bound)
    expect(convTemplate.defaults(knobs(64, 4, 56), avx512)).toMatchObject({ tile_oc: 2, tile_ow: 8, tile_oh: 1 })
    // AVX2 (16 registers): one block across 7–8 columns, whatever the channels
    const avx2 = { vectorLanes: 8, cores: 1, vectorRegisters: 16, fmaUnits: 2, fmaLatency: 4 }
    expect(convTemplate.defaults(knobs(512, 64, 7), avx2)).toMatchObject({ tile_oc: 1, tile_ow: 7, tile_oh: 1 })
    expect(convTemplate.defaults(knobs(64, 8, 56), avx2)).toMatchObject({ tile_oc: 1, tile_ow: 8, tile_oh: 1 })
  })

  it("the conv defaults read a 1×1 projection's input once (channel tiles inside); expansions and 3×3 convs keep channel tiles outermost", () => {
    const pointwise = (ic: number, ocb: number, ow: number) =>
      [
        { kind: "split", name: "tile_ow", extent: ow, candidates: [1, 2, 4, 7, 8, 14, 28, 56].filter((d) => ow % d === 0) },
        { kind: "split", name: "tile_oh", extent: ow, candidates: [1, 2, 4, 7, 8].filter((d) => ow % d === 0) },
        { kind: "split", name: "tile_oc", extent: ocb, candidates: [1, 2, 3, 4, 6, 8].filter((d) => ocb % d === 0) },
        { kind: "split", name: "tile_ic", extent: ic, candidates: [1, 2, 4, 8, 16].filter((d) => ic % d === 0) },
        { kind: "choice", name: "oc_order", candidates: ["outer", "inner"], absent: "outer" },
      ] as const
    // MobileNetV2: 144 -> 24 channels at 56×56 (projection), 24 -> 144 (expansion)
    expect(convTemplate.defaults(pointwise(144, 3, 56), { vectorLanes: 8, cores: 1 })).toMatchObject({ oc_order: "inner" })
    expect(convTemplate.defaults(pointwise(24, 18, 56), { vectorLanes: 8, cores: 1 })).toMatchObject({ oc_order: "outer" })
    // AVX2: a 1x1 conv's tile is two rows of up to 7 columns (14 accumulators); a 7x7 image
    // (no even row count) keeps one row, a 3x3 conv keeps one row
    expect(convTemplate.defaults(pointwise(96, 72, 14), { vectorLanes: 8, cores: 1 })).toMatchObject({ tile_ow: 7, tile_oh: 2, tile_oc: 1 })
    expect(convTemplate.defaults(pointwise(24, 18, 56), { vectorLanes: 8, cores: 1 })).toMatchObject({ tile_ow: 7, tile_oh: 2 })
    expect(convTemplate.defaults(pointwise(960, 40, 7), { vectorLanes: 8, cores: 1 })).toMatchObject({ tile_ow: 7, tile_oh: 1 })
    const conv3 = [...pointwise(256, 16, 28), { kind: "choice", name: "unroll_kh", candidates: [false, true], extent: 3 }, { kind: "choice", name: "unroll_kw", candidates: [false, true], extent: 3 }] as const
    expect(convTemplate.defaults(conv3, { vectorLanes: 8, cores: 1 })).toMatchObject({ oc_order: "outer", tile_oh: 1 })
  })

  it("the depthwise defaults: AVX-512, one channel block, 2 columns x up to 7 rows, only the kernel's column loop unrolled; AVX2 as before", () => {
    const dw = (ocb: number, hw: number) =>
      [
        { kind: "split", name: "tile_ow", extent: hw, candidates: [1, 2, 4, 7, 8, 14, 16, 28, 32].filter((d) => hw % d === 0) },
        { kind: "split", name: "tile_oh", extent: hw, candidates: [1, 2, 4, 7, 8].filter((d) => hw % d === 0) },
        { kind: "split", name: "tile_oc", extent: ocb, candidates: [1, 2, 3, 4, 6, 8].filter((d) => ocb % d === 0) },
        { kind: "choice", name: "unroll_kh", candidates: [false, true], extent: 3 },
        { kind: "choice", name: "unroll_kw", candidates: [false, true], extent: 3 },
        { kind: "choice", name: "pad_root", candidates: [true, false] },
      ] as const
    // MobileNetV2: 144 channels at 56x56, 960 at 7x7; a 16x16 image has no 7 rows: 4
    expect(convTemplate.defaults(dw(9, 56), { vectorLanes: 16, cores: 1 })).toMatchObject({ tile_ow: 2, tile_oh: 7, tile_oc: 1, unroll_kh: false, unroll_kw: true, pad_root: false })
    expect(convTemplate.defaults(dw(60, 7), { vectorLanes: 16, cores: 1 })).toMatchObject({ tile_ow: 1, tile_oh: 7, tile_oc: 1 })
    expect(convTemplate.defaults(dw(4, 16), { vectorLanes: 16, cores: 1 })).toMatchObject({ tile_ow: 2, tile_oh: 4 })
    expect(convTemplate.defaults(dw(18, 56), { vectorLanes: 8, cores: 1 })).toMatchObject({ tile_oh: 1, unroll_kh: true, unroll_kw: true })
  })

  it("a one-row dense layer (a classifier at batch 1): with 8 or 16 lanes, a column tile past 64 leaving two per core; else a few vectors", () => {
    const dense = (n: number) =>
      [
        { kind: "split", name: "tile_inner", extent: n, candidates: [1, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 125, 200, 250, 500].filter((d) => n % d === 0) },
        { kind: "split", name: "tile_second", extent: 1, candidates: [1] },
        { kind: "choice", name: "vectorize", candidates: [true, false] },
      ] as const
    // MobileNetV2's 1280 -> 1000 classifier: 250 columns (4 tiles) on 1 and 2 cores
    expect(reductionTemplate.defaults(dense(1000), { vectorLanes: 16, cores: 1 })).toMatchObject({ tile_inner: 250 })
    expect(reductionTemplate.defaults(dense(1000), { vectorLanes: 8, cores: 2 })).toMatchObject({ tile_inner: 250 })
    expect(reductionTemplate.defaults(dense(1000), { vectorLanes: 16, cores: 4 })).toMatchObject({ tile_inner: 125 })
    // SIMD128 (the wasm target, whose vectorizer is the schedule's): 5 vectors of 4
    expect(reductionTemplate.defaults(dense(1000), { vectorLanes: 4, cores: 1 })).toMatchObject({ tile_inner: 20 })
  })

  it("the js target gives the evaluator's answers", async () => {
    const program = await Effect.runPromise(compileGraph(graph, makeTarget("js", { vectorLanes: 16 }), { optLevel: 3 }))
    expect(program.kernels.every((k) => k.kind === "compiled")).toBe(true)
    const exec = await Effect.runPromise(loadProgram(program, makeTarget("js")))
    assertAllClose([...exec.run(feeds).values()], [...want.values()], 1e-4, 1e-5)
  })

  it.skipIf(!compilerAvailable())("the c target gives the evaluator's answers", async () => {
    const program = await Effect.runPromise(compileGraph(graph, makeTarget("c", { vectorLanes: 16, cores: 2 }), { optLevel: 3 }))
    const exec = await Effect.runPromise(loadProgram(program, makeTarget("c")))
    assertAllClose([...exec.run(feeds).values()], [...want.values()], 1e-4, 1e-5)
  })

  it("compiles every group of the zoo CNNs (no group falls back to the reference kernels)", async () => {
    for (const name of ["resnet18", "mobilenetv2"]) {
      for (const [target, lanes] of [["c", 16], ["wasm", 4]] as const) {
        const program = await Effect.runPromise(compileGraph(zooGraph(name, 0), makeTarget(target, { vectorLanes: lanes, cores: 2 }), { optLevel: 3 }))
        const fallback = program.kernels.filter((k) => k.kind === "fallback").map((k) => `${k.name}: ${k.kind === "fallback" ? k.reason : ""}`)
        expect(fallback, `${name} on ${target}`).toEqual([])
      }
    }
  })

  it("groups that share a lowered function (same TE and schedule) get what lowering each alone gives", async () => {
    const c8 = makeTarget("c", { vectorLanes: 8, cores: 1 })
    // (the schedule target compileGraph sizes its tiles from: lanes, FMA pipes, registers)
    const target = { kind: "c", ...scheduleTarget(c8) } as const
    const program = await Effect.runPromise(compileGraph(zooGraph("resnet18", 0), c8, { optLevel: 3 }))
    const key = (f: unknown) => JSON.stringify(f, (k, v: unknown) => (k === "tensor" ? undefined : v))
    const compiled = program.kernels.filter((k) => k.kind === "compiled")
    // ResNet-18 repeats its blocks: fewer distinct functions than kernels
    expect(new Set(compiled.map((k) => key({ ...k.func, name: "" }))).size).toBeLessThan(compiled.length)
    for (const k of compiled) {
      // (through the c backend's own TIR pipeline, as compileGraph lowers: SerialSmallKernels' threshold comes from the target)
      const alone = lowerGroup(program.fused, program.fused.groups[k.group], cpuTir(c8), defaultSchedule(target))
      expect(alone.kind === "compiled" && key(alone.func), k.name).toBe(key(k.func))
    }
  }, 60_000)

  it("docs/backends.md names exactly the ops without a compute (they run through the fallback)", () => {
    const doc = fs.readFileSync(new URL("../docs/backends.md", import.meta.url), "utf8")
    const listed = /<!-- fallback-ops -->\n(.*)\n<!-- \/fallback-ops -->/.exec(doc)?.[1].split(", ")
    const missing = [...Object.keys(OPS), ...Object.keys(TESSERA_OPS)].filter((op) => !(op in OP_COMPUTES)).sort()
    expect(listed).toEqual(missing)
  })
})
