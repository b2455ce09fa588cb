// The prelude of the cuda target's kernels: the c target's helpers (../c/prelude.ts: division and
// modulo that floor, NaN-propagating min / max, exp and erf as polynomials, float → integer
// conversions that wrap, float16 / bfloat16 rounding) compiled for the device — the same text, each
// `static __device__ __forceinline__`, so both targets compute the same values.
import { C_HELPERS } from "../c/prelude.js"

export const CUDA_PRELUDE = ["#include <stdint.h>", C_HELPERS.replace(/static inline /g, "static __device__ __forceinline__ ").trimEnd(), ""].join("\n")

/**
 * What kernels with float16 buffers (`--precision fp16`) add after the prelude: CUDA's `__half`
 * (cuda_fp16.h; tessera_emulate.h defines the same for a host compiler), and the vector loads of a
 * fetch of halves into float32 shared memory — two halves (4 bytes, one `__half2`) or four (8
 * bytes, one `uint2`) widened to a float2 / float4. A half is read as `__half2float(b[i])` and
 * written as `__float2half_rn(x)`: round to nearest even, as the TIR evaluator's float16 stores.
 */
export const CUDA_HALF_SUPPORT = `#ifdef __CUDACC__
#include <cuda_fp16.h>
#endif
/* a fetch of 2 or 4 halves (aligned to their size: the fetch-width rule proves it) widened to floats */
#ifdef __CUDACC__
static __device__ __forceinline__ float2 tessera_load_half2(const __half* p) { return __half22float2(*reinterpret_cast<const __half2*>(p)); }
static __device__ __forceinline__ float4 tessera_load_half4(const __half* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
  const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}
#else
/* (tessera_emulate.h: the same values element by element, without the device's type punning) */
static inline float2 tessera_load_half2(const __half* p) { float2 r = {__half2float(p[0]), __half2float(p[1])}; return r; }
static inline float4 tessera_load_half4(const __half* p) { return make_float4(__half2float(p[0]), __half2float(p[1]), __half2float(p[2]), __half2float(p[3])); }
#endif
`
