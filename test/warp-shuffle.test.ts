// The warp shuffle statement (CUDA's __shfl_down_sync) as the TIR evaluator answers it, lane by
// lane, and as the cuda emitter's static check admits it: within segments of `width` lanes, a lane
// reads the one `offset` above it (its own past the segment); a lane of the mask that does not
// arrive, a lane outside the mask that does, or a read of a lane outside the mask is an error; a
// shuffle under a condition that splits a warp is a GpuLimitError before anything runs.
import { describe, expect, it } from "vitest"
import { fromArray } from "../src/ast/graph/tensor.js"
import { c, eq, floormod, lt, read, v, type Expr } from "../src/ast/te/expr.js"
import { cudaAttrs } from "../src/ast/target.js"
import { evaluatePrimFunc } from "../src/ast/tir/evaluate.js"
import type { PrimFunc, Stmt } from "../src/ast/tir/tir.js"
import { splitLaunches } from "../src/emit/cuda/launch.js"
import { verifyLaunch } from "../src/emit/cuda/verify.js"

const T = 64
const t = v("t")
/** Y[t] = shfl_down(X[t], offset, width, mask) for the T threads of one block, the shuffle under `guard` where given. */
const shuffleFunc = (offset: number, width: number, mask: number, guard?: (t: Expr) => Expr): PrimFunc => {
  const sh: Stmt = { kind: "shuffle", buffer: "s", indices: [c(0)], value: read("X", [t], "float32"), offset, width, mask }
  const body: Stmt = {
    kind: "seq",
    body: [guard ? { kind: "if", cond: guard(t), then: sh } : sh, { kind: "store", buffer: "Y", indices: [t], value: read("s", [c(0)], "float32") }],
  }
  return {
    name: "k",
    params: [
      { name: "X", dtype: "float32", shape: [T], scope: "global" },
      { name: "Y", dtype: "float32", shape: [T], scope: "global" },
    ],
    body: {
      kind: "for",
      var: v("b"),
      min: c(0),
      extent: c(1),
      forKind: "thread",
      thread: "blockIdx.x",
      body: { kind: "for", var: t, min: c(0), extent: c(T), forKind: "thread", thread: "threadIdx.x", body: { kind: "allocate", buffer: { name: "s", dtype: "float32", shape: [1], scope: "local" }, body } },
    },
  }
}
const X = fromArray("float32", [T], Array.from({ length: T }, (_, i) => 100 + i))
const run = (f: PrimFunc) => Array.from(evaluatePrimFunc(f, new Map([["X", X]])).get("Y")!.data)

describe("warp shuffles (cuda-sim and the static check)", () => {
  it("each lane reads the lane offset above it within its segment of width lanes, its own past the segment", () => {
    expect(run(shuffleFunc(4, 16, 0xffffffff))).toEqual(Array.from({ length: T }, (_, i) => 100 + ((i % 16) + 4 < 16 ? i + 4 : i)))
    expect(run(shuffleFunc(16, 32, 0xffffffff))).toEqual(Array.from({ length: T }, (_, i) => 100 + ((i % 32) + 16 < 32 ? i + 16 : i)))
  })

  it("a lane the mask names that does not arrive, a lane outside the mask that does, a read outside the mask: errors", () => {
    expect(() => run(shuffleFunc(1, 32, 0xffffffff, (x) => lt(x, c(48))))).toThrow(/lane 16, named by the mask 0xffffffff .* did not reach it/)
    expect(() => run(shuffleFunc(1, 32, 0x7fffffff))).toThrow(/lane 31 shuffles .* the mask 0x7fffffff leaves it out/)
    expect(() => run(shuffleFunc(8, 32, 0x0000ffff, (x) => lt(floormod(x, c(32)), c(16))))).toThrow(/lane 8 reads lane 16 .* outside its mask 0xffff/)
  })

  it("the static check: whole warps under a guard pass, a condition that splits a warp is refused", () => {
    const attrs = cudaAttrs("9.0", 132)
    for (const l of splitLaunches(shuffleFunc(1, 32, 0xffffffff, (x) => lt(x, c(32)))).launches) expect(() => verifyLaunch(l, attrs)).not.toThrow()
    for (const l of splitLaunches(shuffleFunc(1, 32, 0xffffffff, (x) => eq(floormod(x, c(2)), c(0)))).launches)
      expect(() => verifyLaunch(l, attrs)).toThrow(/uniformShuffle|splits a warp/)
  })
})
