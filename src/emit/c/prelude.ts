// The prelude of every translation unit of the `c` target: the `static inline` helpers (prefixed
// `tessera_`) that expressions (expr.ts) call — division and modulo that floor, NaN-propagating
// min / max, float → integer conversions that wrap, float16 / bfloat16 rounding as dtype.ts does —
// and the heap blocks of large allocations (dialect.ts). A single translation unit holds them all
// (C_PRELUDE); a split artifact includes them as a header (cPreludeHeader) and defines the
// allocator once, in its runtime unit (C_RUNTIME).

/** What the allocator's definition needs besides the helpers' headers (aligned_alloc, fprintf, abort). */
const ALLOCATOR_INCLUDES = `#include <stdio.h>
#include <stdlib.h>
`

/** The headers the helpers need (math, fixed-width integers, memcpy; size_t comes with string.h). */
const HELPER_INCLUDES = `#include <math.h>
#include <stdint.h>
`

/** The helpers themselves, after their headers. */
const HELPERS_BODY = `#include <string.h>

/* floor division and modulo; a zero divisor yields 0 where the evaluator would raise; by -1
   without dividing (INT64_MIN / -1 traps on x86: the quotient wraps, as -fwrapv's negation) */
static inline int64_t tessera_floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0ULL - (uint64_t)a);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t tessera_floormod(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t tessera_idiv(int64_t a, int64_t b) { return b == 0 ? 0 : b == -1 ? (int64_t)(0ULL - (uint64_t)a) : a / b; }
static inline float tessera_floormodf(float a, float b) { return a - floorf(a / b) * b; }
static inline double tessera_floormodd(double a, double b) { return a - floor(a / b) * b; }

/* min / max: NaN propagates (as Math.min / Math.max) */
static inline float tessera_minf(float a, float b) { return (a < b || a != a) ? a : b; }
static inline float tessera_maxf(float a, float b) { return (a > b || a != a) ? a : b; }
static inline double tessera_mind(double a, double b) { return (a < b || a != a) ? a : b; }
static inline double tessera_maxd(double a, double b) { return (a > b || a != a) ? a : b; }
/* against a constant bound c (not NaN): one vminps / vmaxps in scalar code (vectorized, gcc 12 makes a compare
   and a masked move: the c emitter's 16-lane clamped stores call _mm512_max_ps / _mm512_min_ps, vector-store.ts);
   a NaN a comes out as itself */
static inline float tessera_mincf(float a, float c) { return c < a ? c : a; }
static inline float tessera_maxcf(float a, float c) { return c > a ? c : a; }
static inline double tessera_mincd(double a, double c) { return c < a ? c : a; }
static inline double tessera_maxcd(double a, double c) { return c > a ? c : a; }
/* e^c / 2^n for n = rint(c / ln 2): Cody-Waite reduction by ln 2 (r = c - n ln 2, |r| <= ln 2 / 2),
   Cephes' degree-6 polynomial; the exp and the logistic below scale it by 2^n each their own way */
static inline float tessera_exp_reduced(float c, float n) {
  float r = c - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}
/* exp of a float that vectorizes (no branch, no libm call): tessera_exp_reduced, 2^n applied in
   two halves (so results down to the smallest denormal come out right); within 1.01 ulp of exp
   over the float range, inf above FLT_MAX, 0 below 2^-150, NaN as itself (test/emit-c.test.ts
   checks every 997th float) */
static inline float tessera_expf(float x) {
  float c = x < -104.0f ? -104.0f : (x > 88.72283f ? 88.72283f : x);
  float n = __builtin_rintf(c * 1.44269504088896341f);
  float p = tessera_exp_reduced(c, n);
  int32_t k = (int32_t)n, h = k >> 1;
  int32_t b1 = (h + 127) << 23, b2 = (k - h + 127) << 23;
  float s1, s2;
  memcpy(&s1, &b1, 4);
  memcpy(&s2, &b2, 4);
  float y = p * s1 * s2;
  y = x > 88.72283f ? INFINITY : y;
  y = x < -104.0f ? 0.0f : y;
  return x != x ? x : y;
}
/* the logistic function of a float that vectorizes: 1 / (1 + exp(-x)), the exp's argument clamped
   to [-87.33654, 88.37626], where 2^n (n = -126 .. 127) is one normal float: one scale, no selects
   (a NaN passes through the arithmetic). Below x = -88.37626 the result stays at about 4e-39
   where the logistic is smaller still; above 87.33654 it is 1. tessera_expf's two-half scale and
   its three selects are there for exp's denormal and infinite results, which the logistic never
   needs (EfficientNet-B0's 56x56x144 depthwise conv with its SiLU epilogue, Zen 5, timed alone:
   0.22 -> 0.18 ms). Within 2.1 ulp, as 1 / (1 + tessera_expf(-x)) is (test/emit-c.test.ts checks
   every 997th float) */
static inline float tessera_sigmoidf(float x) {
  float c = tessera_mincf(tessera_maxcf(-x, -87.33654f), 88.37626f);
  float n = __builtin_rintf(c * 1.44269504088896341f);
  int32_t b = ((int32_t)n + 127) << 23;
  float s;
  memcpy(&s, &b, 4);
  return 1.0f / (1.0f + tessera_exp_reduced(c, n) * s);
}
/* erf of a float that vectorizes: erf(a) = a + a P(a^2) for |a| <= 1, 1 - exp(-a^2) Q(1 / (1 + a/2))
   above (a clamped at 4, where erf rounds to 1), both computed and one selected, the sign copied;
   P and Q fitted to erf (degree 6 each), within 1.1 ulp, NaN as itself (test/emit-c.test.ts). The
   exp's argument -c^2 lies in [-16, 0], where 2^n (n = -24 .. 0) is one normal float: one scale, none
   of tessera_expf's clamps and selects, the same bits (Gelu over 2^20 floats, Zen 5, a C loop:
   0.74 -> 0.46 ns a float) */
static inline float tessera_erff(float x) {
  float a = fabsf(x);
  float t = a * a;
  float p = 7.8455276e-05f;
  p = p * t - 0.00080075336f;
  p = p * t + 0.0051880036f;
  p = p * t - 0.026853625f;
  p = p * t + 0.1128358f;
  p = p * t - 0.37612626f;
  p = p * t + 0.12837916709551257f;
  float c = a < 4.0f ? a : 4.0f;
  float s = 1.0f / (1.0f + 0.5f * c);
  float q = 0.11896206f;
  q = q * s - 0.4699685f;
  q = q * s + 0.5616091f;
  q = q * s - 0.10238322f;
  q = q * s + 0.3472624f;
  q = q * s + 0.25982928f;
  q = q * s + 0.284892f;
  q = q * s - 0.00015291055f;
  float m = -c * c;
  float n = __builtin_rintf(m * 1.44269504088896341f);
  int32_t b = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &b, 4);
  float y = a <= 1.0f ? a + a * p : 1.0f - tessera_exp_reduced(m, n) * scale * q;
  y = copysignf(y, x);
  return x != x ? x : y;
}
static inline int64_t tessera_mini(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t tessera_maxi(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t tessera_absi(int64_t a) { return a < 0 ? -a : a; }
/* uint64: a zero divisor yields 0 where the evaluator would raise */
static inline uint64_t tessera_udiv(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b; }
static inline uint64_t tessera_umod(uint64_t a, uint64_t b) { return b == 0 ? 0 : a % b; }
static inline uint64_t tessera_minu(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t tessera_maxu(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* float to integer: truncate toward zero, wrap modulo 2^64 (callers narrow, which wraps further);
   NaN and infinities give 0 */
static inline int64_t tessera_f2i(double x) {
  if (!isfinite(x)) return 0;
  double t = trunc(x);
  if (t > -9.2e18 && t < 9.2e18) return (int64_t)t;
  double m = fmod(t, 18446744073709551616.0);
  if (m < 0) m += 18446744073709551616.0;
  return (int64_t)(uint64_t)m;
}
/* float to integer where the value is known to lie in int32's range or be NaN (a clamp by constant
   bounds: the requantizing epilogues): truncate, NaN gives 0, as tessera_f2i does; a C conversion
   and a select, which gcc vectorizes (tessera_f2i's branches and libm calls it does not) */
static inline int32_t tessera_f2i_in32(double x) { return (int32_t)(x == x ? x : 0.0); }
static inline int32_t tessera_f2i_in32f(float x) { return (int32_t)(x == x ? x : 0.0f); }

/* float16 / bfloat16 rounding (through float, round half to even), as dtype.ts does */
static inline float tessera_f16(float x) {
  union { float f; uint32_t u; } v = { x };
  uint32_t b = v.u, sign = (b >> 16) & 0x8000u, m = b & 0x7fffffu;
  int32_t e = (int32_t)((b >> 23) & 0xffu);
  uint32_t h;
  if (e == 255) h = sign | 0x7c00u | (m ? 0x200u : 0u);
  else {
    e = e - 127 + 15;
    if (e >= 31) h = sign | 0x7c00u;
    else if (e <= 0) {
      if (e < -10) h = sign;
      else {
        uint32_t full = m | 0x800000u, shift = (uint32_t)(14 - e);
        uint32_t hm = full >> shift, rem = full & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (hm & 1u))) hm++;
        h = sign | hm;
      }
    } else {
      uint32_t hm = m >> 13, rem = m & 0x1fffu;
      h = sign | ((uint32_t)e << 10) | hm;
      if (rem > 0x1000u || (rem == 0x1000u && (hm & 1u))) {
        hm++;
        if (hm == 0x400u) { hm = 0; e++; }
        h = e >= 31 ? (sign | 0x7c00u) : (sign | ((uint32_t)e << 10) | hm);
      }
    }
  }
  int32_t he = (int32_t)((h >> 10) & 0x1fu);
  uint32_t hm2 = h & 0x3ffu;
  float s = (h & 0x8000u) ? -1.0f : 1.0f;
  if (he == 0) return s * (float)hm2 * 5.9604644775390625e-8f;
  if (he == 31) return hm2 ? NAN : s * INFINITY;
  return s * (1.0f + (float)hm2 / 1024.0f) * ldexpf(1.0f, he - 15);
}
static inline float tessera_bf16(float x) {
  if (x != x) return x;
  union { float f; uint32_t u; } v = { x };
  v.u = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) & 0xffff0000u;
  return v.f;
}

`

/** The helpers every translation unit starts with (all `static inline`, prefixed `tessera_`), after the C library's headers. */
export const C_HELPERS = `${HELPER_INCLUDES}${ALLOCATOR_INCLUDES}${HELPERS_BODY}`

/**
 * The helpers as a split artifact's kernel units include them: without stdio.h and stdlib.h, which
 * only the allocator's definition (the runtime unit) needs. Their 2,000 lines, preprocessed and
 * parsed in every one of a network's ~200 units, are a tenth of a small unit's gcc time.
 */
const C_KERNEL_HELPERS = `${HELPER_INCLUDES}${HELPERS_BODY}`

/**
 * The heap blocks of large allocations: `linkage` "static inline " in a single translation unit;
 * "" in the runtime unit of a split artifact, where every kernel's unit calls the one definition
 * (one cache of kept blocks per thread, as in a single unit).
 */
const allocator = (linkage: string): string => `/* heap allocations for large buffers: 64-byte aligned; failure is fatal (no status to return).
   Freed blocks are kept per thread (up to 8) and handed out again for a request of up to their
   size: a kernel's scratch buffers (a padded input, Winograd's transforms) are not unmapped and
   faulted in again on every call. A block's own size is kept in the 64 bytes before it: a kept
   block handed to a smaller request is kept again at its own size, not the request's (else the
   larger requests of the next run find no block and fault fresh pages in). A request takes the
   smallest kept block that fits (else a kernel's smaller scratch, asked for first, takes the block
   its larger one needs next, and that one faults fresh pages in on every run). With every slot
   taken, a block freed larger than the smallest kept one takes its slot, and the smaller is
   released: what a run then faults in again is the smallest block, not a large one (MobileNetV2
   int8's 441 KB scratch of a 14x14 conv faulted 90 pages in on every run, 1.5 ms, once the stem's
   form added a ninth size) */
#define TESSERA_KEEP 8
static _Thread_local void* tessera_kept[TESSERA_KEEP];
${linkage}void* tessera_alloc(size_t bytes) {
  size_t n = (bytes + 63) & ~(size_t)63;
  int best = -1;
  size_t bestHave = 0;
  for (int i = 0; i < TESSERA_KEEP; i++) {
    size_t have = tessera_kept[i] ? *(size_t*)((char*)tessera_kept[i] - 64) : 0;
    if (have >= n && have / 2 <= n && (best < 0 || have < bestHave)) {
      best = i;
      bestHave = have;
    }
  }
  if (best >= 0) {
    void* p = tessera_kept[best];
    tessera_kept[best] = 0;
    return p;
  }
  char* base = (char*)aligned_alloc(64, n + 64);
  if (!base) { fprintf(stderr, "tessera: out of memory allocating %zu bytes\\n", bytes); abort(); }
  *(size_t*)base = n;
  return base + 64;
}
${linkage}void tessera_free(void* p, size_t bytes) {
  (void)bytes;
  int small = 0;
  for (int i = 0; i < TESSERA_KEEP; i++) {
    if (!tessera_kept[i]) {
      tessera_kept[i] = p;
      return;
    }
    if (*(size_t*)((char*)tessera_kept[i] - 64) < *(size_t*)((char*)tessera_kept[small] - 64)) small = i;
  }
  if (*(size_t*)((char*)tessera_kept[small] - 64) < *(size_t*)((char*)p - 64)) {
    void* q = tessera_kept[small];
    tessera_kept[small] = p;
    p = q;
  }
  free((char*)p - 64);
}
`

/** The prelude of a single translation unit: the helpers, then the allocator (all `static inline`). */
export const C_PRELUDE = `${C_HELPERS}${allocator("static inline ")}`

/**
 * The prelude of a split artifact, as a header every unit includes: the helpers, and the allocator
 * declared (hidden: not exported from the library); its definition is C_RUNTIME's; then
 * `declarations` (the thread pool's, pool.ts, where the kernels run on it).
 */
export const cPreludeHeader = (declarations = ""): string =>
  [
    "#ifndef TESSERA_PRELUDE_H",
    "#define TESSERA_PRELUDE_H",
    C_KERNEL_HELPERS.trimEnd(),
    "",
    "/* heap allocations for large buffers (defined in tessera_runtime.c) */",
    '__attribute__((visibility("hidden"))) void* tessera_alloc(size_t bytes);',
    '__attribute__((visibility("hidden"))) void tessera_free(void* p, size_t bytes);',
    ...(declarations ? [declarations.trimEnd()] : []),
    "#endif",
    "",
  ].join("\n")

/** The runtime unit's definitions (after `#include "tessera_prelude.h"`): the allocator. */
export const C_RUNTIME = `${ALLOCATOR_INCLUDES}${allocator("")}`
