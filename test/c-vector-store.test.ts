// The c target's clamped vector stores (src/emit/c/vector-store.ts): a vectorized loop of 16 float
// lanes storing a value clamped on both sides against constants is one vector statement (vminps / vmaxps), and
// computes what the scalar form (tessera_maxcf / tessera_mincf) does bit for bit and the TIR
// evaluator's values (to float rounding) — NaN of either sign in and NaN out, ±0 against a 0 bound (whose sign the
// scalar form keeps too), ±inf, subnormals; any other loop is rendered as written (`#pragma omp simd`).
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { add, c, call, f32, max, min, mul, read, sub, v, type Expr } from "../src/ast/te/expr.js"
import { evaluatePrimFunc } from "../src/ast/tir/evaluate.js"
import type { Buffer, PrimFunc, Stmt } from "../src/ast/tir/tir.js"
import { paramsOf } from "../src/ast/tir/analysis.js"
import { buildC, compilerAvailable } from "../src/device/c/build.js"
import { loadC } from "../src/device/c/load.js"
import { emitC } from "../src/emit/c/emit.js"
import { callKernel } from "../laws/support-c.js"

const HAVE_GCC = compilerAvailable("gcc")
const ROWS = 3
const N = ROWS * 16

const buf = (name: string, n: number): Buffer => ({ name, dtype: "float32", shape: [n], scope: "global" })
const [i, l] = [v("i"), v("l")]
const at = add(mul(i, c(16)), l)
const X = read("X", [at], "float32")
const B = read("B", [l], "float32")
const S = read("S", [i], "float32")

/** for i < ROWS, for l < extent (kind): out[i·16 + l·step] = value. */
const kernel = (name: string, value: Expr, opts: { kind?: "vectorized" | "serial"; extent?: number; step?: number } = {}): PrimFunc => {
  const lane: Stmt = { kind: "for", var: l, min: c(0), extent: c(opts.extent ?? 16), forKind: opts.kind ?? "vectorized", body: { kind: "store", buffer: "out", indices: [add(mul(i, c(16)), mul(l, c(opts.step ?? 1)))], value } }
  return { name, params: [buf("X", N), buf("B", 16), buf("S", ROWS), buf("out", 2 * N)], body: { kind: "for", var: i, min: c(0), extent: c(ROWS), forKind: "serial", body: lane } }
}

// NaN of both signs, ±0, ±inf, subnormals, values at and past the bounds
const xs = [NaN, -NaN, 0, -0, Infinity, -Infinity, 1e-40, -1e-40, -1, 7, 3, 6, 5.99, 6.01, -0.5, 1e30]
const inputs = (): Map<string, Tensor> => {
  const x = Float32Array.from({ length: N }, (_, k) => xs[k % 16] * (k < 16 ? 1 : (k % 3) - 0.5))
  // (a negative-NaN lane: the sign bit set on a quiet NaN)
  new Uint32Array(x.buffer)[1] = 0xffc00000
  return new Map([
    ["X", tensor("float32", [N], x)],
    ["B", tensor("float32", [16], Float32Array.from({ length: 16 }, (_, k) => (k % 4 === 0 ? -0 : k % 4 === 1 ? 0 : k / 8 - 1)))],
    ["S", tensor("float32", [ROWS], Float32Array.from([0, -0, 2]))],
  ])
}

const clamped: readonly [string, Expr][] = [
  ["clip6", min(max(add(X, B), f32(0)), f32(6))], // a conv's ReLU6 epilogue: sum + bias, clamped
  ["clip_left", min(f32(6), max(f32(0), X))], // the constants on either side
  ["clip_neg", max(min(sub(X, S), f32(2)), f32(-1))], // a row's scalar, splat
  ["hardswish", mul(mul(X, min(max(add(X, f32(3)), f32(0)), f32(6))), f32(1 / 6))],
]

/** Each element's bits, a NaN of any sign or payload as "NaN" (JavaScript keeps no NaN's bits: the evaluator's come out canonical). */
const bits = (t: Tensor): (number | "NaN")[] => {
  const f = new Float32Array(t.data as Float32Array)
  return [...new Uint32Array(f.buffer)].map((b, k) => (Number.isNaN(f[k]) ? "NaN" : b))
}

describe.skipIf(!HAVE_GCC)("c target: clamped vector stores (gcc)", () => {
  it("a 16-lane vectorized loop storing a clamped value is one vector statement, bit for bit the scalar form's and the TIR evaluator's values (NaN of either sign, ±0, ±inf, subnormals)", async () => {
    const funcs = clamped.map(([name, value]) => kernel(name, value))
    // (the same loops serial: the scalar form, tessera_maxcf / tessera_mincf element by element)
    const scalar = clamped.map(([name, value]) => kernel(`${name}_scalar`, value, { kind: "serial" }))
    const src = emitC([...funcs, ...scalar]).source
    for (const f of funcs) expect(src.slice(src.indexOf(`void ${f.name}(`)).split("\n}\n")[0]).toMatch(/tessera_store16\(/)
    for (const f of scalar) expect(src.slice(src.indexOf(`void ${f.name}(`)).split("\n}\n")[0]).not.toMatch(/tessera_store16\(/)
    expect(src).toContain("tessera_maxc16(")
    expect(src).toContain("tessera_minc16(")
    const mod = await Effect.runPromise(Effect.gen(function* () {
      const so = yield* buildC(src)
      return yield* loadC(so, [...funcs, ...scalar].map((f) => ({ name: f.name, params: paramsOf(f) })))
    }))
    funcs.forEach((f, k) => {
      const got = callKernel(mod.kernels.get(f.name)!, f, inputs()).get("out")!
      const same = callKernel(mod.kernels.get(scalar[k].name)!, scalar[k], inputs()).get("out")!
      const want = evaluatePrimFunc(f, inputs()).get("out")!
      // the scalar form's bits (a -0 against a 0 bound keeps its sign in both), the evaluator's values
      expect(bits(got).slice(0, N), f.name).toEqual(bits(same).slice(0, N))
      // (the evaluator rounds once at the store, the C in float at each step: within 2 ulp)
      const [g, e] = [[...got.data].slice(0, N), [...want.data].slice(0, N)]
      g.forEach((x, j) => {
        if (Number.isNaN(e[j]) || !Number.isFinite(e[j])) expect(x, `${f.name}[${j}]`).toBe(e[j])
        else expect(Math.abs(x - e[j]), `${f.name}[${j}]: ${x} against ${e[j]}`).toBeLessThanOrEqual(2 ** -22 * Math.abs(e[j]))
      })
    })
  })

  it("any other loop is rendered as written: no clamp, a clamp on one side, 8 lanes, a stride of 2, a serial loop, a call, a read of the stored buffer elsewhere", () => {
    const others = [
      kernel("plain", add(X, B)),
      kernel("relu", max(add(X, B), f32(0))),
      kernel("below", min(mul(X, B), f32(0.5))),
      kernel("narrow", min(max(X, f32(0)), f32(6)), { extent: 8 }),
      kernel("strided", min(max(X, f32(0)), f32(6)), { step: 2 }),
      kernel("serial", min(max(X, f32(0)), f32(6)), { kind: "serial" }),
      kernel("called", min(max(call("exp", X), f32(0)), f32(6))),
      kernel("selfread", min(max(read("out", [add(at, c(16))], "float32"), f32(0)), f32(6))),
    ]
    const src = emitC(others).source
    expect(src).not.toMatch(/tessera_store16\(/)
  })
})
