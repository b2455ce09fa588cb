// The cuda target's rules: the auto-bind schedule (src/lowering/templates/gpu) of every compute
// family, lowered through the cuda TIR pipeline and split into launches, evaluates equal to the TE
// on random shapes and on GPU records of random block sizes (so splits that do not divide leave
// guards), and every launch it makes passes the static GPU checks (threads per block, shared
// memory, vector width, uniform barriers).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { arbComputeCase, buildCompute, COMPUTE_FAMILIES } from "../../src/ast/te/arbitrary.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { cudaAttrsForArch, type CudaAttrs } from "../../src/ast/target.js"
import { splitLaunches } from "../../src/emit/cuda/launch.js"
import { sharedBytes, verifyLaunch } from "../../src/emit/cuda/verify.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { cudaSchedules } from "../../src/lowering/templates/gpu/index.js"
import { cudaTirPipeline } from "../../src/lowering/tir/cuda-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import type { FusedGroup } from "../../src/rewrite/fuse-ops.js"
import { assertAllClose, lawParams } from "../support.js"
import { evaluateLaunches } from "../support-cuda.js"
import { sharedTiledMatmul } from "../../src/ast/te/arbitrary-schedule.js"

/**
 * A GPU record with small warps, few resident threads and small blocks (the cases' outputs are
 * small): blocks of 4 to 256 threads, most not dividing the outputs, some at the block limit.
 */
const arbAttrs = (): fc.Arbitrary<CudaAttrs> =>
  fc.tuple(fc.constantFrom("sm_80", "sm_90"), fc.constantFrom(4, 8, 32), fc.constantFrom(64, 256, 2048), fc.constantFrom(32, 128, 1024)).map(([arch, warpSize, resident, block]) => ({
    ...cudaAttrsForArch(arch),
    warpSize,
    maxThreadsPerMultiprocessor: resident,
    maxThreadsPerBlock: block,
    maxBlockDim: [block, block, 64] as const,
  }))

const GROUP = { id: 0 } as unknown as FusedGroup

describe("cuda rules: auto-bind", () => {
  it("every family's auto-bound schedule, through the cuda TIR pipeline and its launches, evaluates equal to the TE; every launch within the GPU's limits", () => {
    fc.assert(
      fc.property(arbComputeCase(COMPUTE_FAMILIES), arbAttrs(), (cc, attrs) => {
        const s = cudaSchedules(attrs)(cc.outputs, baseSchedule(cc.outputs), GROUP)
        const f = runTirSync(cudaTirPipeline(attrs), lowerSync(s, "k0"))
        const k = splitLaunches(f)
        for (const l of k.launches) verifyLaunch(l, attrs)
        // every root stage with outputs to spread is spread over blocks and threads
        expect(k.launches.some((l) => l.grid[0] * l.block[0] > 1) || cc.outputs.every((o) => o.shape.reduce((a, b) => a * b, 1) === 1)).toBe(true)
        const got = evaluateLaunches(k, cc.inputs)
        assertAllClose(
          cc.outputs.map((o) => got.get(o.name)!),
          evaluateTE(cc.outputs, cc.inputs),
          1e-4,
          1e-5,
        )
      }),
      lawParams(60),
    )
  })
})

describe("cuda launches of shared-memory schedules", () => {
  it("a matmul tiled over blocks and threads, A and B fetched cooperatively into shared memory at each reduction step: its launches evaluate equal to the TE, the shared tiles inside the launch, within the limits", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1 << 30 }), fc.constantFrom(2, 4, 8), fc.constantFrom(2, 4), (seed, tile, kt) => {
        const cc = buildCompute("matmul", seed)
        const s = sharedTiledMatmul(cc.outputs, tile, kt)
        const attrs = cudaAttrsForArch("sm_90")
        const launches = splitLaunches(runTirSync(cudaTirPipeline(attrs), lowerSync(s, "k0")))
        // the tiles are the block's, not workspace in global memory that every block would share
        expect(launches.workspace.filter((b) => b.name.includes("shared"))).toEqual([])
        for (const l of launches.launches) {
          verifyLaunch(l, attrs)
          expect(sharedBytes(l)).toBeGreaterThan(0)
        }
        const got = evaluateLaunches(launches, cc.inputs)
        assertAllClose(cc.outputs.map((o) => got.get(o.name)!), evaluateTE(cc.outputs, cc.inputs), 1e-4, 1e-5)
      }),
      lawParams(30),
    )
  })
})
