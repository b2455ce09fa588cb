// The c target: every compute family under random schedules, lowered, emitted as C, built by gcc,
// loaded through koffi and run, equals the TE evaluator; conversions, division and NaN handling
// equal the TIR evaluator bit for bit; emission is deterministic; names never leak; goldens hold.
//
// Goldens: golden/c/<case>.c (cases in scripts/update-goldens.ts). After a reviewed change, run
//   UPDATE_GOLDENS=1 npx vitest run test/emit-c.test.ts
// and review the printed summary and `git diff golden/c`.
//
// Everything that builds skips, visibly, when gcc is absent. Libraries are cached by content hash
// (os.tmpdir()/tessera-c), so a second run does not compile.
import * as fc from "fast-check"
import { Effect } from "effect"
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import type { DType } from "../src/ast/graph/dtype.js"
import { tensor, type Tensor } from "../src/ast/graph/tensor.js"
import { arbScheduledCase, COMPUTE_FAMILIES } from "../src/ast/te/arbitrary.js"
import { add, c, call, cast, div, f32, floordiv, floormod, gt, max, min, mul, read, sub, v, type Expr } from "../src/ast/te/expr.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { gemmMicroKernel, vnniDot16x4 } from "../src/ast/te/intrinsic.js"
import { evaluatePrimFunc } from "../src/ast/tir/evaluate.js"
import type { Buffer, PrimFunc, Stmt } from "../src/ast/tir/tir.js"
import { buildC, cArtifact, compilerAvailable, defaultCBuildConfig, writeArtifact } from "../src/device/c/build.js"
import { alignedReserve, loadC } from "../src/device/c/load.js"
import { C_PRELUDE } from "../src/emit/c/prelude.js"
import { CompileError, DeviceRunError, LoadError } from "../src/device/device.js"
import { paramsOf } from "../src/ast/tir/analysis.js"
import koffi from "koffi"
import { hostCpu, hostTarget, parseCacheSize, parseCpuInfo, parseGetconfCaches } from "../src/device/host.js"
import { emitC } from "../src/emit/c/emit.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { assertAllClose, lawParams } from "../laws/support.js"
import { callKernel } from "../laws/support-c.js"
import { runFailure } from "./support/effect.js"
import { C_GOLDEN_CASES, GOLDEN_CASES, GOLDEN_DIR, goldenFunc, goldenUnit, updateGoldens } from "../scripts/update-goldens.js"

const HAVE_GCC = compilerAvailable("gcc")
const CASES_PER_FAMILY = 30

/** The emit layer's typed error from the c target, its reason matching `reason` (and its kernel, when given). */
const emitError = (reason: RegExp, kernel?: string) => expect.objectContaining({ _tag: "EmitError", target: "c", reason: expect.stringMatching(reason), ...(kernel === undefined ? {} : { kernel }) })

const build = (funcs: readonly PrimFunc[]) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const { source } = emitC(funcs, { poison: true })
      const so = yield* buildC(source)
      return yield* loadC(so, signatures(funcs))
    }),
  )

/** What loading needs of each function: its name and params. */
const signatures = (funcs: readonly PrimFunc[]) => funcs.map((f) => ({ name: f.name, params: paramsOf(f) }))

const lowered = (f: PrimFunc, name: string): PrimFunc => ({ ...runTirSync(cpuTirPipeline(), f), name })

describe.skipIf(!HAVE_GCC)("c target: compute families under random schedules (gcc)", () => {
  for (const family of COMPUTE_FAMILIES)
    it(`emitted C equals the TE evaluator for ${family}`, async () => {
      const cases = fc.sample(arbScheduledCase([family]), lawParams(CASES_PER_FAMILY))
      const funcs = cases.map((cc, k) => lowered(lowerSync(cc.schedule), `k${k}`))
      expect(emitC(funcs, { poison: true }).source).toBe(emitC(funcs, { poison: true }).source) // deterministic
      const mod = await build(funcs)
      cases.forEach((cc, k) => {
        const outs = callKernel(mod.kernels.get(`k${k}`)!, funcs[k], cc.inputs)
        const want = evaluateTE(cc.outputs, cc.inputs)
        const got = cc.outputs.map((o) => outs.get(o.name)!)
        if (want.every((w) => w.dtype.startsWith("int"))) got.forEach((g, j) => expect([...g.data]).toEqual([...want[j].data]))
        else assertAllClose(got, want, 1e-4, 1e-5)
      })
    })
})

// ---------------------------------------------------------------------------------------------
// Conversions, integer division, NaN: exactly the TIR evaluator

const buf = (name: string, dtype: DType, n: number): Buffer => ({ name, dtype, shape: [n], scope: "global" })
const X = (i: Expr) => read("X", [i], "float32")

const semanticsFunc = (): { func: PrimFunc; inputs: Map<string, Tensor> } => {
  const xs = [NaN, Infinity, -2.5, 2.5, 3e10, -0.5, 65520, 6e-8, -Infinity, 1.5, -7.75, 300.5]
  const n = xs.length
  const i = v("i")
  const outs: [string, DType, Expr][] = [
    ["to_i8", "int8", cast("int8", X(i))],
    ["to_u8", "uint8", cast("uint8", X(i))],
    ["to_i32", "int32", cast("int32", mul(cast("float64", X(i)), c(1000, "float64")))],
    ["to_u32", "uint32", cast("uint32", X(i))],
    ["to_f16", "float16", X(i)],
    ["to_bf16", "bfloat16", X(i)],
    ["to_i64", "int64", cast("int64", X(i))],
    ["to_bool", "bool", cast("bool", X(i))],
    ["gt0", "bool", gt(X(i), f32(0))],
    ["rnd", "float32", call("round", X(i))],
    ["relu", "float32", max(X(i), f32(0))],
    // constant bounds (the one-instruction forms), on either side: NaN still comes out NaN
    ["clip", "float32", min(max(X(i), f32(-1)), f32(2))],
    ["maxl", "float32", max(f32(1), X(i))],
    ["mind", "float64", min(c(0.5, "float64"), cast("float64", X(i)))],
    ["fdiv", "int32", floordiv(sub(i, c(5)), c(3))],
    ["fmod", "int32", floormod(sub(i, c(5)), c(3))],
    ["fdivn", "int32", floordiv(sub(i, c(5)), c(-3))],
    ["fmodn", "int32", floormod(sub(i, c(5)), c(-4))],
    ["tdiv", "int32", div(sub(i, c(5)), c(3))],
    ["l_div", "int64", div(cast("int64", sub(i, c(5))), c(2, "int64"))],
    ["l_fdiv", "int64", floordiv(cast("int64", sub(i, c(5))), c(2, "int64"))],
    ["dbl", "float64", mul(cast("float64", X(i)), c(0.1, "float64"))],
    ["wrap8", "int8", mul(add(i, c(100)), c(3))],
    // float → integer of a value clamped by constants inside int32's range (a requantizing
    // epilogue's): the vectorizable conversion, NaN → 0, truncation and the narrowing wrap as
    // tessera_f2i's; one clamp past int32's range or on one side keeps tessera_f2i
    ["q_i8", "int8", cast("int8", max(c(-128, "float64"), min(c(127, "float64"), call("round", cast("float64", X(i))))))],
    ["q_u8f", "uint8", cast("uint8", min(max(X(i), f32(0)), f32(255)))],
    ["q_u8w", "uint8", cast("uint8", max(f32(-300), min(X(i), f32(300))))],
    ["q_i32w", "int32", cast("int32", max(f32(-3e9), min(X(i), f32(3e9))))],
    ["q_i8l", "int8", cast("int8", max(X(i), f32(-128)))],
  ]
  const body: Stmt = { kind: "for", var: i, min: c(0), extent: c(n), forKind: "serial", body: { kind: "seq", body: outs.map(([name, , value]) => ({ kind: "store", buffer: name, indices: [i], value })) } }
  return {
    func: { name: "semantics", params: [buf("X", "float32", n), ...outs.map(([name, dt]) => buf(name, dt, n))], body },
    inputs: new Map([["X", tensor("float32", [n], Float32Array.from(xs))]]),
  }
}

/** for r < n: acc[0] = acc[0] ⊕ X[r] (a reduction into one element), over a float32 or float64 row. */
const reduceFunc = (op: "add" | "max" | "min", dtype: "float32" | "float64", n: number): PrimFunc => {
  const r = v("r")
  const x = read("X", [r], dtype)
  const acc = read("acc", [c(0)], dtype)
  const value = op === "add" ? add(acc, mul(x, x)) : op === "max" ? max(acc, x) : min(x, acc)
  const init = op === "add" ? c(0, dtype) : c(op === "max" ? -Infinity : Infinity, dtype)
  return {
    name: `reduce_${op}_${dtype}`,
    params: [buf("X", dtype, n), buf("acc", dtype, 1)],
    body: { kind: "seq", body: [{ kind: "store", buffer: "acc", indices: [c(0)], value: init }, { kind: "for", var: r, min: c(0), extent: c(n), forKind: "serial", body: { kind: "store", buffer: "acc", indices: [c(0)], value } }] },
  }
}

describe.skipIf(!HAVE_GCC)("c target: reductions into one element, vectorized (gcc)", () => {
  it("a sum, max or min loop keeps its element in a register under omp simd reduction; the result equals the evaluator's (a sum to float rounding), a NaN anywhere gives NaN", async () => {
    const funcs = (["add", "max", "min"] as const).flatMap((op) => (["float32", "float64"] as const).map((dt) => reduceFunc(op, dt, 37)))
    const src = emitC(funcs).source
    expect(src).toContain("#pragma omp simd reduction(+:")
    expect(src).toContain("reduction(max:")
    expect(src).toContain("reduction(min:")
    const mod = await build(funcs)
    for (const f of funcs) {
      const dt = f.params[0].dtype as "float32" | "float64"
      const make = (xs: number[]) => new Map([["X", tensor(dt, [37], dt === "float32" ? Float32Array.from(xs) : Float64Array.from(xs))]])
      const rows = [Array.from({ length: 37 }, (_, k) => Math.sin(k * 1.7) * 10 - k / 7)]
      for (const at of [0, 17, 36]) rows.push(rows[0].map((x, k) => (k === at ? NaN : x)))
      for (const xs of rows) {
        const got = callKernel(mod.kernels.get(f.name)!, f, make(xs)).get("acc")!.data[0]
        const want = evaluatePrimFunc(f, make(xs)).get("acc")!.data[0]
        if (Number.isNaN(want)) expect(got, `${f.name} with a NaN`).toBeNaN()
        else if (f.name.startsWith("reduce_add")) expect(Math.abs(got - want)).toBeLessThanOrEqual(1e-5 * Math.abs(want))
        else expect(got, f.name).toBe(want)
      }
    }
  })

  it("a loop that is not such a reduction is rendered as written: an index that moves with the loop, a term that reads the element's buffer, an integer sum, a product", () => {
    const r = v("r")
    const loopOf = (name: string, dtype: DType, store: Stmt): PrimFunc => ({ name, params: [buf("X", dtype, 8), buf("acc", dtype, 8)], body: { kind: "for", var: r, min: c(0), extent: c(8), forKind: "serial", body: store } })
    const x = read("X", [r], "float32")
    const a0 = read("acc", [c(0)], "float32")
    const funcs = [
      loopOf("moving", "float32", { kind: "store", buffer: "acc", indices: [r], value: add(read("acc", [r], "float32"), x) }),
      loopOf("selfread", "float32", { kind: "store", buffer: "acc", indices: [c(0)], value: add(a0, read("acc", [c(1)], "float32")) }),
      loopOf("integer", "int32", { kind: "store", buffer: "acc", indices: [c(0)], value: add(read("acc", [c(0)], "int32"), read("X", [r], "int32")) }),
      loopOf("product", "float32", { kind: "store", buffer: "acc", indices: [c(0)], value: mul(a0, x) }),
    ]
    expect(emitC(funcs).source).not.toContain("reduction(")
  })

  /** The worst error in ulps of the prelude's `fn` against libm's double `ref` at every `step`th float (by bit pattern, either sign) of [lo, hi), and `checks` (C expressions, each 1 when it holds). */
  const preludeAccuracy = (fn: string, ref: string, lo: string, hi: string, step: number, checks: readonly string[], refSource = ""): { ulps: number; checks: string[] } => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-libm-"))
    try {
      const { source } = emitC([reduceFunc("add", "float32", 1)])
      const prelude = source.slice(0, source.indexOf("static inline int64_t tessera_mini"))
      const main = `${prelude}
${refSource}
int main(void) {
  double worst = 0;
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += ${step}) {
    float m;
    memcpy(&m, &bits, 4);
    for (int sign = 0; sign < 2; sign++) {
      float x = sign ? -m : m;
      if (!(x >= ${lo} && x < ${hi})) continue;
      double t = ${ref}((double)x), y = ${fn}(x);
      float tf = (float)t;
      double ulp = fabsf(tf) > 0 ? (double)nextafterf(fabsf(tf), INFINITY) - fabsf(tf) : 1.4e-45;
      double e = fabs(y - t) / ulp;
      if (e > worst) worst = e;
    }
  }
  printf("%.4f${checks.map(() => " %d").join("")}\\n", worst${checks.map((c) => `, (int)(${c})`).join("")});
  return 0;
}
`
      const file = path.join(dir, "libm.c")
      writeFileSync(file, main)
      const cc = spawnSync("gcc", ["-O2", "-march=native", "-fno-math-errno", "-o", path.join(dir, "libm"), file, "-lm"], { encoding: "utf8" })
      expect(cc.status, cc.stderr).toBe(0)
      const out = spawnSync(path.join(dir, "libm"), { encoding: "utf8" }).stdout.trim().split(" ")
      return { ulps: Number(out[0]), checks: out.slice(1) }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }

  it("tessera_expf is within 1.01 ulp of exp at every 997th float of the range, inf above it, 0 far below it, NaN as NaN", () => {
    const r = preludeAccuracy("tessera_expf", "exp", "-103.9f", "88.72f", 997, ["isinf(tessera_expf(88.8f)) && tessera_expf(88.8f) > 0", "tessera_expf(-104.5f) == 0.0f", "isnan(tessera_expf(NAN))", "tessera_expf(0.0f) == 1.0f"])
    expect(r.ulps).toBeLessThanOrEqual(1.01)
    expect(r.checks).toEqual(["1", "1", "1", "1"])
  }, 60_000)

  it("tessera_sigmoidf is within 2.1 ulp (as 1 / (1 + tessera_expf(-x)) was) of 1 / (1 + exp(-x)) at every 997th float down to -88.3, 1 at +inf, tiny at -inf, NaN as NaN", () => {
    const r = preludeAccuracy(
      "tessera_sigmoidf",
      "logistic",
      "-88.3f",
      "3.0e38f",
      997,
      ["tessera_sigmoidf(INFINITY) == 1.0f", "tessera_sigmoidf(-INFINITY) >= 0.0f && tessera_sigmoidf(-INFINITY) < 5e-39f", "isnan(tessera_sigmoidf(NAN))", "tessera_sigmoidf(0.0f) == 0.5f"],
      "static double logistic(double x) { return 1.0 / (1.0 + exp(-x)); }",
    )
    expect(r.ulps).toBeLessThanOrEqual(2.1)
    expect(r.checks).toEqual(["1", "1", "1", "1"])
  }, 60_000)

  it("tessera_erff is within 1.1 ulp of erf at every 997th float of [-10, 10], odd, ±1 at ±inf, NaN as NaN", () => {
    const r = preludeAccuracy("tessera_erff", "erf", "-10.0f", "10.0f", 997, [
      "tessera_erff(INFINITY) == 1.0f && tessera_erff(-INFINITY) == -1.0f",
      "isnan(tessera_erff(NAN))",
      "tessera_erff(0.0f) == 0.0f && signbit(tessera_erff(-0.0f))",
      "tessera_erff(-0.5f) == -tessera_erff(0.5f) && tessera_erff(-2.5f) == -tessera_erff(2.5f)",
    ])
    expect(r.ulps).toBeLessThanOrEqual(1.1)
    expect(r.checks).toEqual(["1", "1", "1", "1"])
  }, 60_000)
})

describe.skipIf(!HAVE_GCC)("c target: the scratch allocator (gcc)", () => {
  // A network's run asks for the same scratch sizes every time; a kept block handed to a smaller
  // request must be kept again at its own size, or the next run's larger requests find none and
  // fault fresh pages in (ResNet-50's Winograd chunks: 0.9 MB requests took the 1.8 MB blocks).
  /** Fresh allocations in the first run of `body` and in the five runs after it. */
  /** Fresh blocks (or, with `bytes`, their bytes) the allocator asks the C library for: on the first run of `body`, and on the 5 runs after it together. */
  const freshAllocs = (body: string, bytes = false): { first: number; later: number } => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-alloc-"))
    try {
      const main = `#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int fresh = 0;
static void* counted_alloc(size_t align, size_t n);
#define aligned_alloc counted_alloc
${C_PRELUDE}
#undef aligned_alloc
static void* counted_alloc(size_t align, size_t n) { fresh += ${bytes ? "(int)n" : "1"}; return aligned_alloc(align, n); }
static void run(void) {
${body}
}
int main(void) {
  run();
  int first = fresh;
  for (int i = 0; i < 5; i++) run();
  printf("%d %d\\n", first, fresh - first);
  return 0;
}
`
      const file = path.join(dir, "alloc.c")
      writeFileSync(file, main)
      const cc = spawnSync("gcc", ["-O2", "-o", path.join(dir, "alloc"), file, "-lm"], { encoding: "utf8" })
      expect(cc.status, cc.stderr).toBe(0)
      const [first, later] = spawnSync(path.join(dir, "alloc"), { encoding: "utf8" }).stdout.trim().split(" ").map(Number)
      return { first, later }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
  it("after the first run, runs of the same requests allocate nothing fresh (a kept block keeps its own size)", () => {
    const body = `  const size_t big = 1843200, small = 921600;
  char* a = tessera_alloc(big); memset(a, 1, big);
  char* b = tessera_alloc(big); memset(b, 2, big);
  tessera_free(a, big); tessera_free(b, big);
  char* c = tessera_alloc(small); memset(c, 3, small);
  char* d = tessera_alloc(small); memset(d, 4, small);
  tessera_free(c, small); tessera_free(d, small);`
    expect(freshAllocs(body)).toEqual({ first: 2, later: 0 })
  }, 60_000)
  // MobileNetV2 int8's stride-2 depthwise conv: its padded input (2.5 MB) asked for first, its
  // copies (3.7 MB) inside it, freed inner first; the first kept block that fit (3.7 MB) went to
  // the 2.5 MB request and the 3.7 MB one faulted 900 fresh pages in on every run (1.5 ms).
  it("a request takes the smallest kept block that fits (a smaller one asked for first leaves the larger its block)", () => {
    const body = `  const size_t outer = 2473344, inner = 3677184;
  char* a = tessera_alloc(outer); memset(a, 1, outer);
  char* b = tessera_alloc(inner); memset(b, 2, inner);
  tessera_free(b, inner); tessera_free(a, outer);`
    expect(freshAllocs(body)).toEqual({ first: 2, later: 0 })
  }, 60_000)

  it("with every slot taken, a larger block freed takes the smallest one's slot (the smallest is what faults again, not the largest)", () => {
    // a large scratch around nine small ones of distinct sizes: one block more than the slots
    const body = `  const size_t big = 1000000;
  char* a = tessera_alloc(big); memset(a, 1, big);
  for (int k = 0; k < 9; k++) { size_t n = 4096 * (k + 1); char* b = tessera_alloc(n); memset(b, 2, n); tessera_free(b, n); }
  for (int k = 0; k < 9; k++) { size_t n = 4096 * (k + 1); char* b = tessera_alloc(n); tessera_free(b, n); }
  tessera_free(a, big);`
    const { later } = freshAllocs(body, true)
    // (the runs after the first fault in the 4 KB block again, at most)
    expect(later).toBeLessThanOrEqual(5 * (4096 + 64))
  }, 60_000)
})

describe.skipIf(!HAVE_GCC)("c target: scalar semantics (gcc)", () => {
  it("casts wrap and truncate, float16/bfloat16 round, floor division and NaN match the TIR evaluator exactly", async () => {
    const { func, inputs } = semanticsFunc()
    const mod = await build([func])
    const got = callKernel(mod.kernels.get("semantics")!, func, inputs)
    const want = evaluatePrimFunc(func, inputs)
    for (const p of func.params.slice(1)) expect({ name: p.name, data: [...got.get(p.name)!.data] }).toEqual({ name: p.name, data: [...want.get(p.name)!.data] })
    // (the clamped conversions took the vectorizable form, the others tessera_f2i)
    // (buffers in parameter order: X, then the outputs)
    const source = emitC([func]).source
    const stored = (name: string) => {
      const b = `b${func.params.findIndex((p) => p.name === name)}[`
      return source.split("\n").find((l) => l.trimStart().startsWith(b))!
    }
    for (const q of ["q_i8", "q_u8f", "q_u8w"]) expect(stored(q)).toContain("tessera_f2i_in32")
    for (const q of ["q_i32w", "q_i8l", "to_i8"]) expect(stored(q)).toContain("tessera_f2i(")
  })

  it("a tessera_gemm micro-kernel intrinsic is called through its C definition", async () => {
    const intrin = gemmMicroKernel(4, 5, 3)
    const [i, j] = [v("i"), v("j")]
    const two = (name: string, shape: number[]): Buffer => ({ name, dtype: "float32", shape, scope: "global" })
    const init: Stmt = { kind: "for", var: i, min: c(0), extent: c(4), forKind: "serial", body: { kind: "for", var: j, min: c(0), extent: c(5), forKind: "serial", body: { kind: "store", buffer: "C", indices: [i, j], value: f32(0) } } }
    const gemm: Stmt = { kind: "intrinsic", intrin, output: { buffer: "C", base: [c(0), c(0)] }, inputs: [{ buffer: "A", base: [c(0), c(0)] }, { buffer: "B", base: [c(0), c(0)] }] }
    const func: PrimFunc = { name: "gemm", params: [two("A", [4, 3]), two("B", [3, 5]), two("C", [4, 5])], body: { kind: "seq", body: [init, gemm] } }
    const src = emitC([func]).source
    expect(src).toContain("tessera_gemm_4x5x3_float32(&b2[0], 5, &b0[0], 3, &b1[0], 5);")
    const inputs = new Map([
      ["A", tensor("float32", [4, 3], Float32Array.from({ length: 12 }, (_, k) => k - 5))],
      ["B", tensor("float32", [3, 5], Float32Array.from({ length: 15 }, (_, k) => (k % 4) - 1.5))],
    ])
    const mod = await build([func])
    expect([...callKernel(mod.kernels.get("gemm")!, func, inputs).get("C")!.data]).toEqual([...evaluatePrimFunc(func, inputs).get("C")!.data])
    // an intrinsic with no callable C definition must be lowered first
    const vnni: PrimFunc = { ...func, body: { ...gemm, intrin: vnniDot16x4 } }
    expect(() => emitC([vnni])).toThrow(emitError(/LowerIntrinsics/, "gemm"))
  })
})

// ---------------------------------------------------------------------------------------------
// Names, errors, the artifact

describe("c target: names and rejected programs", () => {
  const hostile = "x*/ ; system(\"rm -rf /\"); /*\n#include <evil> ??/\n\u2028"
  const f: PrimFunc = {
    name: "k0",
    params: [buf(`${hostile}in`, "float32", 4), buf(`${hostile}out`, "float32", 4)],
    body: {
      kind: "for",
      var: v(hostile),
      min: c(0),
      extent: c(4),
      forKind: "parallel",
      pragmas: [[hostile, hostile]],
      body: { kind: "allocate", buffer: buf(hostile, "float32", 1), body: { kind: "seq", body: [
        { kind: "store", buffer: hostile, indices: [c(0)], value: add(read(`${hostile}in`, [v(hostile)], "float32"), f32(1)) },
        { kind: "store", buffer: `${hostile}out`, indices: [v(hostile)], value: read(hostile, [c(0)], "float32") },
      ] } },
    },
  }

  it("names from programs reach the text only inside escaped comments", () => {
    const { source, header } = emitC([f])
    for (const text of [source, header]) {
      expect(text).not.toContain("x*/") // the comment cannot be closed early
      expect(text).not.toMatch(/^\s*#include <evil>/m)
      expect(text).not.toContain("??/")
      expect(text).not.toMatch(/[^\x09\x0a\x20-\x7e]/)
    }
    expect(() => emitC([{ ...f, name: "a b" }])).toThrow(emitError(/safe C identifier/))
    expect(() => emitC([{ ...f, name: "main" }])).toThrow(emitError(/safe C identifier/))
    expect(() => emitC([{ ...f, name: "tessera_floordiv" }])).toThrow(emitError(/safe C identifier/))
    expect(() => emitC([f, f])).toThrow(emitError(/twice/))
  })

  it.skipIf(!HAVE_GCC)("hostile names still build and run", async () => {
    const mod = await build([f])
    const out = callKernel(mod.kernels.get("k0")!, f, new Map([[`${hostile}in`, tensor("float32", [4], Float32Array.from([1, 2, 3, 4]))]]))
    expect([...out.get(`${hostile}out`)!.data]).toEqual([2, 3, 4, 5])
  })

  it("a barrier inside a thread loop (a GPU schedule) is rejected", () => {
    const t = v("tx")
    const g: PrimFunc = { name: "k1", params: [buf("A", "float32", 4)], body: { kind: "for", var: t, min: c(0), extent: c(4), forKind: "thread", thread: "threadIdx.x", body: { kind: "seq", body: [{ kind: "store", buffer: "A", indices: [t], value: f32(1) }, { kind: "barrier" }] } } }
    expect(() => emitC([g])).toThrow(emitError(/barrier inside a thread loop/, "k1"))
    expect(emitC([{ ...g, body: { kind: "barrier" } }]).source).toContain("barrier: no-op")
  })

  it.skipIf(!HAVE_GCC)("build, load and argument errors are typed", async () => {
    const bad = await runFailure(buildC("this is not C;\n"))
    expect(bad).toBeInstanceOf(CompileError)
    expect((bad as CompileError).stderr).toMatch(/error/)
    const missing = await runFailure(loadC(path.join(os.tmpdir(), "tessera-c-missing.so"), signatures([f])))
    expect(missing).toBeInstanceOf(LoadError)
    const mod = await build([f])
    const k = mod.kernels.get("k0")!
    expect(() => k(new Float32Array(4))).toThrow(DeviceRunError)
    expect(() => k(new Float32Array(4), new Float64Array(4))).toThrow(/Float32Array/)
    expect(() => k(new Float32Array(4), new Float32Array(3))).toThrow(/4 elements/)
  })

  it.skipIf(!HAVE_GCC)("a gcc run past its limit is killed and is a typed build failure", async () => {
    // any source against a limit of 1 ms (gcc takes longer than that to start)
    const slow = `float k(float x) { float s = 0; for (int i = 0; i < 100000; i++) s += x * i; return s; }\n`
    const cfg = { ...defaultCBuildConfig(), cacheDir: mkdtempSync(path.join(os.tmpdir(), "tessera-c-timeout-")), timeoutMs: 1 }
    const e = await runFailure(buildC(slow, cfg))
    expect(e).toBeInstanceOf(CompileError)
    expect((e as CompileError).reason).toMatch(/ran past its limit of 1 ms and was killed/)
    expect(readdirSync(cfg.cacheDir)).toEqual([])
  })

  it.skipIf(!HAVE_GCC)("a loaded program's buffers are 64-byte aligned (vector loads within cache lines)", () => {
    const { buffer, offsets: at } = alignedReserve([4, 100, 4096, 7])
    const base = koffi.address(new Uint8Array(buffer, 0, 1))
    for (const o of at) expect((BigInt(base) + BigInt(o)) % 64n).toBe(0n)
    // blocks do not overlap and fit in the buffer
    expect(at.every((o, k) => k === 0 || o >= at[k - 1] + [4, 100, 4096, 7][k - 1])).toBe(true)
    expect(at[3] + 7).toBeLessThanOrEqual(buffer.byteLength)
  })
})

describe("c target: host", () => {
  it("reads the vector ISA from cpuinfo flags and cache sizes from sysfs text", () => {
    expect(parseCpuInfo("processor : 0\nflags : fpu sse2 avx2 fma avx512f avx512_vnni\n")).toEqual({ isa: "avx512", fma: true, vnni: true })
    expect(parseCpuInfo("flags : fpu sse2 avx avx2\n").isa).toBe("avx2")
    expect(parseCpuInfo("Features : fp asimd\n").isa).toBe("neon")
    expect(parseCacheSize("1024K\n")).toBe(1024 * 1024)
    const t = hostTarget()
    expect(t.kind).toBe("c")
    expect(t.attrs.cores).toBeGreaterThanOrEqual(1)
    expect([1, 4, 8, 16]).toContain(t.attrs.vectorLanes)
  })

  it("reads cache sizes from getconf's CPUID values where sysfs lists none (a VM's kernel): L1 data, L2, the last level; empty or 0 is none", () => {
    // (this Zen 5 VM's getconf -a, abridged)
    const zen5 = [
      "LEVEL1_ICACHE_SIZE                 32768",
      "LEVEL1_ICACHE_ASSOC                ",
      "LEVEL1_DCACHE_SIZE                 49152",
      "LEVEL1_DCACHE_LINESIZE             64",
      "LEVEL2_CACHE_SIZE                  1048576",
      "LEVEL2_CACHE_ASSOC                 8",
      "LEVEL3_CACHE_SIZE                  33554432",
      "LEVEL4_CACHE_SIZE                  ",
    ].join("\n")
    expect(parseGetconfCaches(zen5)).toEqual({ l1Bytes: 49152, l2Bytes: 1048576, cacheBytes: 33554432 })
    expect(parseGetconfCaches("LEVEL1_DCACHE_SIZE 32768\nLEVEL2_CACHE_SIZE 0\nLEVEL3_CACHE_SIZE\n")).toEqual({ l1Bytes: 32768, cacheBytes: 32768 })
    expect(parseGetconfCaches("")).toEqual({})
  })
})

// ---------------------------------------------------------------------------------------------
// Goldens

describe("c target: goldens", () => {
  if (process.env.UPDATE_GOLDENS) updateGoldens()
  // (each case rendered inside its test, not while the tests are collected: a mutation run attributes
  // the lowering and emission it runs to that test, instead of running every test for each mutant)
  const holds = (name: string, text: string) => {
    const file = path.join(GOLDEN_DIR, name)
    expect(existsSync(file), `${file} is missing: UPDATE_GOLDENS=1 npx vitest run test/emit-c.test.ts`).toBe(true)
    expect(text === readFileSync(file, "utf8"), `${name} changed: review, then UPDATE_GOLDENS=1 npx vitest run test/emit-c.test.ts`).toBe(true)
  }
  for (const mk of [...GOLDEN_CASES, ...C_GOLDEN_CASES])
    it(`golden/c: the case ${mk.name} is the unit the emitter writes`, () => {
      const g = mk()
      holds(`${g.name}.c`, goldenUnit(g))
    })
  it("golden/c: the prelude header and the runtime unit are what the emitter writes", () => {
    const shared = emitC([])
    holds(shared.prelude.file, shared.prelude.source)
    for (const u of shared.units) holds(u.file, u.source)
  })

  it.skipIf(!HAVE_GCC)("the golden programs compute what their TE says", async () => {
    const cases = GOLDEN_CASES.map((mk) => mk())
    const funcs = cases.map(goldenFunc)
    const mod = await build(funcs)
    cases.forEach((g, k) => {
      const outs = callKernel(mod.kernels.get(g.name)!, funcs[k], g.inputs)
      assertAllClose(g.outputs.map((o) => outs.get(o.name)!), evaluateTE(g.outputs, g.inputs), 1e-4, 1e-5)
    })
  })

  it("a kernel's unit parses no stdio.h or stdlib.h (only the runtime's allocator needs them: gcc's time on a small unit is mostly headers)", () => {
    const e = emitC(GOLDEN_CASES.map((mk) => goldenFunc(mk())))
    for (const u of e.units.filter((u) => u.kernels.length > 0)) expect(`${e.prelude.source}${u.source}`).not.toMatch(/#include <std(io|lib)\.h>/)
    expect(e.units.find((u) => u.kernels.length === 0)!.source).toMatch(/#include <stdlib\.h>/)
  })

  // (the VNNI dot builds where gcc's -march=native has it: a host with AVX-512 VNNI)
  it.skipIf(!HAVE_GCC || !hostCpu().vnni)("the int8 goldens (VNNI: vpdpbusd, both lane forms; AVX2: vpmaddubsw / vpmaddwd) compute what their TE says, exactly", async () => {
    const cases = C_GOLDEN_CASES.map((mk) => mk())
    const funcs = cases.map(goldenFunc)
    const source = emitC(funcs).units.map((u) => u.source).join("\n")
    for (const fn of ["tessera_vnni_dot_16x4(", "tessera_vnni_dot_px_16x4(", "tessera_avx2_dot_16x4(", "_mm256_maddubs_epi16"]) expect(source).toContain(fn)
    const mod = await build(funcs)
    cases.forEach((g, k) => {
      const outs = callKernel(mod.kernels.get(g.name)!, funcs[k], g.inputs)
      expect(Array.from(outs.get(g.outputs[0].name)!.data as ArrayLike<number>)).toEqual(Array.from(evaluateTE(g.outputs, g.inputs)[0].data as ArrayLike<number>))
    })
  })

  it.skipIf(!HAVE_GCC || spawnSync("make", ["--version"], { stdio: "ignore" }).status !== 0)("the artifact builds with make and no Node", async () => {
    const cases = GOLDEN_CASES.map((mk) => mk())
    const funcs = cases.map(goldenFunc)
    const dir = mkdtempSync(path.join(os.tmpdir(), "tessera-c-artifact-"))
    try {
      await Effect.runPromise(writeArtifact(dir, cArtifact(emitC(funcs), "tessera_kernels")))
      const r = spawnSync("make", ["-C", dir], { encoding: "utf8" })
      expect(r.status, r.stderr).toBe(0)
      const mod = await Effect.runPromise(loadC(path.join(dir, "libtessera_kernels.so"), signatures(funcs)))
      const g = cases.find((x) => x.name === "dense")!
      const k = cases.indexOf(g)
      const outs = callKernel(mod.kernels.get("dense")!, funcs[k], g.inputs)
      assertAllClose(g.outputs.map((o) => outs.get(o.name)!), evaluateTE(g.outputs, g.inputs), 1e-4, 1e-5)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
