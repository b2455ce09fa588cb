// The TIR verifier, Before / Expected: a well-formed function passes; each kind of ill-formed one,
// and each fact a point in a pipeline may expect, is reported by name (where, and what).
import { describe, expect, it } from "vitest"
import { add, c, f32, read, v, type Expr } from "../src/ast/te/expr.js"
import { gemmMicroKernel } from "../src/ast/te/intrinsic.js"
import { reduceAxis, sum } from "../src/ast/te/tensor.js"
import { seq, type Buffer, type ForKind, type PrimFunc, type Stmt } from "../src/ast/tir/tir.js"
import { verifyPrimFunc, type TirExpect } from "../src/ast/tir/verify.js"

const buf = (name: string, shape: number[], extra: Partial<Buffer> = {}): Buffer => ({ name, dtype: "float32", shape, scope: "global", ...extra })
const i = v("i")
const j = v("j")
const loop = (x: typeof i, extent: number | Expr, body: Stmt, forKind: ForKind = "serial", extra: object = {}): Stmt => ({
  kind: "for",
  var: x,
  min: c(0),
  extent: typeof extent === "number" ? c(extent) : extent,
  forKind,
  body,
  ...extra,
})
const store = (buffer: string, indices: Expr[], value: Expr): Stmt => ({ kind: "store", buffer, indices, value })
const A = (...idx: Expr[]) => read("A", idx, "float32")
const fn = (body: Stmt, params = [buf("A", [4, 8]), buf("B", [4, 8])]): PrimFunc => ({ name: "main", params, body })

/** B = A + 1 over a 4×8 nest, with a local row buffer. */
const wellFormed = fn(
  loop(
    i,
    4,
    seq([
      {
        kind: "allocate",
        buffer: buf("T", [8], { scope: "local" }),
        body: seq([loop(j, 8, store("T", [j], add(A(i, j), f32(1)))), loop(j, 8, store("B", [i, j], read("T", [j], "float32")))]),
      },
    ]),
  ),
)

const problem = (f: PrimFunc, expect: TirExpect = {}) => {
  const p = verifyPrimFunc(f, expect)
  return p && `${p.where}: ${p.reason}`
}

describe("verifyPrimFunc: well-formedness", () => {
  it("a well-formed function passes", () => {
    expect(problem(wellFormed)).toBeUndefined()
  })

  it.each<[string, PrimFunc, string]>([
    ["a store to a buffer that is neither a param nor allocated", fn(loop(i, 4, store("C", [i, c(0)], f32(0)))), "primfunc main: store to 'C': buffer 'C' is neither a param nor allocated around the access"],
    [
      "a read of a buffer allocated in a sibling scope",
      fn(seq([{ kind: "allocate", buffer: buf("T", [8]), body: loop(j, 8, store("T", [j], f32(0))) }, loop(j, 8, store("B", [c(0), j], read("T", [j], "float32")))])),
      "primfunc main: store to 'B': read of 'T': buffer 'T' is neither a param nor allocated around the access",
    ],
    ["an access with fewer indices than the buffer's rank", fn(loop(i, 4, store("B", [i], f32(0)))), "primfunc main: store to 'B': 'B' has rank 2, accessed with 1 index"],
    ["a variable used outside its loop", fn(seq([loop(i, 4, store("B", [i, c(0)], f32(0))), store("B", [i, c(1)], f32(0))])), "primfunc main: store to 'B': variable 'i' is used where no loop or let defines it"],
    ["a loop variable defined again inside its loop", fn(loop(i, 4, loop(i, 8, store("B", [i, i], f32(0))))), "primfunc main: for i: variable 'i' is defined again inside its own scope"],
    ["a loop bound that reads an undefined variable", fn(loop(i, v("n"), store("B", [i, c(0)], f32(0)))), "primfunc main: for i: extent: variable 'n' is used where no loop or let defines it"],
    ["a loop bound of a float dtype", fn(loop(i, f32(4), store("B", [i, c(0)], f32(0)))), "primfunc main: for i: extent of dtype float32"],
    ["a negative extent", fn(loop(i, -1, store("B", [i, c(0)], f32(0)))), "primfunc main: for i: negative extent -1"],
    ["an index of a float dtype", fn(loop(i, 4, store("B", [i, f32(0)], f32(0)))), "primfunc main: store to 'B': an index of dtype float32"],
    [
      "a reduction left in an expression",
      fn(loop(i, 4, store("B", [i, c(0)], sum(A(i, v("k")), [reduceAxis(8, "k")])))),
      "primfunc main: store to 'B': a reduction is left in an expression (lowering turns it into an init and an update)",
    ],
    ["a param named twice", fn(store("A", [c(0), c(0)], f32(0)), [buf("A", [4, 8]), buf("A", [4, 8])]), "primfunc main: param 'A': named twice"],
    ["an allocation shadowing a param", fn({ kind: "allocate", buffer: buf("B", [8]), body: store("B", [c(0)], f32(0)) }), "primfunc main: allocate 'B': 'B' is already a param or allocated around it"],
    ["a buffer with strides for another rank", fn(store("B", [c(0), c(0)], f32(0)), [buf("A", [4, 8]), buf("B", [4, 8], { strides: [1] })]), "primfunc main: param 'B': 1 stride for rank 2"],
    ["a thread loop without a thread tag", fn(loop(i, 4, store("B", [i, c(0)], f32(0)), "thread")), "primfunc main: for i: a thread loop without a thread tag"],
  ])("names %s", (_, f, want) => {
    expect(problem(f)).toBe(want)
  })

  it("names an intrinsic whose regions do not fit its buffers or its declaration", () => {
    const intrin = gemmMicroKernel(2, 2, 2)
    const call = (output: Expr[], inputs: Expr[][]): Stmt => ({ kind: "intrinsic", intrin, output: { buffer: "B", base: output }, inputs: inputs.map((base, k) => ({ buffer: k ? "B" : "A", base })) })
    const params = [buf("A", [4, 8]), buf("B", [4, 8])]
    expect(problem(fn(call([c(0), c(0)], [[c(0), c(0)], [c(0), c(0)]]), params))).toBeUndefined()
    expect(problem(fn(call([c(0)], [[c(0), c(0)], [c(0), c(0)]]), params))).toBe("primfunc main: intrinsic gemm_2x2x2_float32: output: region of 'B': 'B' has rank 2, accessed with 1 index")
    expect(problem(fn(call([c(0), c(0)], [[c(0), c(0)]]), params))).toBe("primfunc main: intrinsic gemm_2x2x2_float32: 1 input region for 2 declared inputs")
    const stored: Stmt = { kind: "intrinsic", intrin: { ...intrin, mode: "store" }, output: { buffer: "B", base: [c(0), c(0)] }, inputs: [{ buffer: "A", base: [c(0), c(0)] }, { buffer: "A", base: [c(0), c(0)] }] }
    expect(problem(fn(stored, params))).toBe("primfunc main: intrinsic gemm_2x2x2_float32: a reduction must be an update")
  })
})

describe("verifyPrimFunc: what a point in a pipeline expects", () => {
  const flat = fn(loop(i, 32, store("B", [i], read("A", [i], "float32"))), [
    buf("A", [32], { view: { shape: [4, 8], strides: [8, 1] } }),
    buf("B", [32], { view: { shape: [4, 8], strides: [8, 1] } }),
  ])
  it.each<[string, PrimFunc, TirExpect, string | undefined]>([
    ["flat storage holds of a flattened function", flat, { flat: true }, undefined],
    ["flat storage: a param of rank 2", wellFormed, { flat: true }, "primfunc main: param 'A': storage is not flattened: rank 2 (run lowering.FlattenStorage)"],
    [
      "flat storage: an allocation of rank 2",
      fn({ kind: "allocate", buffer: buf("T", [2, 2]), body: store("T", [c(0), c(0)], f32(0)) }, [buf("B", [1])]),
      { flat: true },
      "primfunc main: allocate 'T': storage is not flattened: rank 2 (run lowering.FlattenStorage)",
    ],
    [
      "no intrinsic: one is left",
      fn({ kind: "intrinsic", intrin: gemmMicroKernel(2, 2, 2), output: { buffer: "B", base: [c(0), c(0)] }, inputs: [{ buffer: "A", base: [c(0), c(0)] }, { buffer: "A", base: [c(0), c(0)] }] }),
      { noIntrinsics: true },
      "primfunc main: intrinsic gemm_2x2x2_float32: an intrinsic statement is left (run lowering.LowerIntrinsics)",
    ],
    ["known thread extents: a constant thread loop", fn(loop(i, 4, store("B", [i, c(0)], f32(0)), "thread", { thread: "threadIdx.x" })), { threadExtentsKnown: true }, undefined],
    [
      "known thread extents: a vthread loop of unknown extent",
      fn({ kind: "let", var: v("n"), value: c(4), body: loop(i, v("n"), store("B", [i, c(0)], f32(0)), "vthread", { thread: "vthread" }) }),
      { threadExtentsKnown: true },
      "primfunc main: for i: a vthread loop (vthread) with non-constant bounds",
    ],
    ["vector lanes: a vectorized loop within the lanes", fn(loop(j, 8, store("B", [c(0), j], f32(0)), "vectorized")), { maxVectorLanes: 8 }, undefined],
    [
      "vector lanes: a vectorized loop wider than the lanes",
      fn(loop(j, 8, store("B", [c(0), j], f32(0)), "vectorized")),
      { maxVectorLanes: 4 },
      "primfunc main: for j: a vectorized loop of extent 8 (at most 4 lanes; run lowering.VectorizeLoops)",
    ],
    [
      "vector lanes: a vectorized loop around a loop",
      fn(loop(j, 4, loop(i, 4, store("B", [i, j], f32(0))), "vectorized")),
      { maxVectorLanes: 8 },
      "primfunc main: for j: a vectorized loop whose body is not straight-line code (run lowering.VectorizeLoops)",
    ],
    ["unroll limit: an unrolled loop beyond it", fn(loop(j, 8, store("B", [c(0), j], f32(0)), "unrolled")), { maxUnroll: 4 }, "primfunc main: for j: an unrolled loop of extent 8 (at most 4; run lowering.UnrollLoops)"],
  ])("%s", (_, f, expectation, want) => {
    expect(problem(f, expectation)).toBe(want)
    // every fact is on top of well-formedness: none of these is ill-formed without it
    expect(problem(f)).toBeUndefined()
  })
})
