// The requantizing epilogue of the int8 ops (op-library-quant-int.ts's `requantize`, float32 scales:
// int(clamp(round(float32(acc) · m) + zp, lo, hi))) and the c target's rendering of it (src/emit/c/expr.ts
// requantizeF2i: clamped to [lo − zp, hi − zp] before the rounding, then + zp, MLAS's order). On edge
// cases — exact ties at .5 (multipliers 2^-k and 1.5 with accumulators on the half), saturation on
// both sides, negative sums, sums past 2^24 (float32 rounds them) and int32's ends, large
// multipliers (1000, 3e38: the product overflows to ±Infinity), a zero, subnormal and infinite
// multiplier (0 · Infinity is NaN, which gives 0), zero points at the type's ends — the TE evaluator,
// the c target (the loop vectorized by 16: gcc's zmm form) and the wasm target give exactly the
// round-then-clamp order's values, to int8 / uint8 and to the int32 stage the narrowed forms store.
// The c case fails with the upper bound left at hi (the zero point not taken off: tried).
// QuantizeLinear's compute, the same clamp in float64 (float32(x / s) rounded, + zp; op-library-quant.ts),
// which the c target renders in the same order (2026-11-27, eleventh session): on c, vectorized by 16,
// over ties, NaN, ±Infinity, 3e38, 2^60, subnormals, zero and huge scales, the bounds' edges, it gives
// the round-then-clamp values; it fails with the float64 form's upper bound left at hi (tried).
// Since the thirteenth session the steps after the quotient run in float32 and c divides in float32
// (its narrowedFloatOp, checked below on every operation it narrows, and not on int32 operands:
// narrowing those too fails it, tried).
// Since the fifteenth session c renders a vectorized loop of 16 lanes or more storing that conversion
// as AVX-512 statements (src/emit/c/requantize-store.ts: clamp, an ordered-compare mask, a masked
// rounding convert, the zero point as an int32, a narrowing store): on loops of 16–64 lanes (whole
// vectors, the last vector again where the extent is not whole vectors, a masked last vector where
// the value reads the stored buffer), to int8 / uint8, to the int32 stage, and an int32 narrowed by a
// cast, over the same edge cases, it gives the round-then-clamp values; the emitted C is checked to
// take that form.
// Since the sixteenth session (2026-11-28) also the contrib ops' store (QLinearAdd's two fmaf over
// 8-bit operands, rounded, + z, clamped after: the bounds second): the statements equal the TE
// evaluator (whose fma is exact) over NaN / Infinity products, saturation and zero points; it fails
// with z dropped from that form (tried: "case t1: … expected [ +0, 255, 132, … ] to deeply equal
// [ +0, 184, 54, … ]").
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import type { DType } from "../../src/ast/graph/dtype.js"
import { fromArray, type Tensor } from "../../src/ast/graph/tensor.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { add, c, call, cast, div, fma32, mapExpr, max, min, mul, read, sub } from "../../src/ast/te/expr.js"
import { at, compute, placeholder, type ComputeTensor, type Placeholder } from "../../src/ast/te/tensor.js"
import * as S from "../../src/ast/schedule/schedule.js"
import { createSchedule } from "../../src/ast/schedule/schedule-core.js"
import { mapStmt, type PrimFunc } from "../../src/ast/tir/tir.js"
import { emitC } from "../../src/emit/c/emit.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { requantize } from "../../src/lowering/op-library-quant-int.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { allocate } from "../../src/ast/graph/dtype.js"
import { sizeOf } from "../../src/ast/graph/tensor.js"
import { loadWasmModuleSync } from "../../src/device/wasm/load.js"
import { emitWasmModule } from "../../src/emit/wasm/emit.js"
import { lawParams } from "../support.js"
import { buildFuncs, callKernel, HAVE_GCC, NO_GCC } from "../support-c.js"

const N = 48

/** Round half to even (nearbyint in the default mode). */
const roundEven = (x: number): number => {
  const r = Math.round(x)
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r
}

/** The replaced order: float32(float32(acc) · m), rounded half to even, plus zp in float32, clamped; NaN gives 0. */
const replaced = (acc: number, m: number, zp: number, out: "int8" | "uint8"): number => {
  const [lo, hi] = out === "int8" ? [-128, 127] : [0, 255]
  const q = Math.fround(roundEven(Math.fround(Math.fround(acc) * m)) + zp)
  return Number.isNaN(q) ? 0 : Math.max(lo, Math.min(hi, q))
}

type Case = { readonly m: number; readonly zp: number; readonly out: "int8" | "uint8"; readonly wide: boolean; readonly accs: readonly number[] }

const SPECIAL_M = [0.5, 0.25, 0.125, 1.5, 2 ** -10, 1000, 3e38, 0, 1e-45, Infinity, 0.0123456789]
const SPECIAL_ACC = [0, 1, -1, 2 ** 24 + 1, -(2 ** 24) - 3, 2147483647, -2147483648, 255, -255, 383, -383, 129, -129]

/** Accumulators whose product with `m` is a tie (k + 0.5) or lands near the bounds, when m is a power of two or 1.5. */
const tiesFor = (m: number, k: number): number[] => {
  const inv = 1 / m
  if (!Number.isInteger(inv / 2) && m !== 1.5) return []
  // (m · acc = k + 0.5: acc = (2k + 1) / (2m), whole for m = 2^-j, j ≥ 1; for 1.5, acc = (2k + 1) / 3 where whole)
  const acc = ((2 * k + 1) * inv) / 2
  return Number.isInteger(acc) ? [acc, -acc] : []
}

const arbCase: fc.Arbitrary<Case> = fc
  .record({
    m: fc.oneof(fc.constantFrom(...SPECIAL_M), fc.float({ min: Math.fround(1e-6), max: 10, noNaN: true })),
    out: fc.constantFrom<"int8" | "uint8">("int8", "uint8"),
    zpPick: fc.oneof(fc.constantFrom(0, 1, 2), fc.nat(255)),
    wide: fc.boolean(),
    ks: fc.array(fc.integer({ min: -400, max: 400 }), { minLength: 8, maxLength: 8 }),
    rand: fc.array(fc.integer({ min: -2147483648, max: 2147483647 }), { minLength: N, maxLength: N }),
    small: fc.array(fc.integer({ min: -70000, max: 70000 }), { minLength: N, maxLength: N }),
  })
  .map(({ m, out, zpPick, wide, ks, rand, small }) => {
    // (the zero point at the type's low end, high end, 0, or anywhere in it)
    const [lo, hi] = out === "int8" ? [-128, 127] : [0, 255]
    const zp = zpPick === 0 ? lo : zpPick === 1 ? hi : zpPick === 2 ? Math.max(lo, 0) : lo + (zpPick % 256)
    const mf = Math.fround(m)
    const ties = ks.flatMap((k) => tiesFor(mf, k))
    // (near the bounds: the accumulators whose products sit just inside and outside [lo − zp, hi − zp])
    const edge = mf > 0 && Number.isFinite(mf) ? [lo - zp, hi - zp].flatMap((b) => [-1, 0, 1].map((d) => Math.round((b + d * 0.5) / mf))) : []
    const accs = [...SPECIAL_ACC, ...ties, ...edge, ...small, ...rand].filter((a) => a >= -2147483648 && a <= 2147483647).slice(0, N)
    return { m: mf, zp, out, wide, accs }
  })

/** The epilogue over acc [N] (int32), m [1] (float32), zp [1]: to the 8-bit type, or to int32 (`wide`: the narrowed forms' stage). */
const build = (cs: Case, k: number): { out: ComputeTensor; feeds: Map<string, Tensor> } => {
  const acc = placeholder(`acc${k}`, [N], "int32")
  const m = placeholder(`m${k}`, [1], "float32")
  const zp = placeholder(`zp${k}`, [1], cs.out)
  const as: DType = cs.wide ? "int32" : cs.out
  const out = compute(`q${k}`, [N], (i) => requantize(at(acc, i), cast("float64", at(m, c(0))), at(zp, c(0)), cs.out, false, as), as)
  return { out, feeds: epilogueFeeds([acc, cs.accs], [m, cs.m], [zp, cs.zp]) }
}

/** The feeds of an epilogue over N values (`xs` repeated), a scale [1] and a zero point [1]. */
const epilogueFeeds = (...[[x, xs], [s, sv], [zp, zv]]: [[Placeholder, readonly number[]], [Placeholder, number], [Placeholder, number]]): Map<string, Tensor> =>
  new Map<string, Tensor>([
    [x.name, fromArray(x.dtype, [N], Array.from({ length: N }, (_, i) => xs[i % xs.length]))],
    [s.name, fromArray(s.dtype, [1], [sv])],
    [zp.name, fromArray(zp.dtype, [1], [zv])],
  ])

/** The epilogue lowered with its loop split by 16 and the inner loop vectorized. */
const lowered = (out: ComputeTensor, name: string): PrimFunc => {
  const sp = S.split(createSchedule([out]), out.name, out.axes[0].var.name, { factor: 16 })
  return { ...runTirSync(cpuTirPipeline(), lowerSync(S.vectorize(sp.schedule, out.name, sp.inner))), name }
}

const want = (cs: Case): number[] => Array.from({ length: N }, (_, i) => replaced(cs.accs[i % cs.accs.length], cs.m, cs.zp, cs.out))

/** QuantizeLinear's order in float64: float32(x / s) rounded half to even, plus zp, clamped; NaN gives 0. */
const quantized = (x: number, s: number, zp: number, out: "int8" | "uint8"): number => {
  const [lo, hi] = out === "int8" ? [-128, 127] : [0, 255]
  const q = roundEven(Math.fround(x / s)) + zp
  return Number.isNaN(q) ? 0 : Math.max(lo, Math.min(hi, q))
}

type QCase = { readonly s: number; readonly zp: number; readonly out: "int8" | "uint8"; readonly xs: readonly number[] }

const SPECIAL_X = [0, -0, NaN, Infinity, -Infinity, 3e38, -3e38, 1e-45, 2 ** 60, -(2 ** 60), 127.5, -128.5, 255.5, 0.5, -0.5, 1.5, 2.5]

const arbQuantize: fc.Arbitrary<QCase> = fc
  .record({
    s: fc.oneof(fc.constantFrom(1, 0.5, 0.25, 2 ** -10, 1e-45, 0, 3e38, 0.0078125), fc.float({ min: Math.fround(1e-6), max: 10, noNaN: true })),
    out: fc.constantFrom<"int8" | "uint8">("int8", "uint8"),
    zpPick: fc.oneof(fc.constantFrom(0, 1, 2), fc.nat(255)),
    ks: fc.array(fc.integer({ min: -400, max: 400 }), { minLength: 12, maxLength: 12 }),
    rand: fc.array(fc.float({ min: -1e6, max: 1e6, noNaN: true }), { minLength: N, maxLength: N }),
  })
  .map(({ s, out, zpPick, ks, rand }) => {
    const [lo, hi] = out === "int8" ? [-128, 127] : [0, 255]
    const zp = zpPick === 0 ? lo : zpPick === 1 ? hi : zpPick === 2 ? Math.max(lo, 0) : lo + (zpPick % 256)
    const sf = Math.fround(s)
    // (ties: x = (k + 0.5) · s where that is a float32; the bounds' edges: (b ± 0.5) · s)
    const ties = ks.flatMap((k) => {
      const x = Math.fround((k + 0.5) * sf)
      return Math.fround(x / sf) === k + 0.5 ? [x] : []
    })
    const edge = [lo - zp, hi - zp].flatMap((b) => [-1, 0, 1].map((d) => Math.fround((b + d * 0.5) * sf)))
    return { s: sf, zp, out, xs: [...SPECIAL_X, ...ties, ...edge, ...rand].slice(0, N) }
  })

/** QuantizeLinear's compute as op-library-quant.ts writes it over x [N] (float32), s [1] (float32), zp [1]. */
const buildQuantize = (cs: QCase, k: number): { out: ComputeTensor; feeds: Map<string, Tensor> } => {
  const x = placeholder(`x${k}`, [N], "float32")
  const s = placeholder(`s${k}`, [1], "float32")
  const zp = placeholder(`zq${k}`, [1], cs.out)
  const [lo, hi] = cs.out === "int8" ? [-128, 127] : [0, 255]
  // (the steps after the float32 quotient in float32, as the compute writes them since the thirteenth session)
  const out = compute(`y${k}`, [N], (i) => {
    const q0 = call("round", cast("float32", div(cast("float64", at(x, i)), cast("float64", at(s, c(0))))))
    return cast(cs.out, max(c(lo, "float32"), min(c(hi, "float32"), add(q0, cast("float32", at(zp, c(0)))))))
  }, cs.out)
  return { out, feeds: epilogueFeeds([x, cs.xs], [s, cs.s], [zp, cs.zp]) }
}

describe("requantize: the c target clamps before the rounding, every target equals round-then-clamp", () => {
  it("the TE evaluator gives the replaced order's values (round, + zp, clamp) on ties, saturation, overflowing and NaN products", () => {
    let ties = 0
    let nan = 0
    fc.assert(
      fc.property(arbCase, (cs) => {
        const { out, feeds } = build(cs, 0)
        expect(Array.from(evaluateTE([out], feeds)[0].data as ArrayLike<number>)).toEqual(want(cs))
        if (cs.accs.some((a) => Math.abs((Math.fround(a) * cs.m) % 1) === 0.5)) ties++
        if (cs.accs.some((a) => Number.isNaN(Math.fround(a) * cs.m))) nan++
      }),
      lawParams(300),
    )
    expect(ties).toBeGreaterThan(20)
    expect(nan).toBeGreaterThan(0)
  })

  it.skipIf(!HAVE_GCC)(`the c target, vectorized by 16, gives the same values (one gcc run)${NO_GCC}`, async () => {
    const cases = fc.sample(arbCase, { seed: 7, numRuns: 60 })
    const built = cases.map((cs, k) => build(cs, k))
    const funcs: PrimFunc[] = built.map(({ out }, k) => lowered(out, `k${k}`))
    const mod = await buildFuncs(funcs)
    built.forEach(({ out, feeds }, k) => {
      const got = callKernel(mod.kernels.get(`k${k}`)!, funcs[k], feeds).get(out.name)!
      expect(Array.from(got.data as ArrayLike<number>), `case k${k}: ${JSON.stringify({ ...cases[k], accs: undefined })}`).toEqual(want(cases[k]))
    })
  })

  it.skipIf(!HAVE_GCC)(`QuantizeLinear's form (op-library-quant.ts: the quotient, then float32), vectorized by 16 on c, gives the round-then-clamp values (one gcc run)${NO_GCC}`, async () => {
    const cases = fc.sample(arbQuantize, { seed: 11, numRuns: 60 })
    const built = cases.map((cs, k) => buildQuantize(cs, k))
    const funcs: PrimFunc[] = built.map(({ out }, k) => lowered(out, `q${k}`))
    const mod = await buildFuncs(funcs)
    let ties = 0
    built.forEach(({ out, feeds }, k) => {
      const got = callKernel(mod.kernels.get(`q${k}`)!, funcs[k], feeds).get(out.name)!
      const cs = cases[k]
      if (cs.xs.some((x) => Math.abs(Math.fround(x / cs.s) % 1) === 0.5)) ties++
      expect(Array.from(got.data as ArrayLike<number>), `case q${k}: ${JSON.stringify({ ...cs, xs: undefined })}`).toEqual(cs.xs.map((x) => quantized(x, cs.s, cs.zp, cs.out)))
    })
    expect(ties).toBeGreaterThan(10)
  })

  it("the wasm target gives the same values", () => {
    fc.assert(
      fc.property(arbCase, (cs) => {
        const { out, feeds } = build(cs, 0)
        const f = lowered(out, "k")
        const em = emitWasmModule([{ name: "k", func: f }])
        const fn = loadWasmModuleSync(em.bytes, em.kernels).get("k")!
        const arrays = f.params.map((p) => feeds.get(p.name)?.data.slice() ?? allocate(p.dtype, sizeOf(p.shape)))
        fn(...arrays)
        expect(Array.from(arrays[f.params.findIndex((p) => p.name === out.name)] as ArrayLike<number>)).toEqual(want(cs))
      }),
      lawParams(200),
    )
  })
})

/** Float32 values with the edges: ties of the double rounding are found among random ones (divisions), so many. */
const arbF32 = fc.oneof(
  fc.constantFrom(0, -0, 1, -1, 3, 1.5, 2 ** -149, 2 ** -126, 3.4028234663852886e38, Infinity, -Infinity, NaN, 16777217, 0.1),
  fc.float({ noDefaultInfinity: false }),
  fc.float({ min: Math.fround(0.5), max: 2, noNaN: true }),
)

describe("the c target's float32 form of a float64 operation of float32 values (src/emit/c/expr.ts narrowedFloatOp)", () => {
  it.skipIf(!HAVE_GCC)(`cast<float32>(a op b) in float64, vectorized by 16 on c, equals the evaluator; an int32 operand is not narrowed${NO_GCC}`, async () => {
    const OPS = [add, sub, mul, div] as const
    const cases = fc.sample(fc.record({ op: fc.nat(3), int: fc.boolean(), a: fc.array(arbF32, { minLength: N, maxLength: N }), b: fc.array(arbF32, { minLength: N, maxLength: N }), ints: fc.array(fc.integer(), { minLength: N, maxLength: N }) }), { seed: 5, numRuns: 24 })
    const built = cases.map((cs, k) => {
      const a = placeholder(`a${k}`, [N], cs.int ? "int32" : "float32")
      const b = placeholder(`b${k}`, [N], "float32")
      const out = compute(`z${k}`, [N], (i) => cast("float32", OPS[cs.op](cast("float64", at(a, i)), cast("float64", at(b, i)))), "float32")
      const feeds = new Map<string, Tensor>([[a.name, fromArray(a.dtype, [N], cs.int ? cs.ints : cs.a)], [b.name, fromArray("float32", [N], cs.b)]])
      return { out, feeds }
    })
    const funcs: PrimFunc[] = built.map(({ out }, k) => lowered(out, `z${k}`))
    const mod = await buildFuncs(funcs)
    built.forEach(({ out, feeds }, k) => {
      const got = callKernel(mod.kernels.get(`z${k}`)!, funcs[k], feeds).get(out.name)!
      expect(Array.from(got.data as ArrayLike<number>), `case z${k}: op ${cases[k].op}, int ${cases[k].int}`).toEqual(Array.from(evaluateTE([out], feeds)[0].data as ArrayLike<number>))
    })
  })
})

type StoreCase = Case & { readonly len: number; readonly form: "direct" | "stage" | "narrowed" | "in-place" }

/**
 * The epilogue over acc [len], vectorized whole: stored `direct`ly to the 8-bit type, to the int32
 * stage, as an int32 `narrowed` by a cast to the 8-bit type (a fused conv's output over its stage),
 * or `in-place`: the int32 stage reading its own element (the value reads the stored buffer, so the
 * last vector is masked).
 */
const buildStore = (cs: StoreCase, k: number): { out: ComputeTensor; func: PrimFunc; feeds: Map<string, Tensor> } => {
  const acc = placeholder(`acc${k}`, [cs.len], "int32")
  const m = placeholder(`m${k}`, [1], "float32")
  const zp = placeholder(`zp${k}`, [1], cs.out)
  const wideStage = cs.form === "stage" || cs.form === "in-place"
  const rq = (i: ReturnType<typeof c>) => requantize(at(acc, i), cast("float64", at(m, c(0))), at(zp, c(0)), cs.out, false, cs.form === "direct" ? cs.out : "int32")
  const out = compute(`q${k}`, [cs.len], (i) => (cs.form === "narrowed" ? cast(cs.out, rq(i)) : rq(i)), wideStage ? "int32" : cs.out)
  const sch = S.vectorize(createSchedule([out]), out.name, out.axes[0].var.name)
  const f0: PrimFunc = { ...runTirSync(cpuTirPipeline(), lowerSync(sch)), name: `s${k}` }
  // (in place: the value reads the stored buffer where it read acc, which is then unused)
  const func: PrimFunc =
    cs.form === "in-place"
      ? { ...f0, body: mapStmt(f0.body, () => undefined, (e) => mapExpr(e, (x) => (x.kind === "read" && x.source === acc.name ? read(out.name, x.indices, "int32") : undefined))) }
      : f0
  const values = Array.from({ length: cs.len }, (_, i) => cs.accs[i % cs.accs.length])
  const feeds = new Map<string, Tensor>([
    [acc.name, fromArray("int32", [cs.len], values)],
    [m.name, fromArray("float32", [1], [cs.m])],
    [zp.name, fromArray(cs.out, [1], [cs.zp])],
    ...(cs.form === "in-place" ? ([[out.name, fromArray("int32", [cs.len], values)]] as const) : []),
  ])
  return { out, func, feeds }
}

describe("the c target's requantizing stores (src/emit/c/requantize-store.ts)", () => {
  it.skipIf(!HAVE_GCC)(`AVX-512 statements of 16 lanes over loops of 16–64, to int8 / uint8 / the int32 stage, give the round-then-clamp values (one gcc run)${NO_GCC}`, async () => {
    const arb = fc
      .record({ cs: arbCase, len: fc.constantFrom(16, 28, 40, 48, 56, 64), form: fc.constantFrom<StoreCase["form"]>("direct", "stage", "narrowed", "in-place") })
      .map(({ cs, len, form }): StoreCase => ({ ...cs, len, form }))
    const cases = fc.sample(arb, { seed: 13, numRuns: 80 })
    const built = cases.map((cs, k) => buildStore(cs, k))
    const funcs = built.map((b) => b.func)
    // (every case takes the form: one statement call per 16 lanes and the last vector's, masked only in place)
    const { source } = emitC(funcs, { poison: true })
    for (const [k, cs] of cases.entries()) {
      const body = source.slice(source.lastIndexOf(`void s${k}(`))
      const text = body.slice(0, body.indexOf("#else"))
      expect(text, `case s${k} (${cs.form}, ${cs.len} lanes) is not rendered as requantizing stores`).toContain("tessera_requant16(")
      expect(text.includes("_mm512_mask_"), `case s${k}: masked last vector`).toBe(cs.form === "in-place" && cs.len % 16 !== 0)
    }
    const mod = await buildFuncs(funcs)
    built.forEach(({ out, func, feeds }, k) => {
      const cs = cases[k]
      const got = callKernel(mod.kernels.get(func.name)!, func, feeds).get(out.name)!
      const expected = Array.from({ length: cs.len }, (_, i) => replaced(cs.accs[i % cs.accs.length], cs.m, cs.zp, cs.out))
      expect(Array.from(got.data as ArrayLike<number>), `case s${k}: ${JSON.stringify({ ...cs, accs: undefined })}`).toEqual(expected)
    })
    expect(new Set(cases.map((cs) => cs.form)).size).toBe(4)
    expect(cases.some((cs) => cs.accs.some((a) => Number.isNaN(Math.fround(a) * cs.m)))).toBe(true)
  })
})

/**
 * The contrib ops' saturating store over two 8-bit operands (op-library-quant-contrib.ts: QLinearAdd's
 * a·ra + (b·rb + fixed), two fmaf, rounded, + z, then clamped — the bounds second): random ra, rb,
 * fixed among specials (0, 1e-45, 3e38, ±Infinity: 0 · Infinity is NaN, which gives 0), random 8-bit
 * operands with both ends of the type, z 0 (the sum folded away) or any integer in the type's range.
 */
type ContribCase = { readonly len: number; readonly x: "int8" | "uint8"; readonly out: "int8" | "uint8"; readonly ra: number; readonly rb: number; readonly fixed: number; readonly z: number; readonly a: readonly number[]; readonly b: readonly number[] }

const SPECIAL_R = [0, 1e-45, 0.5, 1, 3e38, Infinity, -Infinity, 0.0078125, 1.0267876386642456]

const arbContrib: fc.Arbitrary<ContribCase> = fc
  .record({
    len: fc.constantFrom(16, 28, 40, 56, 64),
    x: fc.constantFrom<"int8" | "uint8">("int8", "uint8"),
    out: fc.constantFrom<"int8" | "uint8">("int8", "uint8"),
    ra: fc.oneof(fc.constantFrom(...SPECIAL_R), fc.float({ min: -4, max: 4, noNaN: true })),
    rb: fc.oneof(fc.constantFrom(...SPECIAL_R), fc.float({ min: -4, max: 4, noNaN: true })),
    fixed: fc.oneof(fc.constantFrom(0, 0.5, -0.5, 127.5, 14.638076782226562, 3e38), fc.float({ min: -300, max: 300, noNaN: true })),
    z: fc.oneof(fc.constant(0), fc.integer({ min: -128, max: 255 })),
    bytes: fc.array(fc.nat(255), { minLength: 128, maxLength: 128 }),
  })
  .map(({ len, x, out, ra, rb, fixed, z, bytes }) => {
    const v = (n: number) => (x === "int8" ? n - 128 : n)
    const ends = x === "int8" ? [-128, 127, 0, -1] : [0, 255, 128, 1]
    const a = [...ends, ...bytes.slice(0, 64).map(v)].slice(0, len)
    const b = [...ends.reverse(), ...bytes.slice(64).map(v)].slice(0, len)
    return { len, x, out, ra: Math.fround(ra), rb: Math.fround(rb), fixed: Math.fround(fixed), z, a, b }
  })

const buildContrib = (cs: ContribCase, k: number): { out: ComputeTensor; func: PrimFunc; feeds: Map<string, Tensor> } => {
  const a = placeholder(`a${k}`, [cs.len], cs.x)
  const b = placeholder(`b${k}`, [cs.len], cs.x)
  const [lo, hi] = cs.out === "int8" ? [-128, 127] : [0, 255]
  const F = "float32"
  const out = compute(`t${k}`, [cs.len], (i) => {
    const v = fma32(cast(F, at(a, i)), c(cs.ra, F), fma32(cast(F, at(b, i)), c(cs.rb, F), c(cs.fixed, F)))
    return cast(cs.out, min(max(add(call("round", v), c(cs.z, F)), c(lo, F)), c(hi, F)))
  }, cs.out)
  const sch = S.vectorize(createSchedule([out]), out.name, out.axes[0].var.name)
  const func: PrimFunc = { ...runTirSync(cpuTirPipeline(), lowerSync(sch)), name: `t${k}` }
  const feeds = new Map<string, Tensor>([
    [a.name, fromArray(cs.x, [cs.len], cs.a)],
    [b.name, fromArray(cs.x, [cs.len], cs.b)],
  ])
  return { out, func, feeds }
}

describe("the c target's requantizing stores of the contrib ops' form (clamped after the rounding, fmaf, 8-bit operands)", () => {
  it.skipIf(!HAVE_GCC)(`AVX-512 statements over loops of 16–64 give the TE evaluator's values (one gcc run)${NO_GCC}`, async () => {
    const cases = fc.sample(arbContrib, { seed: 29, numRuns: 60 })
    const built = cases.map((cs, k) => buildContrib(cs, k))
    const funcs = built.map((x) => x.func)
    const { source } = emitC(funcs, { poison: true })
    for (const [k, cs] of cases.entries()) {
      const body = source.slice(source.lastIndexOf(`void t${k}(`))
      const text = body.slice(0, body.indexOf("#else"))
      expect(text, `case t${k} (${cs.len} lanes) is not rendered as requantizing stores`).toContain("tessera_requant16(_mm512_fmadd_ps(")
      expect(text).toContain(cs.x === "int8" ? "_mm512_cvtepi8_epi32(" : "_mm512_cvtepu8_epi32(")
    }
    const mod = await buildFuncs(funcs)
    built.forEach(({ out, func, feeds }, k) => {
      const got = callKernel(mod.kernels.get(func.name)!, func, feeds).get(out.name)!
      const want = evaluateTE([out], feeds)[0]
      expect(Array.from(got.data as ArrayLike<number>), `case t${k}: ${JSON.stringify(cases[k])}`).toEqual(Array.from(want.data as ArrayLike<number>))
    })
    // (the cases reach NaN products, saturation on both sides and a zero point)
    expect(cases.some((cs) => !Number.isFinite(cs.ra) || !Number.isFinite(cs.rb))).toBe(true)
    expect(cases.some((cs) => cs.z !== 0)).toBe(true)
  })
})
