// The packed program (what the esbuild plugin's modules carry): packing what unpacking gave gives
// the same bytes, and the executor runs the unpacked program as it runs the compiled one.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { makeTarget } from "../src/ast/target.js"
import { randomTensor } from "../src/cli/inputs.js"
import { compileGraph, emitArtifact, loadArtifact } from "../src/pipeline.js"
import { wasmDeviceLayer } from "../src/device/wasm/node.js"
import { packProgram, unpackProgram, PackedProgramError } from "../src/web/packed-program.js"
import { zooGraph } from "../src/zoo/index.js"

describe("the packed program", () => {
  it("round-trips to the same bytes and runs as the compiled program does", async () => {
    const target = makeTarget("wasm", { isa: "simd128" })
    const program = await Effect.runPromise(compileGraph(zooGraph("mlp"), target))
    const bytes = packProgram(program)
    const unpacked = unpackProgram(bytes)
    expect(Buffer.compare(packProgram(unpacked), bytes)).toBe(0)
    const artifact = await Effect.runPromise(emitArtifact(program, target))
    const run = async (p: Parameters<typeof loadArtifact>[0]) => {
      const ex = await Effect.runPromise(loadArtifact(p, artifact).pipe(Effect.provide(wasmDeviceLayer())))
      const feeds = new Map(program.graph.inputs.map((i, k) => [i.name, randomTensor(i.type.dtype, i.type.shape as number[], 3, k)] as const))
      return Array.from(ex.run(feeds).get(program.graph.outputs[0].name)!.data)
    }
    expect(await run(unpacked)).toEqual(await run(program))
  }, 60_000)

  it("refuses bytes that are not a packed program", () => {
    expect(() => unpackProgram(new Uint8Array(64))).toThrow(PackedProgramError)
    const bytes = packProgram(unpackProgram(packProgram({ graph: zooGraph("mlp"), fused: { groups: [] }, memory: { storages: [], values: [], plannedBytes: 0, naiveBytes: 0 }, kernels: [] })))
    bytes[4] = 9
    expect(() => unpackProgram(bytes)).toThrow(/version 9/)
  })
})
