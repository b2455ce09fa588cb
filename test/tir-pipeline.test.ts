// The CPU targets' TIR pipeline as a pass: today's passes in today's order at the default opt level;
// opt level, disabled passes and instruments honoured (by runTirSync, and by lowerGroups given the
// caller's config); verification between passes names the pass that broke what the next assumes.
import { describe, expect, it } from "vitest"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { bindSync } from "../src/ast/graph/infer.js"
import * as S from "../src/ast/schedule/schedule.js"
import { buildCompute } from "../src/ast/te/arbitrary.js"
import { add, c, f32, mul } from "../src/ast/te/expr.js"
import { gemmMicroKernel } from "../src/ast/te/intrinsic.js"
import { at, compute, placeholder, reduceAxis, sum } from "../src/ast/te/tensor.js"
import { mapStmt, printPrimFunc, type PrimFunc } from "../src/ast/tir/tir.js"
import { lowerSync } from "../src/lowering/lower.js"
import { lowerGroups } from "../src/lowering/lower-group.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { flattenStorage } from "../src/lowering/tir/flatten-storage.js"
import { IntrinsicModeError, lowerIntrinsics } from "../src/lowering/tir/lower-intrinsics.js"
import { runTirSync, tirPass, tirSequential } from "../src/lowering/tir/tir-pass.js"
import { fuseOpsSync } from "../src/rewrite/fuse-ops.js"
import type { PassInstrument } from "../src/rewrite/pass.js"

/** The names of the passes that run, in order (the pipeline itself left out). */
const recorder = () => {
  const names: string[] = []
  const instrument: PassInstrument = { before: (pass) => void (pass !== "lowering.CpuPipeline" && names.push(pass)) }
  return { names, instrument }
}

/** A softmax: reductions, allocations, guards once split. */
const softmax = (): PrimFunc => {
  const cc = buildCompute("softmax", 7)
  const s = S.split(S.createSchedule(cc.outputs), "softmax", "softmax.j", { factor: 3 }).schedule
  return lowerSync(s)
}

const errorOf = (f: () => unknown): unknown => {
  try {
    f()
  } catch (e) {
    return e
  }
  throw new Error("expected a failure")
}

describe("lowering.CpuPipeline", () => {
  it("at the default opt level runs today's passes in today's order", () => {
    const { names, instrument } = recorder()
    runTirSync(cpuTirPipeline(), softmax(), { instruments: [instrument] })
    expect(names).toEqual([
      "lowering.Simplify",
      "lowering.PromoteAccumulators",
      "lowering.LoopPartition",
      "lowering.VectorizeLoops",
      "lowering.UnrollLoops",
      "lowering.InjectVirtualThread",
      "lowering.FlattenStorage",
      "lowering.RewriteStorage",
      "lowering.Simplify",
      "lowering.LowerIntrinsics",
    ])
  })

  it.each([
    [0, ["VectorizeLoops", "UnrollLoops", "InjectVirtualThread", "FlattenStorage", "LowerIntrinsics"]],
    [1, ["Simplify", "VectorizeLoops", "UnrollLoops", "InjectVirtualThread", "FlattenStorage", "Simplify", "LowerIntrinsics"]],
    [2, ["Simplify", "PromoteAccumulators", "VectorizeLoops", "UnrollLoops", "InjectVirtualThread", "FlattenStorage", "RewriteStorage", "Simplify", "LowerIntrinsics"]],
  ])("at opt level %i runs the passes of that level and below", (optLevel, want) => {
    const { names, instrument } = recorder()
    runTirSync(cpuTirPipeline(), softmax(), { optLevel, instruments: [instrument] })
    expect(names).toEqual(want.map((n) => `lowering.${n}`))
  })

  it("skips a disabled pass", () => {
    const { names, instrument } = recorder()
    const f = runTirSync(cpuTirPipeline(), softmax(), { disabled: new Set(["lowering.LoopPartition"]), instruments: [instrument] })
    expect(names).not.toContain("lowering.LoopPartition")
    expect(printPrimFunc(f)).toContain("if ")
    expect(printPrimFunc(runTirSync(cpuTirPipeline(), softmax()))).not.toContain("if ")
  })

  it("disabling a pass the emitters need fails at the pipeline's end, saying what they assume", () => {
    const e = errorOf(() => runTirSync(cpuTirPipeline(), softmax(), { disabled: new Set(["lowering.FlattenStorage"]) }))
    expect(e).toMatchObject({ _tag: "VerifyError", pass: "lowering.CpuPipeline" })
    expect((e as Error).message).toMatch(/storage is not flattened: rank 2 .*what the stage after lowering.CpuPipeline assumes/)
  })

  it("a pass that breaks what it ensures is named by the verifier after it", () => {
    // a FlattenStorage that forgets the allocations
    const real = flattenStorage()
    const broken = tirPass(
      "lowering.FlattenStorage",
      0,
      (f) => {
        const allocs = new Map<string, readonly number[]>()
        mapStmt(f.body, (x) => (x.kind === "allocate" ? void allocs.set(x.buffer.name, x.buffer.shape) : undefined))
        const out = runTirSync(real, f)
        return { ...out, body: mapStmt(out.body, (x) => (x.kind === "allocate" ? { ...x, buffer: { ...x.buffer, shape: allocs.get(x.buffer.name)! } } : undefined)) }
      },
      real.ensures,
    )
    const e = errorOf(() => runTirSync(tirSequential("lowering.Test", [broken]), softmax()))
    expect(e).toMatchObject({ _tag: "VerifyError", pass: "lowering.FlattenStorage" })
    expect((e as Error).message).toBe("after pass lowering.FlattenStorage: primfunc main: allocate 'exp': storage is not flattened: rank 2 (run lowering.FlattenStorage)")
  })

  it("an ill-formed input is named as the pipeline's input", () => {
    const B = placeholder("B", [4])
    const f = lowerSync(S.createSchedule([compute("C", [4], (i) => add(at(B, i), f32(1)))]))
    const bad: PrimFunc = { ...f, body: mapStmt(f.body, (x) => (x.kind === "store" ? { ...x, indices: [c(0), c(0)] } : undefined)) }
    const e = errorOf(() => runTirSync(cpuTirPipeline(), bad))
    expect(e).toMatchObject({ _tag: "VerifyError", pass: "lowering.CpuPipeline", where: "its input: primfunc main: store to 'C'" })
  })

  it("a typed pass failure comes through as it is; verified, the ill-formed input is caught first", () => {
    const A = placeholder("A", [2, 2])
    const k = reduceAxis(2, "k")
    const C = compute("C", [2, 2], (i, j) => sum(mul(at(A, i, k.var), at(A, k.var, j)), [k]))
    const s = S.createSchedule([C])
    const f = lowerSync(S.tensorize(s, "C", s.stages.get("C")!.leaf[0], gemmMicroKernel(2, 2, 2)))
    // the declaration says the reduction is stored, not accumulated: LowerIntrinsics cannot lower it
    const stored: PrimFunc = { ...f, body: mapStmt(f.body, (x) => (x.kind === "intrinsic" ? { ...x, intrin: { ...x.intrin, mode: "store" } } : undefined)) }
    expect(errorOf(() => runTirSync(lowerIntrinsics, stored, { verify: false }))).toBeInstanceOf(IntrinsicModeError)
    expect(errorOf(() => runTirSync(cpuTirPipeline(), stored))).toMatchObject({ _tag: "VerifyError", pass: "lowering.CpuPipeline", reason: "a reduction must be an update" })
    expect(printPrimFunc(runTirSync(cpuTirPipeline(), f))).not.toContain("gemm_")
  })
})

describe("lowerGroups", () => {
  const graph = () => {
    const f32t = (shape: number[]) => ({ dtype: "float32" as const, shape })
    const g = makeGraph({
      opset: 13,
      inputs: [{ name: "x", type: f32t([3, 10]) }],
      outputs: [{ name: "y", type: f32t([3, 10]) }],
      nodes: [node("Softmax", ["x"], ["s"]), node("Relu", ["s"], ["y"])],
    })
    return fuseOpsSync(bindSync(g))
  }

  it("runs the TIR pipeline under the config it is given (the caller's, inside compilation)", () => {
    const { names, instrument } = recorder()
    const kernels = lowerGroups(graph(), cpuTirPipeline(), undefined, { optLevel: 0, instruments: [instrument] })
    expect(kernels.every((k) => k.kind === "compiled")).toBe(true)
    expect(names.length).toBeGreaterThan(0)
    expect(names).not.toContain("lowering.Simplify")
    expect(new Set(names)).toEqual(new Set(["lowering.VectorizeLoops", "lowering.UnrollLoops", "lowering.InjectVirtualThread", "lowering.FlattenStorage", "lowering.LowerIntrinsics"]))
  })

  it("with no config runs the pipeline it is given at opt level 3", () => {
    const fused = graph()
    const printed = (ks: ReturnType<typeof lowerGroups>) => ks.map((k) => (k.kind === "compiled" ? printPrimFunc(k.func) : k.reason)).join("\n")
    expect(printed(lowerGroups(fused, cpuTirPipeline()))).toBe(printed(lowerGroups(fused, cpuTirPipeline(), undefined, { optLevel: 3 })))
  })
})

describe("lowering.FlattenStorage", () => {
  // laws/lowering/tir/flatten-storage.law.ts, "is idempotent": a second run took a flattened
  // param (rank 1, with a view) for a tensor of that flat shape and overwrote its view, so the
  // function's outputs came back flat ([4] for a [1, 4] output) and a padded view lost its strides.
  it("a second run keeps the params' views (what callers see)", () => {
    const once = runTirSync(flattenStorage(), softmax())
    const twice = runTirSync(flattenStorage(), once)
    expect(twice.params).toEqual(once.params)
    expect(once.params.every((p) => p.shape.length === 1 && p.view !== undefined && p.view.shape.length === 2)).toBe(true)
  })
})
