// The c target's split build: one unit per distinct kernel code (kernels of the same code are
// aliases of the first), each compiled to an object cached by its content, then one link. Proved
// through the cache, never by timing: a second build of the same units compiles nothing; a build
// after one kernel changed compiles that kernel's unit alone when it is large (one new object in
// the cache), or the batch it is in when it is small (small units are compiled several to a gcc
// run: one new object, its members compiled, the other batches not); a library whose kernels share
// one unit, or whose units share one object, runs each of them right; units that each define the
// same helper (the int8 dots) compile in one batch.
import { Effect } from "effect"
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { paramsOf } from "../src/ast/tir/analysis.js"
import type { PrimFunc } from "../src/ast/tir/tir.js"
import { batchUnits, buildCUnits, C_BATCH, compilerAvailable, defaultCBuildConfig, objectKey } from "../src/device/c/build.js"
import { loadC } from "../src/device/c/load.js"
import { emitC } from "../src/emit/c/emit.js"
import { baseSchedule } from "../src/lowering/lower-group.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { assertAllClose } from "../laws/support.js"
import { callKernel } from "../laws/support-c.js"
import { hostCpu } from "../src/device/host.js"
import { C_GOLDEN_CASES, GOLDEN_CASES, goldenFunc } from "../scripts/update-goldens.js"

const HAVE_GCC = compilerAvailable()
const cases = GOLDEN_CASES.map((mk) => mk())
const caseNamed = (name: string) => cases.find((g) => g.name === name)!
const dense = caseNamed("dense")
const softmax = caseNamed("softmax")
const cacheDir = mkdtempSync(path.join(os.tmpdir(), "tessera-c-units-"))
/** Every unit large (at or over the batch threshold): each compiled alone. */
const config = { ...defaultCBuildConfig(), cacheDir, jobs: 2, batch: { below: 0, size: C_BATCH.size } }
const objectsIn = (dir: string) => readdirSync(path.join(dir, "obj")).filter((f) => f.endsWith(".o")).sort()
const objects = () => objectsIn(cacheDir)
afterAll(() => rmSync(cacheDir, { recursive: true, force: true }))

/** A kernel of a case under the case's schedule or the base one (as tuning would give it another). */
const lowered = (g: typeof dense, schedule: "golden" | "base", name = g.name): PrimFunc =>
  schedule === "golden" ? { ...goldenFunc(g), name } : { ...runTirSync(cpuTirPipeline(), lowerSync(baseSchedule(g.outputs))), name }

/** dense twice under two names (one code: one workload, tuned as one), and softmax. */
const program = (denseSchedule: "golden" | "base", softmaxSchedule: "golden" | "base" = "golden"): PrimFunc[] => [
  lowered(dense, denseSchedule),
  lowered(softmax, softmaxSchedule),
  lowered(dense, denseSchedule, "dense_again"),
]

describe("c target: one unit per distinct kernel code", () => {
  it("kernels of the same code share one unit, the others aliases of the first; the split is deterministic", () => {
    const e = emitC(program("golden"))
    expect(e.units.map((u) => [u.file, u.kernels])).toEqual([
      ["tessera_runtime.c", []],
      ["dense.c", ["dense", "dense_again"]],
      ["softmax.c", ["softmax"]],
    ])
    expect(e.units[1].source).toContain('void dense_again(const float* b0, const float* b1, float* b2) __attribute__((alias("dense")));')
    expect(emitC(program("golden"))).toEqual(e)
    // another code for one of them: units of their own
    const split = emitC([...program("golden"), lowered(dense, "base", "dense_base")])
    expect(split.units.map((u) => u.kernels)).toEqual([[], ["dense", "dense_again"], ["softmax"], ["dense_base"]])
  })

  it.skipIf(!HAVE_GCC)("large units: a rebuild compiles nothing; after one kernel changed, one object is compiled; every alias runs right", async () => {
    const first = emitC(program("golden"))
    const built = await Effect.runPromise(buildCUnits(first, config))
    expect(built.objects.every((o) => o.compiled)).toBe(true)
    expect(objects()).toEqual(first.units.map((u) => `${objectKey(first.prelude.source, u.source, config)}.o`).sort())
    const again = await Effect.runPromise(buildCUnits(emitC(program("golden")), config))
    expect(again).toEqual({ library: built.library, objects: built.objects.map((o) => ({ ...o, compiled: false })) })
    // softmax gets another schedule: its unit alone is compiled again
    const second = emitC(program("golden", "base"))
    const rebuilt = await Effect.runPromise(buildCUnits(second, config))
    expect(rebuilt.objects.filter((o) => o.compiled).map((o) => o.file)).toEqual(["softmax.c"])
    expect(objects().length).toBe(first.units.length + 1)
    expect(rebuilt.library).not.toBe(built.library)
    // so does dense's, which both dense kernels share
    const third = emitC(program("base", "base"))
    const rebuilt2 = await Effect.runPromise(buildCUnits(third, config))
    expect(rebuilt2.objects.filter((o) => o.compiled).map((o) => o.file)).toEqual(["dense.c"])
    expect(objects().length).toBe(first.units.length + 2)
    for (const [funcs, library] of [[program("golden"), built.library], [program("base", "base"), rebuilt2.library]] as const) {
      const mod = await Effect.runPromise(loadC(library, funcs.map((f) => ({ name: f.name, params: paramsOf(f) }))))
      for (const f of funcs) {
        const g = f.name === "softmax" ? softmax : dense
        const outs = callKernel(mod.kernels.get(f.name)!, f, g.inputs)
        assertAllClose(g.outputs.map((o) => outs.get(o.name)!), evaluateTE(g.outputs, g.inputs), 1e-4, 1e-5)
      }
    }
  })

  it.skipIf(!HAVE_GCC)("small units in batches (two to a run): after one kernel changed, its batch alone is compiled; each batch's object runs right", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-c-units-batch-"))
    const batched = { ...config, cacheDir: dir, batch: { below: C_BATCH.below, size: 2 } }
    const runs = async (library: string, funcs: readonly PrimFunc[]) => {
      const mod = await Effect.runPromise(loadC(library, funcs.map((f) => ({ name: f.name, params: paramsOf(f) }))))
      for (const f of funcs) {
        const g = f.name === "softmax" ? softmax : dense
        const outs = callKernel(mod.kernels.get(f.name)!, f, g.inputs)
        assertAllClose(g.outputs.map((o) => outs.get(o.name)!), evaluateTE(g.outputs, g.inputs), 1e-4, 1e-5)
      }
    }
    try {
      const first = emitC(program("golden"))
      // the runtime (with the thread pool) large: alone; the two kernels small: one batch
      expect(first.units.map((u) => Buffer.byteLength(u.source) < C_BATCH.below)).toEqual([false, true, true])
      const built = await Effect.runPromise(buildCUnits(first, batched))
      const keys = first.units.map((u) => objectKey(first.prelude.source, u.source, batched))
      const pair = batchUnits(first.units.map((u, k) => ({ ...u, key: keys[k] })), batched.batch)[1].key
      expect(built.objects.map((o) => [o.file, o.object, o.compiled])).toEqual([
        ["tessera_runtime.c", keys[0], true],
        ["dense.c", pair, true],
        ["softmax.c", pair, true],
      ])
      expect(objectsIn(dir)).toEqual([keys[0], pair].map((k) => `${k}.o`).sort())
      await runs(built.library, program("golden"))
      const again = await Effect.runPromise(buildCUnits(emitC(program("golden")), batched))
      expect(again.objects.filter((o) => o.compiled)).toEqual([])
      // softmax changed: its batch (with dense) alone, not the runtime
      const second = await Effect.runPromise(buildCUnits(emitC(program("golden", "base")), batched))
      expect(second.objects.filter((o) => o.compiled).map((o) => o.file)).toEqual(["dense.c", "softmax.c"])
      expect(objectsIn(dir).length).toBe(3)
      // dense changed too: that batch again, the runtime's object kept
      const third = await Effect.runPromise(buildCUnits(emitC(program("base", "base")), batched))
      expect(third.objects.filter((o) => o.compiled).map((o) => o.file)).toEqual(["dense.c", "softmax.c"])
      expect(objectsIn(dir).length).toBe(4)
      await runs(third.library, program("base", "base"))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it.skipIf(!HAVE_GCC || !hostCpu().vnni)("units that each define the same helper (the int8 dots) compile in one batch and compute what their TE says", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-c-units-int8-"))
    try {
      const cases = C_GOLDEN_CASES.map((mk) => mk())
      const funcs = cases.map(goldenFunc)
      const e = emitC(funcs)
      expect(e.units.filter((u) => u.source.includes("void tessera_vnni_dot_px_16x4(")).length).toBeGreaterThan(1)
      const built = await Effect.runPromise(buildCUnits(e, { ...config, cacheDir: dir, batch: { below: Infinity, size: e.units.length } }))
      expect(new Set(built.objects.map((o) => o.object)).size).toBe(1)
      const mod = await Effect.runPromise(loadC(built.library, funcs.map((f) => ({ name: f.name, params: paramsOf(f) }))))
      cases.forEach((g, k) => {
        const outs = callKernel(mod.kernels.get(g.name)!, funcs[k], g.inputs)
        expect(Array.from(outs.get(g.outputs[0].name)!.data as ArrayLike<number>)).toEqual(Array.from(evaluateTE(g.outputs, g.inputs)[0].data as ArrayLike<number>))
      })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it.skipIf(!HAVE_GCC)("a unit that does not compile fails the build with gcc's message, and leaves no object", async () => {
    const e = emitC([goldenFunc(dense)])
    const broken = { ...e, units: e.units.map((u) => (u.file === "dense.c" ? { ...u, source: `${u.source}\nthis is not C;\n` } : u)) }
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-c-units-broken-"))
    try {
      const r = await Effect.runPromise(Effect.flip(buildCUnits(broken, { ...config, cacheDir: dir })))
      expect(r._tag).toBe("CompileError")
      expect(r._tag === "CompileError" && r.stderr).toMatch(/dense\.c/)
      expect(readdirSync(path.join(dir, "obj")).filter((f) => f.endsWith(".o")).length).toBeLessThanOrEqual(1) // the runtime's, at most
      expect(readdirSync(dir).filter((f) => f.startsWith("build-"))).toEqual([])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
