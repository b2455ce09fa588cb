// The cuda target's GPU rules, simulated (cuda-sim): on random computes and shapes, every
// configuration of a group's GPU space, lowered and run by the TIR evaluator with its thread teams,
// barriers and shared memory, computes what the TE says; its TIR has no store outside a thread
// loop, no barrier under a condition and no shared buffer written and read by different statements
// between two barriers; and the defaults from the attrs fit the record's limits. Per rule, on the
// shapes it is for: multi-level tiling (matmul, batch matmul, conv2d, depthwise; its virtual threads
// fetching nothing of their own, counted by the TIR evaluator), cross-thread
// reduction (few rows over a long axis, a batch-1 dense), auto-bind (elementwise chains).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbComputeCase, COMPUTE_FAMILIES, buildCompute, convCase, denseRowCase, longReductionCase, matmulCase, type ComputeCase } from "../../../src/ast/te/arbitrary.js"
import { cudaAttrs, type CudaAttrs } from "../../../src/ast/target.js"
import { evaluateTE } from "../../../src/ast/te/evaluate.js"
import { evaluatePrimFunc } from "../../../src/ast/tir/evaluate.js"
import type { PrimFunc } from "../../../src/ast/tir/tir.js"
import { baseSchedule } from "../../../src/lowering/lower-group.js"
import { lowerSync } from "../../../src/lowering/lower.js"
import { gpuLimits, gpuRules, gpuTemplate, verifyGpuFunc } from "../../../src/lowering/templates/gpu/index.js"
import type { Config, Knob } from "../../../src/lowering/templates/template.js"
import { hasReuse, provenFetches } from "../../../src/lowering/templates/gpu/multi-level-tiling.js"
import { sharedFetchesPerStep } from "../../../src/lowering/templates/gpu/fetch-count.js"
import { anchorStage } from "../../../src/lowering/templates/common.js"
import { assertAllClose, lawParams } from "../../support.js"
import { runTirSync } from "../../../src/lowering/tir/tir-pass.js"
import { cudaTirPipeline } from "../../../src/lowering/tir/cuda-pipeline.js"
import { splitLaunches } from "../../../src/emit/cuda/launch.js"
import { verifyLaunch } from "../../../src/emit/cuda/verify.js"
import type { Stmt } from "../../../src/ast/tir/tir.js"
import { laneSplit, residue, vectorCopy } from "../../../src/ast/tir/vector-access.js"
import { evalExpr } from "../../../src/ast/te/eval-expr.js"
import { add, c, floordiv, floormod, mul, showExpr, v, type Expr } from "../../../src/ast/te/expr.js"

/** Checks every loop the emitter turns into one vector access at sampled values of the loops around it; the number of such loops. */
const checkVectorCopies = (f: PrimFunc, attrs: CudaAttrs, seed: number): number => {
  let found = 0
  let state = seed + 1
  const rand = (n: number) => {
    state = (state * 1103515245 + 12345) % 2147483648
    return state % n
  }
  const dtypes = new Map(f.params.map((p) => [p.name, p.dtype] as const))
  const walk = (s: Stmt, loops: readonly { name: string; min: number; extent: number }[]): void => {
    switch (s.kind) {
      case "for": {
        const vc = vectorCopy(s, (name) => dtypes.get(name), attrs.maxVectorBytes)
        if (vc && s.body.kind === "store" && s.body.value.kind === "read") {
          found++
          const st = s.body
          const rd = s.body.value
          for (let sample = 0; sample < 64; sample++) {
            const env = new Map(loops.map((l) => [l.name, l.min + rand(Math.max(1, l.extent))] as const))
            const at = (e: Expr, lane: number) => evalExpr(e, new Map(env).set(s.var.name, lane), () => 0)
            const d0 = at(st.indices[0], 0)
            const r0 = at(rd.indices[0], 0)
            expect(d0 % vc.lanes, "store aligned").toBe(0)
            expect(r0 % vc.lanes, "read aligned").toBe(0)
            expect(at(vc.dstBase, 0)).toBe(d0)
            expect(at(vc.srcBase, 0)).toBe(r0)
            for (let e = 1; e < vc.lanes; e++) {
              expect(at(st.indices[0], e), "store contiguous").toBe(d0 + e)
              expect(at(rd.indices[0], e), "read contiguous").toBe(r0 + e)
            }
          }
          return
        }
        const lo = s.min.kind === "const" ? s.min.value : 0
        const ext = s.extent.kind === "const" ? s.extent.value : 1
        return walk(s.body, [...loops, { name: s.var.name, min: lo, extent: ext }])
      }
      case "seq":
        return s.body.forEach((b) => walk(b, loops))
      case "if":
        walk(s.then, loops)
        if (s.else) walk(s.else, loops)
        return
      case "allocate":
        dtypes.set(s.buffer.name, s.buffer.dtype)
        return walk(s.body, loops)
      case "let":
        return walk(s.body, loops)
      default:
        return
    }
  }
  walk(f.body, [])
  return found
}

const countShuffles = (s: Stmt): number =>
  s.kind === "shuffle" ? 1 : s.kind === "seq" ? s.body.reduce((n, b) => n + countShuffles(b), 0) : s.kind === "for" || s.kind === "allocate" || s.kind === "let" ? countShuffles(s.body) : s.kind === "if" ? countShuffles(s.then) + (s.else ? countShuffles(s.else) : 0) : 0

const NO_TARGET = { vectorLanes: 1, cores: 1 }

/** A GPU of a known capability with 1 to 160 SMs (few SMs: the tiling rule takes small groups; many: the cross-thread rule does). */
const arbAttrs: fc.Arbitrary<CudaAttrs> = fc.tuple(fc.constantFrom("7.0", "8.0", "9.0"), fc.integer({ min: 1, max: 160 })).map(([cc, sms]) => cudaAttrs(cc, sms))

/** The config whose knob k takes candidate picks[k] (mod its count). */
const pickConfig = (knobs: readonly Knob[], picks: readonly number[]): Config =>
  Object.fromEntries(knobs.map((k, i) => [k.name, k.candidates[picks[i % picks.length] % k.candidates.length]]))

/** Lowers a case under a config of its GPU space; its function, the verifier's problems (limits aside where `limits` is false) and the rules. */
const lowerGpu = (cc: ComputeCase, attrs: CudaAttrs, config?: (knobs: readonly Knob[]) => Config) => {
  const base = baseSchedule(cc.outputs)
  const t = gpuTemplate(attrs, base)
  const knobs = t.space(cc.outputs, base)
  const c = config ? config(knobs) : t.defaults(knobs, NO_TARGET)
  const f = lowerSync(t.apply(cc.outputs, base, c))
  const v = verifyGpuFunc(f, gpuLimits(attrs))
  return { f, v, rules: gpuRules(base, gpuLimits(attrs)).map((r) => r.rule), config: c }
}

/** The simulated run equals the TE. */
const assertSimulates = (f: PrimFunc, cc: ComputeCase) => {
  const got = evaluatePrimFunc(f, cc.inputs)
  assertAllClose(
    cc.outputs.map((o) => got.get(o.name)!),
    evaluateTE(cc.outputs, cc.inputs),
    1e-4,
    1e-4,
  )
}

/** Problems that are no limit of the record (a random config may exceed the threads or shared bytes a block has; nothing else). */
const structural = (problems: readonly string[]) => problems.filter((p) => !/over the limit|registers of a block/.test(p))

const checkRandomConfig = (cc: ComputeCase, attrs: CudaAttrs, picks: readonly number[], rule?: string) => {
  const { f, v, rules } = lowerGpu(cc, attrs, (knobs) => pickConfig(knobs, picks))
  if (rule) expect(rules).toContain(rule)
  expect(structural(v.problems)).toEqual([])
  assertSimulates(f, cc)
}

const picks = fc.array(fc.nat(), { minLength: 12, maxLength: 12 })

describe("GPU rules (cuda-sim)", () => {
  it("every configuration of a group's GPU space, simulated with thread teams, barriers and shared memory, equals the TE; no store outside a thread, no conditional barrier, no shared race", () => {
    fc.assert(
      fc.property(arbComputeCase(COMPUTE_FAMILIES.filter((f) => f !== "conv2d_nchwc")), arbAttrs, picks, (cc, attrs, p) => checkRandomConfig(cc, attrs, p)),
      lawParams(60),
    )
  })

  it("multi-level tiling: random matmuls (batched, with and without an epilogue), convolutions and depthwise convolutions, random tiles", () => {
    const arbCase = fc.oneof(
      fc.record({ seed: fc.nat(), batch: fc.integer({ min: 0, max: 2 }), m: fc.integer({ min: 1, max: 12 }), n: fc.integer({ min: 2, max: 12 }), k: fc.integer({ min: 1, max: 12 }), epilogue: fc.boolean() }).map((o) => matmulCase(o.seed, o)),
      fc.tuple(fc.constantFrom("conv2d" as const, "depthwise" as const), fc.nat()).map(([f, seed]) => buildCompute(f, seed)),
    )
    fc.assert(
      fc.property(arbCase, fc.constantFrom("8.0", "9.0"), picks, (cc, capability, p) => {
        // (a conv to one output element has no reuse: auto-bind takes it)
        fc.pre(hasReuse(anchorStage(baseSchedule(cc.outputs))!))
        checkRandomConfig(cc, cudaAttrs(capability, 1), p, "tile")
      }),
      lawParams(60),
    )
  })

  it("AutoTVM's conv2d template (threadIdx.z/y/x, vthreads, two-level reduction splits, unroll pragmas): random convolutions and depthwise convolutions, random configs of its space", () => {
    fc.assert(
      fc.property(fc.constantFrom("conv2d" as const, "depthwise" as const), fc.nat(), picks, (family, seed, p) => {
        const cc = buildCompute(family, seed)
        fc.pre(hasReuse(anchorStage(baseSchedule(cc.outputs))!))
        const { f, v, config } = lowerGpu(cc, cudaAttrs("9.0", 1), (knobs) => ({ ...pickConfig(knobs, p), cuda_sketch: "autotvm" }))
        expect(config.cuda_sketch).toBe("autotvm")
        expect(structural(v.problems)).toEqual([])
        assertSimulates(f, cc)
      }),
      lawParams(40),
    )
  })

  it("cross-thread reduction: few rows over a long axis (sum or max, with a mean after), a batch-1 dense; random threads and rows a block", () => {
    const arbCase = fc.oneof(
      fc.record({ seed: fc.nat(), rows: fc.integer({ min: 1, max: 3 }), cols: fc.integer({ min: 1, max: 3 }), r: fc.integer({ min: 32, max: 300 }), max: fc.boolean(), mean: fc.boolean() }).map((o) => longReductionCase(o.seed, o)),
      fc.record({ seed: fc.nat(), n: fc.integer({ min: 1, max: 6 }), k: fc.integer({ min: 32, max: 200 }) }).map((o) => denseRowCase(o.seed, o.n, o.k)),
    )
    fc.assert(
      fc.property(arbCase, fc.constantFrom("8.0", "9.0"), picks, (cc, capability, p) => checkRandomConfig(cc, cudaAttrs(capability, 132), p, "cross-thread")),
      lawParams(40),
    )
  })

  it("cross-thread reduction with warp shuffles (lowering.LowerThreadAllreduce): through the cuda pipeline, the partials summed by __shfl_down_sync within warps and across them, simulated lane by lane, equal the TE; every launch verifies", () => {
    const arbCase = fc.oneof(
      fc.record({ seed: fc.nat(), rows: fc.integer({ min: 1, max: 3 }), cols: fc.integer({ min: 1, max: 3 }), r: fc.integer({ min: 32, max: 700 }), max: fc.boolean(), mean: fc.boolean() }).map((o) => longReductionCase(o.seed, o)),
      fc.record({ seed: fc.nat(), n: fc.integer({ min: 1, max: 6 }), k: fc.integer({ min: 32, max: 400 }) }).map((o) => denseRowCase(o.seed, o.n, o.k)),
    )
    fc.assert(
      fc.property(arbCase, fc.constantFrom("8.0", "9.0"), picks, (cc, capability, p) => {
        const attrs = cudaAttrs(capability, 132)
        const { f: f0, rules } = lowerGpu(cc, attrs, (knobs) => ({ ...pickConfig(knobs, p), ...Object.fromEntries(knobs.filter((k) => k.name.endsWith("_shuffle")).map((k) => [k.name, 1])) }))
        expect(rules).toContain("cross-thread")
        const f = runTirSync(cudaTirPipeline(attrs), f0)
        expect(countShuffles(f.body)).toBeGreaterThan(0)
        for (const l of splitLaunches(f).launches) verifyLaunch(l, attrs)
        assertSimulates(f, cc)
      }),
      lawParams(30),
    )
  })

  it("float4 / float2 copies (ast/tir/vector-access.ts): random tiled matmuls and convolutions, random configs, through the cuda pipeline (fetch guards hoisted) equal the TE; every copy the emitter makes one vector access moves, at sampled values of the loops around it, n contiguous elements from and to indices that are multiples of n", () => {
    const arbCase = fc.oneof(
      fc.record({ seed: fc.nat(), batch: fc.integer({ min: 0, max: 1 }), m: fc.integer({ min: 1, max: 24 }), n: fc.integer({ min: 2, max: 24 }), k: fc.integer({ min: 1, max: 24 }), epilogue: fc.boolean() }).map((o) => matmulCase(o.seed, o)),
      fc.tuple(fc.constantFrom("conv2d" as const, "depthwise" as const), fc.nat()).map(([f, seed]) => buildCompute(f, seed)),
    )
    let vectors = 0
    fc.assert(
      fc.property(arbCase, picks, fc.nat(), (cc, p, seed) => {
        fc.pre(hasReuse(anchorStage(baseSchedule(cc.outputs))!))
        const attrs = cudaAttrs("9.0", 1)
        // each shared input's fetch at a random width of its own
        const { f: f0 } = lowerGpu(cc, attrs, (knobs) => ({ ...pickConfig(knobs, p), ...Object.fromEntries(knobs.filter((k) => /^mt_vec\d+$/.test(k.name)).map((k, j) => [k.name, [1, 2, 4][(seed + j * 7) % 3]])) }))
        const f = runTirSync(cudaTirPipeline(attrs), f0)
        assertSimulates(f, cc)
        vectors += checkVectorCopies(f, attrs, seed)
      }),
      lawParams(60),
    )
    expect(vectors).toBeGreaterThan(0)
  })

  it("virtual threads fetch nothing of their own (TVM's InjectVirtualThread): random tiled matmuls, convolutions and depthwise ones, random configs of the generated tiling and of AutoTVM's template with vthreads, through the cuda pipeline, equal the TE; counted by the TIR evaluator, a block stores into shared memory a step no more elements than its shared tiles hold, and exactly as many as the same block tile with the vthreads folded into the inner factors", () => {
    const arbCase = fc.oneof(
      fc.record({ seed: fc.nat(), batch: fc.integer({ min: 0, max: 1 }), m: fc.integer({ min: 2, max: 16 }), n: fc.integer({ min: 2, max: 16 }), k: fc.integer({ min: 1, max: 12 }), epilogue: fc.boolean() }).map((o) => matmulCase(o.seed, o)),
      fc.tuple(fc.constantFrom("conv2d" as const, "depthwise" as const), fc.nat()).map(([f, seed]) => buildCompute(f, seed)),
    )
    /** "v.t.i" → "1.t.v·i": the same block tile without vthreads. */
    const fold = (t: unknown) => {
      const [vv, th, i] = String(t).split(".").map(Number)
      return `1.${th}.${vv * i}`
    }
    const tileKnob = /^(mt_s\d+|tile_[fyx])$/
    let withVthreads = 0
    let template = 0
    fc.assert(
      fc.property(arbCase, picks, fc.boolean(), (cc, p, autotvm) => {
        fc.pre(hasReuse(anchorStage(baseSchedule(cc.outputs))!))
        const attrs = cudaAttrs("9.0", 1)
        const at = lowerGpu(cc, attrs, (knobs) => ({ ...pickConfig(knobs, p), ...(knobs.some((k) => k.name === "cuda_sketch") ? { cuda_sketch: autotvm ? "autotvm" : "generated" } : {}) }))
        fc.pre(Object.entries(at.config).some(([k, t]) => tileKnob.test(k) && !String(t).startsWith("1.")))
        const flat = lowerGpu(cc, attrs, () => Object.fromEntries(Object.entries(at.config).map(([k, t]) => [k, tileKnob.test(k) ? fold(t) : t])))
        const emitted = runTirSync(cudaTirPipeline(attrs), at.f)
        assertSimulates(emitted, cc)
        const n = sharedFetchesPerStep(at.f, emitted)
        expect(n.steps).toBeGreaterThan(0)
        expect(n.perStep, "stores a step, against the shared tiles' elements").toBeLessThanOrEqual(n.sharedElements)
        expect(n.perStep, "stores a step, against the same block tile without vthreads").toBe(sharedFetchesPerStep(flat.f, runTirSync(cudaTirPipeline(attrs), flat.f)).perStep)
        withVthreads++
        if (at.config.cuda_sketch === "autotvm") template++
      }),
      lawParams(30),
    )
    expect(withVthreads).toBeGreaterThan(0)
    expect(template).toBeGreaterThan(0)
  })

  it("per-buffer fetch widths at the defaults: random matmuls, dense layers, convolutions (1x1 and 3x3, strided, padded) and depthwise ones, through the cuda pipeline, equal the TE; every fetch the defaults give a width above 1 is all proven vector copies (aligned, contiguous at sampled values), every other one scalar", () => {
    const arbCase = fc.oneof(
      fc.record({ seed: fc.nat(), batch: fc.integer({ min: 0, max: 1 }), m: fc.integer({ min: 1, max: 24 }), n: fc.integer({ min: 2, max: 32 }), k: fc.integer({ min: 1, max: 32 }), epilogue: fc.boolean() }).map((o) => matmulCase(o.seed, o)),
      fc.tuple(fc.constantFrom("conv2d" as const, "depthwise" as const), fc.nat()).map(([f, seed]) => buildCompute(f, seed)),
      fc.record({ seed: fc.nat(), c: fc.constantFrom(4, 8, 16), o: fc.constantFrom(4, 8), hw: fc.constantFrom(4, 6, 8, 12, 16), k: fc.constantFrom(1, 3), stride: fc.constantFrom(1, 2), pad: fc.boolean() }).map(convCase),
    )
    let wide = 0
    fc.assert(
      fc.property(arbCase, fc.constantFrom("8.0", "9.0"), fc.integer({ min: 1, max: 132 }), fc.nat(), (cc, capability, sms, seed) => {
        fc.pre(hasReuse(anchorStage(baseSchedule(cc.outputs))!))
        const attrs = cudaAttrs(capability, sms)
        const { f: f0, config, rules } = lowerGpu(cc, attrs)
        fc.pre(rules.includes("tile") && config.cuda_sketch !== "autotvm")
        const f = runTirSync(cudaTirPipeline(attrs), f0)
        assertSimulates(f, cc)
        checkVectorCopies(f, attrs, seed)
        const proven = provenFetches(f, attrs.maxVectorBytes)
        // (mt_vec<k>: the anchor's k-th distinct input's fetch)
        const inputs = [...new Set(anchorStage(baseSchedule(cc.outputs))!.op.inputs.map((t) => t.name))]
        const widths = Object.entries(config).filter(([k]) => /^mt_vec\d+$/.test(k))
        expect(widths.length).toBeGreaterThan(0)
        for (const [k, w] of widths) {
          const input = inputs[Number(k.slice("mt_vec".length))]
          const buffer = [...proven.keys()].find((b) => b === `${input}.shared` || b.startsWith(`${input}.shared.`))
          if (Number(w) > 1) {
            wide++
            expect(buffer, `${k} = ${w}: its fetch has vector copies`).toBeDefined()
            expect(proven.get(buffer!), `${k} = ${w}: every copy of ${buffer} proven`).toBe(true)
          } else expect(buffer, `${k} = 1: its fetch is scalar`).toBeUndefined()
        }
      }),
      lawParams(20),
    )
    expect(wide).toBeGreaterThan(0)
  })

  it("vector-access proofs on random index expressions (sums, products by constants, floordiv and floormod by constants of a lane and loop variables): where laneSplit says base + k·e and residue says base ≡ r (mod m), every sampled value agrees", () => {
    let proven = 0
    fc.assert(
      fc.property(fc.nat(), fc.constantFrom(2, 4), (seed, n) => {
        let st = seed + 7
        const rand = (k: number) => {
          st = (st * 1103515245 + 12345) % 2147483648
          return st % k
        }
        const vars = ["x", "y"]
        const gen = (depth: number): Expr => {
          const r = rand(depth > 3 ? 3 : 7)
          if (r === 0) return c(rand(3) * [1, 2, 4, 8][rand(4)])
          if (r === 1) return rand(2) ? v(vars[rand(2)]) : mul(v(vars[rand(2)]), c([2, 4, 8][rand(3)]))
          if (r === 2) return v("e")
          if (r === 3) return add(gen(depth + 1), gen(depth + 1))
          if (r === 4) return mul(gen(depth + 1), c([1, 2, 3, 4, 6, 8, 12, 16][rand(8)]))
          if (r === 5) return floordiv(gen(depth + 1), c([2, 3, 4, 6, 8, 12, 16][rand(7)]))
          return floormod(gen(depth + 1), c([2, 3, 4, 6, 8, 12, 16][rand(7)]))
        }
        const e = gen(0)
        const split = laneSplit(e, "e", n)
        const m = [2, 4, 8][rand(3)]
        const r = residue(e, m)
        for (let sample = 0; sample < 40; sample++) {
          const env = new Map([["x", rand(40)], ["y", rand(40)]])
          const at = (x: Expr, lane: number) => evalExpr(x, new Map(env).set("e", lane), () => 0)
          if (r !== undefined) expect((((at(e, rand(n)) % m) + m) % m), `residue of ${showExpr(e)} mod ${m}`).toBe(r)
          if (split) for (let lane = 0; lane < n; lane++) expect(at(e, lane), `${showExpr(e)} as base + ${split.k}·e`).toBe(at(split.base, 0) + split.k * lane)
        }
        if (split && split.k !== 0) proven++
      }),
      lawParams(600),
    )
    expect(proven).toBeGreaterThan(0)
  })

  it("auto-bind: elementwise chains, any threads a block", () => {
    fc.assert(
      fc.property(fc.nat(), arbAttrs, picks, (seed, attrs, p) => checkRandomConfig(buildCompute("elementwise", seed), attrs, p, "bind")),
      lawParams(30),
    )
  })

  it("the defaults from the attrs verify within the record's limits (threads, shared bytes, registers) and equal the TE", () => {
    const arbCase = fc.oneof(
      arbComputeCase(COMPUTE_FAMILIES.filter((f) => f !== "conv2d_nchwc")),
      fc.record({ seed: fc.nat(), batch: fc.integer({ min: 0, max: 1 }), m: fc.integer({ min: 1, max: 40 }), n: fc.integer({ min: 2, max: 40 }), k: fc.integer({ min: 1, max: 40 }), epilogue: fc.boolean() }).map((o) => matmulCase(o.seed, o)),
    )
    fc.assert(
      fc.property(arbCase, arbAttrs, (cc, attrs) => {
        const { f, v } = lowerGpu(cc, attrs)
        expect(v.problems).toEqual([])
        assertSimulates(f, cc)
      }),
      lawParams(40),
    )
  })
})
