#include <stdint.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* floor division and modulo; a zero divisor yields 0 where the evaluator would raise; by -1
   without dividing (INT64_MIN / -1 traps on x86: the quotient wraps, as -fwrapv's negation) */
static __device__ __forceinline__ int64_t tessera_floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int64_t)(0ULL - (uint64_t)a);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static __device__ __forceinline__ int64_t tessera_floormod(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static __device__ __forceinline__ int64_t tessera_idiv(int64_t a, int64_t b) { return b == 0 ? 0 : b == -1 ? (int64_t)(0ULL - (uint64_t)a) : a / b; }
static __device__ __forceinline__ float tessera_floormodf(float a, float b) { return a - floorf(a / b) * b; }
static __device__ __forceinline__ double tessera_floormodd(double a, double b) { return a - floor(a / b) * b; }

/* min / max: NaN propagates (as Math.min / Math.max) */
static __device__ __forceinline__ float tessera_minf(float a, float b) { return (a < b || a != a) ? a : b; }
static __device__ __forceinline__ float tessera_maxf(float a, float b) { return (a > b || a != a) ? a : b; }
static __device__ __forceinline__ double tessera_mind(double a, double b) { return (a < b || a != a) ? a : b; }
static __device__ __forceinline__ double tessera_maxd(double a, double b) { return (a > b || a != a) ? a : b; }
/* against a constant bound c (not NaN): one vminps / vmaxps in scalar code (vectorized, gcc 12 makes a compare
   and a masked move: the c emitter's 16-lane clamped stores call _mm512_max_ps / _mm512_min_ps, vector-store.ts);
   a NaN a comes out as itself */
static __device__ __forceinline__ float tessera_mincf(float a, float c) { return c < a ? c : a; }
static __device__ __forceinline__ float tessera_maxcf(float a, float c) { return c > a ? c : a; }
static __device__ __forceinline__ double tessera_mincd(double a, double c) { return c < a ? c : a; }
static __device__ __forceinline__ double tessera_maxcd(double a, double c) { return c > a ? c : a; }
/* e^c / 2^n for n = rint(c / ln 2): Cody-Waite reduction by ln 2 (r = c - n ln 2, |r| <= ln 2 / 2),
   Cephes' degree-6 polynomial; the exp and the logistic below scale it by 2^n each their own way */
static __device__ __forceinline__ float tessera_exp_reduced(float c, float n) {
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
static __device__ __forceinline__ float tessera_expf(float x) {
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
static __device__ __forceinline__ float tessera_sigmoidf(float x) {
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
static __device__ __forceinline__ float tessera_erff(float x) {
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
static __device__ __forceinline__ int64_t tessera_mini(int64_t a, int64_t b) { return a < b ? a : b; }
static __device__ __forceinline__ int64_t tessera_maxi(int64_t a, int64_t b) { return a > b ? a : b; }
static __device__ __forceinline__ int64_t tessera_absi(int64_t a) { return a < 0 ? -a : a; }
/* uint64: a zero divisor yields 0 where the evaluator would raise */
static __device__ __forceinline__ uint64_t tessera_udiv(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b; }
static __device__ __forceinline__ uint64_t tessera_umod(uint64_t a, uint64_t b) { return b == 0 ? 0 : a % b; }
static __device__ __forceinline__ uint64_t tessera_minu(uint64_t a, uint64_t b) { return a < b ? a : b; }
static __device__ __forceinline__ uint64_t tessera_maxu(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* float to integer: truncate toward zero, wrap modulo 2^64 (callers narrow, which wraps further);
   NaN and infinities give 0 */
static __device__ __forceinline__ int64_t tessera_f2i(double x) {
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
static __device__ __forceinline__ int32_t tessera_f2i_in32(double x) { return (int32_t)(x == x ? x : 0.0); }
static __device__ __forceinline__ int32_t tessera_f2i_in32f(float x) { return (int32_t)(x == x ? x : 0.0f); }

/* float16 / bfloat16 rounding (through float, round half to even), as dtype.ts does */
static __device__ __forceinline__ float tessera_f16(float x) {
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
static __device__ __forceinline__ float tessera_bf16(float x) {
  if (x != x) return x;
  union { float f; uint32_t u; } v = { x };
  v.u = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) & 0xffff0000u;
  return v.f;
}
