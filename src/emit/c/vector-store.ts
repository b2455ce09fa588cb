// A clamped vector store of the c target: a vectorized loop of 16 float32 lanes whose body is one
// contiguous store of a value clamped by min and max against constants (Clip's bounds: ReLU6, a
// conv's epilogue) rendered as one 16-lane vector expression (GCC's vector extension), its min /
// max one vminps / vmaxps each on AVX-512.
//
// Why: gcc 12 vectorizes `c > a ? c : a` (tessera_maxcf, NaN-preserving) under `omp simd` into a
// compare and a masked move (AVX-512's mask registers route the select through vcond_mask, past
// the pattern that recognizes IEEE max), so a Clip costs four vector instructions an output
// vector where two do. In a depthwise conv (nine FMAs an output vector) and a 1×1 conv of 16
// input channels (sixteen) that is a large share of the FP pipes: MobileNetV2's 112² expansion
// (16 → 96 channels, Clip) 0.263 → 0.193 ms timed alone in a C harness (Zen 5, best of 300),
// the loop written by hand this way (docs/backends.md, 2026-11-27).
//
// Meaning: the same as the scalar loop's. `_mm512_max_ps(c, a)` is vmaxps with c first: `c > a ?
// c : a`, exactly tessera_maxcf's select (a NaN `a` comes out as itself, -0 against a 0 bound keeps
// its sign); without AVX-512 the helpers run tessera_maxcf / tessera_mincf lane by lane. Loads and
// stores are unaligned (aligned(4) vector types); the arithmetic is the vector extension's
// elementwise + − × ÷, in float as the scalar loop's.
import type { Expr, Read } from "../../ast/te/expr.js"
import { c, collect, exprKey, substitute } from "../../ast/te/expr.js"
import { coef, mentions } from "../../ast/te/linear-index.js"
import type { ForStmt, Walk } from "../c-family/dialect.js"
import { constC } from "./expr.js"

/** Lanes of the vector a clamped store is rendered with (64 bytes of float32: an AVX-512 register). */
export const VECTOR_STORE_LANES = 16

/** The helpers' text, included once before the kernels that use them (walk.define). */
export const VECTOR_STORE_HELPERS = `/* 16-lane float vectors for clamped stores (vector-store.ts): unaligned loads and stores; min / max
   against a constant c as vminps / vmaxps with c first (c < a ? c : a, c > a ? c : a: a NaN a comes out as itself) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float tessera_f32x16 __attribute__((vector_size(64)));
typedef float tessera_f32x16u __attribute__((vector_size(64), aligned(4)));
static inline tessera_f32x16 tessera_load16(const float* p) { return *(const tessera_f32x16u*)p; }
static inline void tessera_store16(float* p, tessera_f32x16 v) { *(tessera_f32x16u*)p = v; }
static inline tessera_f32x16 tessera_splat16(float x) { tessera_f32x16 r; for (int i = 0; i < 16; ++i) r[i] = x; return r; }
#if defined(__AVX512F__)
#include <immintrin.h>
static inline tessera_f32x16 tessera_maxc16(tessera_f32x16 a, float c) { return (tessera_f32x16)_mm512_max_ps(_mm512_set1_ps(c), (__m512)a); }
static inline tessera_f32x16 tessera_minc16(tessera_f32x16 a, float c) { return (tessera_f32x16)_mm512_min_ps(_mm512_set1_ps(c), (__m512)a); }
#else
static inline tessera_f32x16 tessera_maxc16(tessera_f32x16 a, float c) { tessera_f32x16 r; for (int i = 0; i < 16; ++i) r[i] = tessera_maxcf(a[i], c); return r; }
static inline tessera_f32x16 tessera_minc16(tessera_f32x16 a, float c) { tessera_f32x16 r; for (int i = 0; i < 16; ++i) r[i] = tessera_mincf(a[i], c); return r; }
#endif
#pragma GCC diagnostic pop
`

const VECTOR_OPS: Readonly<Record<string, string>> = { add: "+", sub: "-", mul: "*", div: "/" }

/** A float32 constant that is a number (not NaN): a bound the one-instruction form takes. */
const numberConst = (e: Expr): e is Extract<Expr, { kind: "const" }> => e.kind === "const" && e.dtype === "float32" && !Number.isNaN(e.value)

/** The bounds `e` is clamped by: its float32 min / max against number constants, anywhere in it. */
const clampOps = (e: Expr): Set<"min" | "max"> => {
  if (e.kind !== "bin") return new Set()
  const inner = new Set([...clampOps(e.a), ...clampOps(e.b)])
  if ((e.op === "min" || e.op === "max") && e.a.dtype === "float32" && (numberConst(e.a) || numberConst(e.b))) inner.add(e.op)
  return inner
}

/**
 * Does `e` clamp on both sides (a Clip, ReLU6, HardSwish's clip)? Four vector instructions in gcc's
 * form, two here. A one-sided clamp (Relu) is two against one, and not worth the change of code
 * around it: ResNet-18's 7×7 stem (147 taps a Relu'd output) ran 1.12 → 1.20–1.23 ms with its Relu
 * a vector statement (a C harness, best of 60, Zen 5), gcc allocating the tile's loop differently.
 */
const clampsBothSides = (e: Expr): boolean => clampOps(e).size === 2

/**
 * `e` (float32) as a 16-lane vector expression over the loop variable `v`: reads with unit stride in
 * `v` loaded, terms free of `v` splat, + − × ÷ elementwise, min / max against a constant the
 * helpers; undefined for anything else (a select, a call, a cast, another stride).
 */
const vectorExpr = (e: Expr, v: string, w: Walk): string | undefined => {
  if (e.dtype !== "float32") return undefined
  if (!mentions(e, v)) return `tessera_splat16(${w.expr(e)})`
  if (e.kind === "read") return unitAddress(e, v, w, (addr) => `tessera_load16(${addr})`)
  if (e.kind !== "bin" || e.a.dtype !== "float32") return undefined
  if (e.op === "min" || e.op === "max") {
    const [k, x] = numberConst(e.b) ? [e.b, e.a] : numberConst(e.a) ? [e.a, e.b] : [undefined, undefined]
    const inner = k && x ? vectorExpr(x, v, w) : undefined
    return k && inner ? `tessera_${e.op}c16(${inner}, ${constC(k.value, "float32")})` : undefined
  }
  const op = VECTOR_OPS[e.op]
  const [a, b] = [vectorExpr(e.a, v, w), vectorExpr(e.b, v, w)]
  return op && a && b ? `(${a} ${op} ${b})` : undefined
}

/** `&buf[index at v = 0]` of a flat float32 access whose index steps by one with `v`, given to `use`; undefined otherwise. */
const unitAddress = (r: Pick<Read, "source" | "indices">, v: string, w: Walk, use: (addr: string) => string): string | undefined => {
  const b = w.buffer(r.source)
  if (!b || b.dtype !== "float32" || r.indices.length !== 1 || coef(r.indices[0], v) !== 1) return undefined
  return use(`&${w.buf(r.source)}[${w.expr(substitute(r.indices[0], new Map([[v, c(0)]])))}]`)
}

/**
 * A vectorized loop `for v in [0, 16): B[i + v] = value` (B float32, flat, `i` free of v) whose
 * value clamps on both sides (clampsBothSides) and is a vector expression (vectorExpr), as one vector statement;
 * undefined for any other loop (rendered as written: `#pragma omp simd`). Not inside another
 * vectorized loop.
 */
export const vectorStoreLoop = (s: ForStmt, w: Walk): string[] | undefined => {
  if (s.forKind !== "vectorized" || s.min.kind !== "const" || s.min.value !== 0 || s.extent.kind !== "const" || s.extent.value !== VECTOR_STORE_LANES) return undefined
  if (w.loops.some((l) => l.forKind === "vectorized") || s.body.kind !== "store" || (s.prefetch?.length ?? 0) > 0) return undefined
  const st = s.body
  const v = s.var.name
  if (st.value.dtype !== "float32" || !clampsBothSides(st.value)) return undefined
  // (the stored buffer read only at the stored element: all loads before the store are then the loop's meaning)
  const own = collect(st.value, (x) => x.kind === "read" && x.source === st.buffer) as Read[]
  if (own.some((r) => r.indices.length !== st.indices.length || r.indices.some((x, k) => exprKey(x) !== exprKey(st.indices[k])))) return undefined
  const value = vectorExpr(st.value, v, w)
  const line = value && unitAddress({ source: st.buffer, indices: st.indices }, v, w, (addr) => `tessera_store16(${addr}, ${value});`)
  if (!line) return undefined
  w.define("tessera_f32x16", VECTOR_STORE_HELPERS)
  return [`${line} /* ${VECTOR_STORE_LANES} lanes */`]
}
