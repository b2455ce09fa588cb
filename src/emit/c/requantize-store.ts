// A requantizing store of the c target: a vectorized loop (16 lanes or more) whose body is one
// contiguous store of the requantizing epilogue's conversion (op-library-quant-int.ts's requantize:
// int(max(lo, min(hi, round(x) + z))), the form expr.ts's requantizeF2i renders) rendered as 16-lane
// AVX-512 statements. Where the extent is not whole vectors, the last statement covers the loop's
// last 16 lanes (some stored twice, the same value both times: the value reads nothing it stores), or,
// where the value reads the stored buffer, only the lanes left, under a mask.
//
// Why: gcc 12 vectorizes the scalar form (expr.ts: tessera_maxcf / tessera_mincf, nearbyintf, then
// tessera_f2i_in32f's NaN select and a truncating convert) as compare + blend for each clamp (the
// select routed through vcond_mask, as vector-store.ts says of ReLU6), vrndscaleps, vaddps, a NaN
// compare and a masked convert, ~12–15 instructions a vector; and where the loop stores 8-bit lanes
// it may take 16-byte vectors (docs/backends.md, eighth session). Here: vpaddd / vcvtdq2ps / vmulps
// (the value), vminps, vmaxps, one ordered compare, a masked vcvtps2dq rounding half to even, a
// masked vpaddd of the zero point, and the narrowing store (vpmovdb / vpmovdw) — 64-byte vectors
// whatever the stored type.
//
// Meaning, lane by lane, the scalar form's (laws/lowering/requantize.law.ts checks both against the
// round-then-clamp formula):
// - x NaN: the scalar form carries NaN through its min / max and the rounding to tessera_f2i_in32f's
//   0; here the ordered compare's mask is clear in that lane and the masked convert and add give 0.
// - x a number: c = max(lo − z, min(hi − z, x)) (vminps / vmaxps with the bound first: `k < x ? k : x`,
//   tessera_mincf's select); _mm512_maskz_cvt_roundps_epi32 with _MM_FROUND_TO_NEAREST_INT is
//   nearbyintf in the default mode (round half to even: the TE's round) as an int32 — c lies within
//   [lo − z, hi − z], |lo|, |hi| ≤ 65536 and z an 8- or 16-bit value, so the integer fits; adding z
//   as an int32 gives round(c) + z, which the scalar form computes in float32 exactly (integers below
//   2^24) and converts by truncation to itself.
// - the narrowing: vpmovdb / vpmovdw keep the low 8 / 16 bits, C's conversion of an int32 to an 8- or
//   16-bit type (modulo, under gcc); int32 is stored as it is.
// - x itself: int32 + − × (wrapping, as the c target's -fwrapv scalar code), int32 → float32
//   (vcvtdq2ps: round to nearest, as C's conversion in the default mode), float32 × and ÷, and a
//   float64 × or ÷ of two float32 values rounded to float32, done in float32 (expr.ts
//   narrowedFloatOp's proof). No float + or −: the scalar form might contract a product into an FMA
//   (gcc's default -ffp-contract=fast) where this one would not, or the other way.
// - the contrib ops' store (clampedAfterRounding: int(min(max(round(x) + z, lo), hi)), QLinearAdd's
//   x = fmaf(a, ra, fmaf(b, rb, fixed)) over 8-bit a, b: fmaf is vfmadd (one rounding either way; an
//   explicit call, so nothing for gcc to contract differently), an 8-bit read widened to float32 is
//   exact (16 bytes loaded, vpmovsxbd / vpmovzxbd, vcvtdq2ps). gcc had vectorized the scalar form in
//   zmm here, ~100 instructions a 64 values; ResNet-18 int8's 8 QLinearAdds 0.27 → 0.12 ms.
// Without AVX-512 (#else) the loop is the scalar one, as written before.
import type { DType } from "../../ast/graph/dtype.js"
import type { Expr, Read } from "../../ast/te/expr.js"
import { c, collect, exprKey, substitute } from "../../ast/te/expr.js"
import { coef, mentions } from "../../ast/te/linear-index.js"
import type { ForStmt, Walk } from "../c-family/dialect.js"
import { castC, constC, requantizeBounds, requantizeForm, type RequantizeForm } from "./expr.js"

/** Lanes of one statement (64 bytes of int32 / float32: an AVX-512 register). */
export const REQUANTIZE_LANES = 16

/** The helpers' text (AVX-512 only), included once before the kernels that use them. */
export const REQUANTIZE_HELPERS = `/* requantizing stores (requantize-store.ts): int(max(lo, min(hi, round(x) + z))) 16 lanes at a time,
   x's NaN lanes 0, round half to even; the value kept to 8 / 16 bits by truncation */
#if defined(__AVX512F__)
#include <immintrin.h>
static inline __attribute__((always_inline)) __m512i tessera_requant16(__m512 x, float lo, float hi, int32_t z) {
  __mmask16 k = _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q);
  __m512 v = _mm512_max_ps(_mm512_set1_ps(lo), _mm512_min_ps(_mm512_set1_ps(hi), x));
  __m512i r = _mm512_maskz_cvt_roundps_epi32(k, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_maskz_add_epi32(k, r, _mm512_set1_epi32(z));
}
static inline __attribute__((always_inline)) __m512 tessera_loadf16m(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
static inline __attribute__((always_inline)) __m512i tessera_loadi16m(const int32_t* p, __mmask16 m) { return _mm512_maskz_loadu_epi32(m, p); }
#endif
`

/** The stored types, and their store of 16 int32 lanes (all of them / those of mask m). */
const STORES: Readonly<Partial<Record<DType, { readonly ptr: string; readonly all: (p: string, v: string) => string; readonly masked: (p: string, m: string, v: string) => string }>>> = {
  int32: { ptr: "int32_t", all: (p, v) => `_mm512_storeu_si512((void*)(${p}), ${v})`, masked: (p, m, v) => `_mm512_mask_storeu_epi32((void*)(${p}), ${m}, ${v})` },
  int8: { ptr: "int8_t", all: (p, v) => `_mm_storeu_si128((__m128i*)(${p}), _mm512_cvtepi32_epi8(${v}))`, masked: (p, m, v) => `_mm512_mask_cvtepi32_storeu_epi8((void*)(${p}), ${m}, ${v})` },
  uint8: { ptr: "uint8_t", all: (p, v) => `_mm_storeu_si128((__m128i*)(${p}), _mm512_cvtepi32_epi8(${v}))`, masked: (p, m, v) => `_mm512_mask_cvtepi32_storeu_epi8((void*)(${p}), ${m}, ${v})` },
  int16: { ptr: "int16_t", all: (p, v) => `_mm256_storeu_si256((__m256i*)(${p}), _mm512_cvtepi32_epi16(${v}))`, masked: (p, m, v) => `_mm512_mask_cvtepi32_storeu_epi16((void*)(${p}), ${m}, ${v})` },
  uint16: { ptr: "uint16_t", all: (p, v) => `_mm256_storeu_si256((__m256i*)(${p}), _mm512_cvtepi32_epi16(${v}))`, masked: (p, m, v) => `_mm512_mask_cvtepi32_storeu_epi16((void*)(${p}), ${m}, ${v})` },
}

/** The parts of a requantizing conversion (expr.ts's requantizeForm), or undefined where `e` is not one or not all float32. */
export type Requantize = RequantizeForm

export const requantizeParts = (e: Expr): Requantize | undefined => {
  if (e.kind !== "cast" || !STORES[e.dtype] || e.value.dtype !== "float32") return undefined
  const parts = requantizeForm(e) ?? clampedAfterRounding(e)
  return parts && parts.x.dtype === "float32" && parts.z.dtype === "float32" ? parts : undefined
}

/**
 * The contrib ops' saturating store (op-library-quant-contrib.ts's `store`: QLinearAdd, QLinearMul,
 * …): int(min(max(round(x) + z, lo), hi)), the bounds second, z an integer constant (a sum with 0
 * folded away), as the parts of requantizeForm's int(max(lo, min(hi, round(x) + z))) — the same value:
 * min / max by constants commute into the other order where lo ≤ hi, and a NaN gives NaN through both
 * and so 0 (tessera_f2i_in32f; the statement's ordered-compare mask).
 */
const clampedAfterRounding = (e: Extract<Expr, { kind: "cast" }>): Requantize | undefined => {
  const outer = e.value
  if (outer.kind !== "bin" || outer.op !== "min" || outer.b.kind !== "const") return undefined
  const inner = outer.a
  if (inner.kind !== "bin" || inner.op !== "max" || inner.b.kind !== "const") return undefined
  const [lo, hi] = [inner.b.value, outer.b.value]
  if (!requantizeBounds(lo, hi)) return undefined
  const q = inner.a
  const rounded = q.kind === "call" && q.fn === "round" ? { x: q.args[0], z: 0 } : q.kind === "bin" && q.op === "add" && q.a.kind === "call" && q.a.fn === "round" && q.b.kind === "const" ? { x: q.a.args[0], z: q.b.value } : undefined
  if (!rounded || !Number.isInteger(rounded.z) || Math.abs(rounded.z) > 65535) return undefined
  // (z as the int32 constant converted, the form the statement renders: built as it is, `cast` would fold it)
  return { lo, hi, x: rounded.x, z: { kind: "cast", dtype: "float32", value: c(rounded.z, "int32") } }
}

/** How a vector read is addressed: every lane (`&buf[i]`), or the first lanes of mask `m`. */
interface Lanes {
  readonly v: string
  readonly mask?: string
  /** The index expression with the loop variable at the statement's first lane. */
  readonly at: (index: Expr) => Expr
}

/** `&buf[index at the first lane]` of a flat access whose index steps by one with the loop variable, or undefined. */
const address = (r: Pick<Read, "source" | "indices">, dtype: DType, l: Lanes, w: Walk): string | undefined => {
  const b = w.buffer(r.source)
  if (!b || b.dtype !== dtype || r.indices.length !== 1 || coef(r.indices[0], l.v) !== 1) return undefined
  return `&${w.buf(r.source)}[${w.expr(l.at(r.indices[0]))}]`
}

/** `e` (int32) as a __m512i over the loop's lanes: unit-stride reads loaded, terms free of the loop variable broadcast, + − ×; undefined otherwise. */
const intVector = (e: Expr, l: Lanes, w: Walk): string | undefined => {
  if (e.dtype !== "int32") return undefined
  if (!mentions(e, l.v)) return `_mm512_set1_epi32(${w.expr(e)})`
  if (e.kind === "read") {
    const p = address(e, "int32", l, w)
    return p && (l.mask ? `tessera_loadi16m(${p}, ${l.mask})` : `_mm512_loadu_si512((const void*)(${p}))`)
  }
  if (e.kind !== "bin" || e.a.dtype !== "int32" || e.b.dtype !== "int32") return undefined
  const op = { add: "_mm512_add_epi32", sub: "_mm512_sub_epi32", mul: "_mm512_mullo_epi32" }[e.op as string]
  const [a, b] = [intVector(e.a, l, w), intVector(e.b, l, w)]
  return op && a && b ? `${op}(${a}, ${b})` : undefined
}

const FLOAT_OPS: Readonly<Record<string, string>> = { mul: "_mm512_mul_ps", div: "_mm512_div_ps" }

/** A float32 operand of a narrowed float64 operation (expr.ts narrowedFloatOp): a float32 widened, or a constant that is a float32. */
const narrowed = (x: Expr): Expr | undefined =>
  x.kind === "cast" && x.value.dtype === "float32" ? x.value : x.kind === "const" && Math.fround(x.value) === x.value ? c(x.value, "float32") : undefined

/** `e` (float32) as a __m512 over the loop's lanes: unit-stride reads loaded, terms free of the loop variable broadcast, × ÷, int32 converted; undefined otherwise. */
const floatVector = (e: Expr, l: Lanes, w: Walk): string | undefined => {
  if (e.dtype !== "float32") return undefined
  if (!mentions(e, l.v)) return `_mm512_set1_ps(${w.expr(e)})`
  if (e.kind === "read") {
    const p = address(e, "float32", l, w)
    return p && (l.mask ? `tessera_loadf16m(${p}, ${l.mask})` : `_mm512_loadu_ps(${p})`)
  }
  if (e.kind === "call" && e.fn === "fma" && e.args.every((a) => a.dtype === "float32")) {
    // (fmaf: one rounding, as vfmadd)
    const [a, b, z] = e.args.map((a) => floatVector(a, l, w))
    return a && b && z ? `_mm512_fmadd_ps(${a}, ${b}, ${z})` : undefined
  }
  if (e.kind === "cast") {
    const inner = e.value
    // (an 8-bit unit-stride read widened: 16 bytes, sign- or zero-extended; exact in float32)
    if (inner.kind === "read" && (inner.dtype === "int8" || inner.dtype === "uint8")) {
      const p = l.mask ? undefined : address(inner, inner.dtype, l, w)
      return p && `_mm512_cvtepi32_ps(_mm512_cvtep${inner.dtype === "int8" ? "i8" : "u8"}_epi32(_mm_loadu_si128((const __m128i*)(${p}))))`
    }
    if (inner.dtype === "int32") {
      const i = intVector(inner, l, w)
      return i && `_mm512_cvtepi32_ps(${i})`
    }
    // a float64 × or ÷ of two float32 values, rounded to float32: the float32 operation
    if (inner.kind === "bin" && inner.dtype === "float64" && FLOAT_OPS[inner.op]) {
      const [na, nb] = [narrowed(inner.a), narrowed(inner.b)]
      const [a, b] = [na && floatVector(na, l, w), nb && floatVector(nb, l, w)]
      return a && b ? `${FLOAT_OPS[inner.op]}(${a}, ${b})` : undefined
    }
    return undefined
  }
  if (e.kind !== "bin" || e.a.dtype !== "float32" || !FLOAT_OPS[e.op]) return undefined
  const [a, b] = [floatVector(e.a, l, w), floatVector(e.b, l, w)]
  return a && b ? `${FLOAT_OPS[e.op]}(${a}, ${b})` : undefined
}

/**
 * A vectorized loop `for v in [0, n): B[i + v] = requantize(x)` (n ≥ 16 constant, B flat of an 8-,
 * 16- or 32-bit integer type, `i` free of v, x a vector expression: intVector / floatVector) as
 * 16-lane statements — a loop of them over the whole vectors, then one for the rest — under
 * `#if defined(__AVX512F__)`, the scalar loop under `#else`; undefined for any other loop. Not
 * inside another vectorized loop.
 */
export const requantizeStoreLoop = (s: ForStmt, w: Walk): string[] | undefined => {
  if (s.forKind !== "vectorized" || s.min.kind !== "const" || s.min.value !== 0 || s.extent.kind !== "const" || s.extent.value < REQUANTIZE_LANES) return undefined
  if (w.loops.some((l) => l.forKind === "vectorized") || s.body.kind !== "store" || (s.prefetch?.length ?? 0) > 0) return undefined
  const st = s.body
  const b = w.buffer(st.buffer)
  const store = b && STORES[b.dtype]
  // (the requantized int32 narrowed to the stored type by a cast, or by the store: C's conversion keeps its low bits, as the narrowing store)
  const narrowedValue = st.value.kind === "cast" && st.value.value.dtype === "int32" && st.value.dtype === b?.dtype && STORES[st.value.dtype] ? st.value.value : st.value
  const parts = requantizeParts(narrowedValue)
  if (!b || !store || !parts || (narrowedValue.dtype !== b.dtype && narrowedValue.dtype !== "int32") || st.indices.length !== 1 || coef(st.indices[0], s.var.name) !== 1) return undefined
  if (mentions(parts.z, s.var.name)) return undefined
  // (the stored buffer read only at the stored element: all loads before the store are then the loop's meaning)
  const own = collect(st.value, (x) => x.kind === "read" && x.source === st.buffer) as Read[]
  if (own.some((r) => r.indices.length !== st.indices.length || r.indices.some((x, k) => exprKey(x) !== exprKey(st.indices[k])))) return undefined
  const n = s.extent.value
  const whole = n - (n % REQUANTIZE_LANES)
  const v = w.variable(s.var.name)
  const zs = w.expr(parts.z)
  const statement = (l: Lanes): string | undefined => {
    const x = floatVector(parts.x, l, w)
    if (!x) return undefined
    const value = `tessera_requant16(${x}, (${constC(parts.lo, "float32")} - ${zs}), (${constC(parts.hi, "float32")} - ${zs}), ((int32_t)(${w.expr(parts.z.value)})))`
    const p = `&${w.buf(st.buffer)}[${w.expr(l.at(st.indices[0]))}]`
    return `${l.mask ? store.masked(p, l.mask, value) : store.all(p, value)};`
  }
  const body = statement({ v: s.var.name, at: (i) => i })
  // the lanes past the whole vectors: where the value reads nothing of the stored buffer, the last 16
  // lanes again (those stored twice get the same value twice: no masked store, slow on Zen's
  // narrowing stores); else the remaining lanes under a mask
  const at = (lane: number) => (i: Expr) => substitute(i, new Map([[s.var.name, c(lane)]]))
  const tail =
    n === whole ? "" : own.length === 0 ? statement({ v: s.var.name, at: at(n - REQUANTIZE_LANES) }) : statement({ v: s.var.name, mask: `(__mmask16)0x${((1 << (n - whole)) - 1).toString(16)}`, at: at(whole) })
  if (body === undefined || tail === undefined) return undefined
  w.define("tessera_requant16", REQUANTIZE_HELPERS)
  const scalar = `${w.access(st.buffer, st.indices)} = ${castC(b.dtype, st.value.dtype, w.expr(st.value))};`
  return [
    "#if defined(__AVX512F__)",
    `for (int64_t ${v} = 0; ${v} < ${whole}; ${v} += ${REQUANTIZE_LANES}) { /* ${REQUANTIZE_LANES} lanes a statement */`,
    `  ${body}`,
    "}",
    ...(tail ? [tail] : []),
    "#else",
    "#pragma omp simd",
    `for (int64_t ${v} = 0; ${v} < ${n}; ++${v}) {`,
    `  ${scalar}`,
    "}",
    "#endif",
  ]
}
