// `restrict` per kernel on the c target: only a kernel two of whose args share storage (an
// in-place output the memory plan made) is declared without it. It had been all or nothing: one
// in-place kernel anywhere took `restrict` from every kernel of the program, gcc then kept a
// scalar-written register tile in scalars, and a 1×1 conv MobileNetV3's tuner had measured at
// 0.25 ms (with `restrict`, as candidates are rendered) ran 4 ms in the network.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbGraphCase } from "../src/ast/graph/arbitrary.js"
import { BACKENDS } from "../src/backend/index.js"
import { hostCpu } from "../src/device/host.js"
import { aliasedKernels, artifactText, compiledKernels, type Program } from "../src/lowering/program.js"
import { compileGraph, emitArtifact } from "../src/pipeline.js"
import { targetSettings } from "../src/cli/targets.js"
import { lawParams } from "../laws/support.js"
import { NetBuilder } from "../src/zoo/builder.js"
import { convBnAct, reluAct, sigmoid, squeezeExcite } from "../src/zoo/layers.js"

const target = BACKENDS.c.target({ ...hostCpu(), isa: "avx512", vectorLanes: 16 }, 1)

/** Does the kernel's definition in the artifact (the first kernel's, for an alias of the same code) declare its params restrict? */
const restrictOf = (source: string, name: string): boolean => {
  const lines = source.split("\n")
  const def = lines.find((l) => l.startsWith(`void ${name}(`) && l.endsWith("{"))
  if (def) return def.includes("restrict")
  const alias = lines.map((l) => (l.startsWith(`void ${name}(`) ? /__attribute__\(\(alias\("(\w+)"\)\)\)/.exec(l)?.[1] : undefined)).find((x) => x !== undefined)
  if (!alias) throw new Error(`no definition of ${name}`)
  return restrictOf(source, alias)
}

/** Each compiled kernel's args share storage? — and its definition's restrict, from the emitted c artifact. */
const kernelsOf = (program: Program) => {
  const artifact = BACKENDS.c.codegen!.emit(program, target, {})
  const source = [...artifact.files.keys()].filter((f) => f.endsWith(".c")).map((f) => artifactText(artifact, f)!).join("\n")
  const storageOf = new Map(program.memory.values.map((v) => [v.value, v.storage] as const))
  const aliased = aliasedKernels(program)
  return compiledKernels(program).map((k) => {
    const ids = k.args.map((a) => storageOf.get(a)).filter((x): x is number => x !== undefined)
    return { name: k.func.name, ops: program.fused.groups.find((g) => g.id === k.group)!.ops.join("+"), shares: new Set(ids).size !== ids.length, aliased: aliased.has(k.func.name), restrict: restrictOf(source, k.func.name) }
  })
}

/** A conv then a squeeze-excite block (torchvision's), whose gate multiply the plan puts in place of the conv's output. */
const seBlock = () => {
  const b = new NetBuilder(7, 17)
  const x = b.input("x", { dtype: "float32", shape: [1, 16, 14, 14] })
  const y = convBnAct(b, x, "c0", { cin: 16, cout: 32, k: 1 }, reluAct)
  const z = squeezeExcite(b, y, "se", 32, 8, reluAct, sigmoid)
  const out = convBnAct(b, z, "c1", { cin: 32, cout: 16, k: 1 })
  return b.build("se", [{ name: out, type: { dtype: "float32", shape: [1, 16, 14, 14] } }])
}

describe("c: restrict per kernel", () => {
  it("a squeeze-excite block: its in-place gate multiply alone drops restrict; the convs keep it", async () => {
    const program = await Effect.runPromise(compileGraph(seBlock(), target, { optLevel: 3 }))
    const ks = kernelsOf(program)
    const inPlace = ks.filter((k) => k.shares)
    expect(inPlace.map((k) => k.ops)).toEqual(["Mul"])
    for (const k of ks) expect({ name: k.name, aliased: k.aliased, restrict: k.restrict }).toEqual({ name: k.name, aliased: k.shares, restrict: !k.shares })
    expect(ks.filter((k) => k.ops.startsWith("Conv") && k.restrict).length).toBeGreaterThanOrEqual(2)
  }, 60_000)

  it("random graphs: every kernel whose args do not share storage is declared restrict, every one whose args do is not", async () => {
    await fc.assert(
      fc.asyncProperty(arbGraphCase({ maxNodes: 12 }), async ({ graph }) => {
        const program = await Effect.runPromise(compileGraph(graph, target, { optLevel: 3 }).pipe(Effect.orElseSucceed(() => undefined)))
        if (!program) return
        for (const k of kernelsOf(program)) expect({ name: k.name, aliased: k.aliased, restrict: k.restrict }).toEqual({ name: k.name, aliased: k.shares, restrict: !k.shares })
      }),
      lawParams(30),
    )
  }, 60_000)

  it("cuda: the same — the in-place gate multiply's launches drop __restrict__, every other kernel's keep it", async () => {
    const cuda = targetSettings("cuda", 1, { cudaArch: "sm_90" }).target
    const program = await Effect.runPromise(compileGraph(seBlock(), cuda))
    const artifact = await Effect.runPromise(emitArtifact(program, cuda))
    const source = [...artifact.files.keys()].filter((f) => f.endsWith(".cu")).map((f) => artifactText(artifact, f)!).join("\n")
    const aliased = aliasedKernels(program)
    expect(aliased.size).toBe(1)
    // each launch's definition: `extern "C" __global__ void [__launch_bounds__(N)] <kernel>[_suffix](…) {`
    const defs = source.split("\n").filter((l) => l.startsWith('extern "C" __global__'))
    expect(defs.length).toBeGreaterThanOrEqual(compiledKernels(program).length)
    for (const d of defs) {
      const name = /__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(/.exec(d)![1]
      const kernel = compiledKernels(program).map((k) => k.func.name).find((k) => name === k || name.startsWith(`${k}_`))!
      expect({ name, restrict: d.includes("__restrict__") }).toEqual({ name, restrict: !aliased.has(kernel) })
    }
  }, 60_000)
})
