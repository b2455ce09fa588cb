// The prelude of the cuda target's kernels: the c target's helpers (../c/prelude.ts: division and
// modulo that floor, NaN-propagating min / max, exp and erf as polynomials, float → integer
// conversions that wrap, float16 / bfloat16 rounding) compiled for the device — the same text, each
// `static __device__ __forceinline__`, so both targets compute the same values.
import { C_HELPERS } from "../c/prelude.js"

export const CUDA_PRELUDE = ["#include <stdint.h>", C_HELPERS.replace(/static inline /g, "static __device__ __forceinline__ ").trimEnd(), ""].join("\n")
