// The wasm target's SIMD128 plan for vectorized loops of mixed dtypes (src/emit/wasm/vector-wide.ts):
// a random loop `out[b + s·j] = e(j)` over random typed expressions — int32, float32 and float64
// arithmetic, rounding, min / max, the casts between them, float → integer casts of values clamped
// by constants, 8-, 16- and 32-bit stores at random strides, inputs with NaN, ±∞ and −0 — emitted
// for wasm and run equals, bit for bit, the same loop run as scalar code (which test/emit-wasm.test.ts
// checks against the TIR evaluator; the evaluator computes float32 arithmetic in float64, so it is
// not the bit-for-bit oracle here — the int8 law, laws/emit/wasm-int8-dot.law.ts, whose computes
// round every float32 step explicitly, checks the requantization against the TE exactly).
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { allocate, type DType } from "../../src/ast/graph/dtype.js"
import { fromArray, sizeOf, type Tensor } from "../../src/ast/graph/tensor.js"
import { add, bin, c, call, cast, max, min, mul, v, type Expr } from "../../src/ast/te/expr.js"
import type { PrimFunc, Stmt } from "../../src/ast/tir/tir.js"
import { loadWasmModuleSync } from "../../src/device/wasm/load.js"
import { emitWasmModule } from "../../src/emit/wasm/emit.js"
import { widePlan } from "../../src/emit/wasm/vector-wide.js"
import { lawParams } from "../support.js"

const N = 40
const j = v("j")

type Gen = (d: number) => fc.Arbitrary<Expr>
const read = (src: "i" | "f", dtype: DType) => fc.integer({ min: 0, max: 8 }).map((off): Expr => ({ kind: "read", source: src, indices: [add(j, c(off))], dtype }))
const invariantRead = (src: "i" | "f", dtype: DType) => fc.integer({ min: 0, max: N - 1 }).map((k): Expr => ({ kind: "read", source: src, indices: [c(k)], dtype }))

const i32: Gen = (d) =>
  d <= 0
    ? fc.oneof(read("i", "int32"), invariantRead("i", "int32"), fc.integer({ min: -300, max: 300 }).map((k) => c(k)))
    : fc.oneof(
        i32(0),
        fc.tuple(fc.constantFrom("add", "sub", "mul", "min", "max") as fc.Arbitrary<"add" | "sub" | "mul" | "min" | "max">, i32(d - 1), i32(d - 1)).map(([op, a, b]) => bin(op, a, b)),
        // a float clamped inside int32's range, truncated
        fc.tuple(fc.oneof(f32(d - 1), f64(d - 1)), fc.integer({ min: -70000, max: 0 }), fc.integer({ min: 0, max: 70000 })).map(([x, lo, hi]) => cast("int32", max(c(lo, x.dtype), min(c(hi, x.dtype), x)))),
      )
const f32: Gen = (d) =>
  d <= 0
    ? fc.oneof(read("f", "float32"), invariantRead("f", "float32"), fc.double({ min: -4, max: 4, noNaN: true }).map((x) => c(Math.fround(x), "float32")))
    : fc.oneof(
        f32(0),
        fc.tuple(fc.constantFrom("add", "sub", "mul", "div", "min", "max") as fc.Arbitrary<"add" | "sub" | "mul" | "div" | "min" | "max">, f32(d - 1), f32(d - 1)).map(([op, a, b]) => bin(op, a, b)),
        fc.tuple(fc.constantFrom("round", "floor", "ceil", "fabs", "neg", "sqrt") as fc.Arbitrary<"round">, f32(d - 1)).map(([fn, a]) => call(fn, a)),
        i32(d - 1).map((x) => cast("float32", x)),
        f64(d - 1).map((x) => cast("float32", x)),
      )
const f64: Gen = (d) =>
  d <= 0
    ? fc.oneof(f32(0).map((x) => cast("float64", x)), i32(0).map((x) => cast("float64", x)), fc.double({ min: -1e3, max: 1e3, noNaN: true }).map((x) => c(x, "float64")))
    : fc.oneof(
        f64(0),
        fc.tuple(fc.constantFrom("add", "sub", "mul", "div", "min", "max") as fc.Arbitrary<"add" | "sub" | "mul" | "div" | "min" | "max">, f64(d - 1), f64(d - 1)).map(([op, a, b]) => bin(op, a, b)),
        fc.tuple(fc.constantFrom("round", "floor", "ceil", "fabs", "neg", "sqrt") as fc.Arbitrary<"round">, f64(d - 1)).map(([fn, a]) => call(fn, a)),
        f32(d - 1).map((x) => cast("float64", x)),
        i32(d - 1).map((x) => cast("float64", x)),
        // (the requantization's float32 rounding of a float64)
        f64(d - 1).map((x) => cast("float64", cast("float32", x))),
      )

/** A stored value of `dtype`: its class's expression, or an 8- / 16-bit cast of an int32 or of a clamped float. */
const stored = (dtype: DType): fc.Arbitrary<Expr> => {
  if (dtype === "int32") return i32(3)
  if (dtype === "float32") return f32(3)
  return fc.oneof(
    i32(3).map((x) => cast(dtype, x)),
    fc.tuple(fc.oneof(f64(3), f32(3)), fc.integer({ min: -1000, max: 0 }), fc.integer({ min: 0, max: 1000 })).map(([x, lo, hi]) => cast(dtype, max(c(lo, x.dtype), min(c(hi, x.dtype), x)))),
  )
}

/** A float32 input: small values, and NaN, ±∞, −0 now and then. */
const arbF32 = fc.oneof({ weight: 6, arbitrary: fc.double({ min: -300, max: 300, noNaN: true }).map(Math.fround) }, { weight: 1, arbitrary: fc.constantFrom(NaN, Infinity, -Infinity, -0, 0.5, -2.5) })

interface Case {
  readonly f: PrimFunc
  readonly inputs: Map<string, Tensor>
}

const arbCase: fc.Arbitrary<Case> = fc
  .tuple(fc.constantFrom<DType>("int32", "float32", "uint8", "int8", "int16"), fc.integer({ min: 4, max: 17 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 3 }))
  .chain(([dtype, ext, stride, base]) =>
    fc.tuple(stored(dtype), fc.array(fc.integer({ min: -100000, max: 100000 }), { minLength: N, maxLength: N }), fc.array(arbF32, { minLength: N, maxLength: N })).map(([value, iv, fv]): Case => {
      const len = base + stride * (ext - 1) + 1
      const loop: Stmt = { kind: "for", var: j, min: c(0), extent: c(ext), forKind: "vectorized", body: { kind: "store", buffer: "out", indices: [add(c(base), mul(j, c(stride)))], value } }
      const f: PrimFunc = { name: "k", params: [{ name: "i", dtype: "int32", shape: [N], scope: "global" }, { name: "f", dtype: "float32", shape: [N], scope: "global" }, { name: "out", dtype, shape: [len], scope: "global" }], body: loop }
      return { f, inputs: new Map([["i", fromArray("int32", [N], iv)], ["f", fromArray("float32", [N], fv)]]) }
    }),
  )

const run = (f: PrimFunc, inputs: ReadonlyMap<string, Tensor>): number[] => {
  const em = emitWasmModule([{ name: "k", func: f }])
  const fn = loadWasmModuleSync(em.bytes, em.kernels).get("k")!
  const arrays = f.params.map((p) => inputs.get(p.name)?.data.slice() ?? allocate(p.dtype, sizeOf(p.shape)))
  fn(...arrays)
  return Array.from(arrays[2] as ArrayLike<number>)
}

const serial = (f: PrimFunc): PrimFunc => ({ ...f, body: { ...(f.body as Stmt & { kind: "for" }), forKind: "serial" } })

describe("wasm target: vectorized loops of mixed dtypes", () => {
  it("run 4 lanes a step, they equal the scalar code bit for bit", () => {
    let planned = 0
    fc.assert(
      fc.property(arbCase, ({ f, inputs }) => {
        if (widePlan((f.body as Stmt & { kind: "for" }).body, "j")) planned++
        expect(run(f, inputs)).toEqual(run(serial(f), inputs))
      }),
      lawParams(300),
    )
    // (most cases take the plan: the rest are plain int32 / float32 bodies vector.ts takes, or stay scalar)
    expect(planned).toBeGreaterThan(150)
  })
})
