// Every backend in the table, through the seam alone: its record's target on this host, the
// pipeline's compile → emit → load on its own Device → run, and the Device module's contract
// (memory it owns: reserve, view, write/read, input and output binding, timing). A target whose toolchain
// is missing here is skipped, visibly, with its reason.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { prng } from "../src/ast/graph/arbitrary.js"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node } from "../src/ast/graph/graph.js"
import { tensor } from "../src/ast/graph/tensor.js"
import { cpuAttrs, TARGET_KINDS, type TargetKind } from "../src/ast/target.js"
import { backendOf, BACKENDS } from "../src/backend/index.js"
import { Device } from "../src/device/device.js"
import { compileGraph, emitArtifact, loadArtifact, loadProgram } from "../src/pipeline.js"
import { assertAllClose } from "../laws/support.js"

const rng = prng(5)
const rand = (shape: number[]) => tensor("float32", shape, Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.float(-1, 1)))

// Conv → Relu compiled; ScatterElements (no compute: the fallback, on the host) between them and a
// compiled Add; the model's input read by a compiled kernel and by the last group
const graph = makeGraph({
  opset: 13,
  inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 4, 6, 6] } }],
  outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 4, 6, 6] } }],
  initializers: new Map([
    ["w", rand([4, 4, 3, 3])],
    ["idx", tensor("int64", [1, 4, 1, 6], Float64Array.from({ length: 24 }, (_, k) => k % 6))],
    ["upd", rand([1, 4, 1, 6])],
  ]),
  nodes: [
    node("Conv", ["x", "w"], ["c"], { pads: attr.ints([1, 1, 1, 1]) }),
    node("Relu", ["c"], ["r"]),
    node("ScatterElements", ["r", "idx", "upd"], ["s"], { axis: attr.int(3) }),
    node("Add", ["s", "x"], ["y"]),
  ],
})
const feeds = new Map([["x", rand([1, 4, 6, 6])]])
const want = runGraph(graph, feeds)

const compiling = (Object.keys(BACKENDS) as TargetKind[]).filter((k) => BACKENDS[k].codegen !== undefined)

describe("the backend table", () => {
  it("has one record per target kind, each of its own kind", () => {
    expect(Object.keys(BACKENDS).sort()).toEqual([...TARGET_KINDS].sort())
    for (const k of TARGET_KINDS) expect(BACKENDS[k].kind).toBe(k)
  })

  it("gives each kind's target for a host: the c target is that CPU with the cores asked for, the portable ones their own", () => {
    const host = cpuAttrs({ isa: "avx2", cores: 8 })
    for (const k of TARGET_KINDS) expect(BACKENDS[k].target(host, 2).kind).toBe(k)
    expect(BACKENDS.c.target(host, 2).attrs).toMatchObject({ isa: "avx2", vectorLanes: 8, cores: 2 })
    // wasm's and js's blocked layout is SIMD128's 4 lanes whatever the host
    expect(BACKENDS.wasm.target(host, 2).attrs.vectorLanes).toBe(4)
    expect(BACKENDS.js.target(host, 2).attrs.vectorLanes).toBe(4)
  })
})

describe.each(compiling)("backend %s", (kind) => {
  const backend = backendOf(kind)
  // (a kind that only compiles here, cuda, runs nowhere in this process)
  const missing = backend.unavailable() ?? backend.compileOnly?.()
  it.skipIf(missing !== undefined)(`compiles, emits deterministically, loads on its own device and computes the evaluator's answer${missing ? ` (skipped: ${missing})` : ""}`, async () => {
    const target = backend.target(cpuAttrs({ isa: "avx2" }), 1)
    const program = await Effect.runPromise(compileGraph(graph, target))
    expect(program.kernels.map((k) => k.kind)).toContain("fallback")
    expect(program.kernels.map((k) => k.kind)).toContain("compiled")
    const a = await Effect.runPromise(emitArtifact(program, target))
    const b = await Effect.runPromise(emitArtifact(program, target))
    expect(a.kind).toBe(kind)
    expect([...a.files.keys()]).toEqual([...b.files.keys()])
    for (const [name, bytes] of a.files) expect(b.files.get(name)).toEqual(bytes)
    expect(a.kernels.map((k) => k.name)).toEqual(program.kernels.flatMap((k) => (k.kind === "compiled" ? [k.name] : [])))
    const exec = await Effect.runPromise(loadProgram(program, target))
    try {
      // twice: the reserved buffers are reused across runs, and a run's outputs are the caller's
      const first = exec.run(feeds).get("y")!
      const again = exec.run(feeds).get("y")!
      assertAllClose([first], want, 1e-4, 1e-5)
      assertAllClose([again], want, 1e-4, 1e-5)
      expect(again.data).not.toBe(first.data)
    } finally {
      exec.module.close()
    }
  })

  it.skipIf(missing !== undefined)("writes outputs into the caller's arrays where given: reused across runs, fed back as the input, or of the wrong size", async () => {
    // a transpose straight into the output: written in place over its own input it would read what it wrote
    const transposed = makeGraph({
      opset: 13,
      inputs: [{ name: "x", type: { dtype: "float32", shape: [1, 4, 6, 6] } }],
      outputs: [{ name: "y", type: { dtype: "float32", shape: [1, 4, 6, 6] } }],
      nodes: [node("Transpose", ["x"], ["y"], { perm: attr.ints([0, 1, 3, 2]) })],
    })
    for (const g of [graph, transposed]) {
      const target = backend.target(cpuAttrs({ isa: "avx2" }), 1)
      const exec = await Effect.runPromise(loadProgram(await Effect.runPromise(compileGraph(g, target)), target))
      try {
        const out = new Float32Array(144)
        for (const f of [feeds, new Map([["x", rand([1, 4, 6, 6])]])]) {
          const got = exec.run(f, new Map([["y", out]])).get("y")!
          expect(got.data).toBe(out)
          assertAllClose([got], runGraph(g, f), 1e-4, 1e-5)
        }
        // the output array fed back as the input (and asked for as the output again)
        const x = Float32Array.from(out)
        const got = exec.run(new Map([["x", tensor("float32", [1, 4, 6, 6], out)]]), new Map([["y", out]])).get("y")!
        expect(got.data).toBe(out)
        assertAllClose([got], runGraph(g, new Map([["x", tensor("float32", [1, 4, 6, 6], x)]])), 1e-4, 1e-5)
        expect(() => exec.run(feeds, new Map([["y", new Float32Array(143)]]))).toThrow(/output array 'y'/)
        expect(() => exec.run(feeds, new Map([["y", new Float64Array(144)]]))).toThrow(/output array 'y'/)
        expect(() => exec.run(feeds, new Map([["x", new Float32Array(144)]]))).toThrow(/no output/)
      } finally {
        exec.module.close()
      }
    }
  })

  it.skipIf(missing !== undefined)("its device module owns its memory: views of reserved blocks, host data in and out", async () => {
    const target = backend.target(cpuAttrs(), 1)
    const program = await Effect.runPromise(compileGraph(graph, target))
    const artifact = await Effect.runPromise(emitArtifact(program, target))
    const mod = await Effect.runPromise(
      Effect.gen(function* () {
        const device = yield* Device
        expect(device.kind).toBe(kind)
        return yield* device.load(artifact)
      }).pipe(Effect.provide(backend.codegen!.device(target, {}))),
    )
    try {
      expect([...mod.kernels]).toEqual(artifact.kernels.map((k) => k.name))
      const [b0, b1] = mod.reserve([64, 24])
      const v = mod.view(b0, "float32", 16)
      const w = mod.view(b1, "int32", 6)
      mod.write(v, Float32Array.from({ length: 16 }, (_, k) => k / 2))
      mod.write(w, Int32Array.from([1, -2, 3, -4, 5, -6]))
      expect([...mod.read(v)]).toEqual(Array.from({ length: 16 }, (_, k) => k / 2))
      expect([...mod.read(w)]).toEqual([1, -2, 3, -4, 5, -6])
      // an input's host data is where kernels read it; an output is storage of the reserved size
      const bound = mod.input(v, Float32Array.from({ length: 16 }, () => 7))
      expect([...mod.read(bound)]).toEqual(new Array(16).fill(7))
      expect(mod.read(mod.output(v)).length).toBe(16)
      expect(() => mod.run("no_such_kernel", [])).toThrow(/no_such_kernel/)
      // a kernel timed on buffers of its params' sizes: seconds per call
      const k = artifact.kernels[0]
      const blocks = mod.reserve(k.params.map((p) => 8 * p.elements))
      const secs = mod.time(k.name, k.params.map((p, j) => mod.view(blocks[j], p.dtype, p.elements)), { repeats: 3, minMs: 1 })
      expect(secs).toBeGreaterThan(0)
      expect(secs).toBeLessThan(1)
    } finally {
      mod.close()
    }
  })
})

describe("loadArtifact", () => {
  it("runs a program on whatever Device is in context (a layer the caller chooses)", async () => {
    const target = BACKENDS.js.target(cpuAttrs(), 1)
    const program = await Effect.runPromise(compileGraph(graph, target))
    const artifact = await Effect.runPromise(emitArtifact(program, target))
    const loads: string[] = []
    const jsLayer = BACKENDS.js.codegen!.device(target, {})
    // a device that records what it is asked to load, then loads it on the js device
    const recording = Effect.gen(function* () {
      const inner = yield* Device
      return { kind: inner.kind, load: (a: typeof artifact) => (loads.push(a.kind), inner.load(a)) }
    })
    const exec = await Effect.runPromise(
      Effect.flatMap(recording, (device) => loadArtifact(program, artifact).pipe(Effect.provideService(Device, device))).pipe(Effect.provide(jsLayer)),
    )
    assertAllClose([exec.run(feeds).get("y")!], want, 1e-4, 1e-5)
    expect(loads).toEqual(["js"])
  })

  it("interp compiles nothing: emitArtifact says so as a typed error", async () => {
    const target = BACKENDS.interp.target(cpuAttrs(), 1)
    const e = await Effect.runPromise(Effect.flip(emitArtifact({ graph, fused: { graph, groups: [] }, memory: { storages: [], values: [], plannedBytes: 0, naiveBytes: 0 }, kernels: [] }, target)))
    expect(e._tag).toBe("TargetUnavailableError")
  })
})
