// Tensor intrinsics: a hardware instruction declared in TE — a small compute that says what it
// computes (its meaning, used by the TIR evaluator) plus the lowering rule emitters use. A stage
// whose inner loop nest matches the declaration can be tensorized to one call.
import type { DType } from "../graph/dtype.js"
import { add, c, cast, mul, type Expr } from "./expr.js"
import { at, compute, placeholder, reduceAxis, sum, type ComputeTensor, type Placeholder } from "./tensor.js"

export interface TensorIntrinsic {
  readonly name: string
  /** What the instruction computes, over its own placeholders. */
  readonly compute: ComputeTensor
  readonly inputs: readonly Placeholder[]
  /** "update": out = combine(out, compute) (a reduction step); "store": out = compute. */
  readonly mode: "store" | "update"
  /**
   * How targets emit it: a C function name and the header that defines it; for the wasm target,
   * the instruction sequence its emitter renders (src/emit/wasm/dot.ts).
   */
  readonly emit: { readonly c?: { readonly fn: string; readonly header: string }; readonly wasm?: "dot_u8s8_4x4" }
}

/** An update-mode intrinsic the c target emits as a call of `fn`, defined by the header's lines. */
const cUpdate = (name: string, compute: ComputeTensor, inputs: readonly Placeholder[], fn: string, header: readonly string[]): TensorIntrinsic => ({
  name,
  compute,
  inputs,
  mode: "update",
  emit: { c: { fn, header: header.join("\n") } },
})

/** A register-blocked fp32 micro-kernel: C[m×n] += A[m×k] · B[k×n]. */
export const gemmMicroKernel = (m: number, n: number, k: number, dtype: DType = "float32"): TensorIntrinsic => {
  const a = placeholder("a", [m, k], dtype)
  const b = placeholder("b", [k, n], dtype)
  const r = reduceAxis(k, "kk")
  const out = compute("c", [m, n], (x, y) => sum(mul(at(a, x, r.var), at(b, r.var, y)), [r]), dtype)
  const fn = `tessera_gemm_${m}x${n}x${k}_${dtype}`
  return cUpdate(`gemm_${m}x${n}x${k}_${dtype}`, out, [a, b], fn, [
    `static inline void ${fn}(float* c, int ldc, const float* a, int lda, const float* b, int ldb) {`,
    `  for (int x = 0; x < ${m}; ++x)`,
    `    for (int y = 0; y < ${n}; ++y) {`,
    `      float acc = c[x * ldc + y];`,
    `      for (int z = 0; z < ${k}; ++z) acc += a[x * lda + z] * b[z * ldb + y];`,
    `      c[x * ldc + y] = acc;`,
    `    }`,
    `}`,
  ])
}

/** AVX-512 VNNI's vpdpbusd shape: c[16] (int32) += Σ_{r<4} a[r] (uint8) · b[16×4] (int8). */
export const vnniDot16x4: TensorIntrinsic = (() => {
  const a = placeholder("a", [4], "uint8")
  const b = placeholder("b", [16, 4], "int8")
  const r = reduceAxis(4, "r")
  const widen = (e: Expr) => cast("int32", e)
  const out = compute("c", [16], (j) => sum(mul(widen(at(a, r.var)), widen(at(b, j, r.var))), [r]), "int32")
  return {
    name: "vnni_dot_16x4",
    compute: out,
    inputs: [a, b],
    mode: "update",
    emit: {
      c: {
        fn: "tessera_vnni_dot_16x4",
        header: [
          "#include <immintrin.h>",
          "/* c[16] += a[4] (u8) . b[16][4] (s8): one vpdpbusd */",
          "static inline __attribute__((always_inline)) void tessera_vnni_dot_16x4(int32_t* c, const uint8_t* a, const int8_t* b) {",
          "  int32_t a4; memcpy(&a4, a, 4);",
          "  _mm512_storeu_si512(c, _mm512_dpbusd_epi32(_mm512_loadu_si512(c), _mm512_set1_epi32(a4), _mm512_loadu_si512(b)));",
          "}",
        ].join("\n"),
      },
    },
  }
})()

/**
 * The VNNI dot's meaning (c[16] (int32) += Σ_{r<4} a[r] (uint8) · b[16×4] (int8)) on AVX2, which
 * has no vpdpbusd: vpmaddubsw (u8 × s8 products summed in pairs into s16) then vpmaddwd by ones
 * (the pairs summed into s32), two 8-lane halves. vpmaddubsw saturates its pair sums (255·127·2 =
 * 64770 does not fit s16; MLAS's AVX2 u8s8 kernel takes that rounding, and onnxruntime's quantizer
 * offers 7-bit weights, reduce_range, against it); here each activation byte is split into its
 * low 7 bits and its top bit, a = lo + 128·hi: lo · b pair sums are at most 127·128·2 = 32512 and
 * hi · b ones at most 256 in size, both exact in s16, and vpmaddwd by 1 and by 128 adds them into
 * s32 exactly — the declaration's meaning bit for bit.
 */
export const avx2Dot16x4: TensorIntrinsic = (() => {
  const a = placeholder("a", [4], "uint8")
  const b = placeholder("b", [16, 4], "int8")
  const r = reduceAxis(4, "r")
  const widen = (e: Expr) => cast("int32", e)
  const out = compute("c", [16], (j) => sum(mul(widen(at(a, r.var)), widen(at(b, j, r.var))), [r]), "int32")
  return {
    name: "avx2_dot_16x4",
    compute: out,
    inputs: [a, b],
    mode: "update",
    emit: {
      c: {
        fn: "tessera_avx2_dot_16x4",
        header: [
          "#include <immintrin.h>",
          "/* c[16] += a[4] (u8) . b[16][4] (s8) on AVX2: a = lo7 + 128 hi1, vpmaddubsw exact on each part, vpmaddwd into s32 */",
          "static inline __attribute__((always_inline)) void tessera_avx2_dot_16x4(int32_t* c, const uint8_t* a, const int8_t* b) {",
          "  uint32_t a4; memcpy(&a4, a, 4);",
          "  const __m256i lo = _mm256_set1_epi32((int32_t)(a4 & 0x7f7f7f7fu)), hi = _mm256_set1_epi32((int32_t)((a4 >> 7) & 0x01010101u));",
          "  const __m256i one = _mm256_set1_epi16(1), k128 = _mm256_set1_epi16(128);",
          "  for (int h = 0; h < 2; ++h) {",
          "    const __m256i w = _mm256_loadu_si256((const __m256i*)(b + 32 * h));",
          "    const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, w), one), _mm256_madd_epi16(_mm256_maddubs_epi16(hi, w), k128));",
          "    _mm256_storeu_si256((__m256i*)(c + 8 * h), _mm256_add_epi32(_mm256_loadu_si256((const __m256i*)(c + 8 * h)), s));",
          "  }",
          "}",
        ].join("\n"),
      },
    },
  }
})()

/**
 * vpdpbusd with the operands' roles turned (pixels in the lanes, MLAS's and oneDNN's 1×1 / GEMM
 * form): c[16] (int32) += Σ_{r<4} a[16×4] (uint8: 16 pixels' 4 channels) · b[4] (int8: one output
 * channel's 4 weights, broadcast). The sums of one channel over 16 consecutive pixels, so the
 * requantizing epilogue reads and writes them contiguously.
 */
export const vnniDotPx16x4: TensorIntrinsic = (() => {
  const a = placeholder("a", [16, 4], "uint8")
  const b = placeholder("b", [4], "int8")
  const r = reduceAxis(4, "r")
  const widen = (e: Expr) => cast("int32", e)
  const out = compute("c", [16], (j) => sum(mul(widen(at(a, j, r.var)), widen(at(b, r.var))), [r]), "int32")
  return {
    name: "vnni_dot_px_16x4",
    compute: out,
    inputs: [a, b],
    mode: "update",
    emit: {
      c: {
        fn: "tessera_vnni_dot_px_16x4",
        header: [
          "#include <immintrin.h>",
          "/* c[16] += a[16][4] (u8) . b[4] (s8): one vpdpbusd, b broadcast */",
          "static inline __attribute__((always_inline)) void tessera_vnni_dot_px_16x4(int32_t* c, const uint8_t* a, const int8_t* b) {",
          "  int32_t b4; memcpy(&b4, b, 4);",
          "  _mm512_storeu_si512(c, _mm512_dpbusd_epi32(_mm512_loadu_si512(c), _mm512_loadu_si512(a), _mm512_set1_epi32(b4)));",
          "}",
        ].join("\n"),
      },
    },
  }
})()

/**
 * vpdpbusd over a sliding window (a depthwise conv's kernel row: pixels in the lanes, the row's taps
 * in the dot's depth): c[16] (int32) += Σ_{r<4} a[j·s + r·d] (uint8) · b[r] (int8) for lane j, a a
 * run of 15·s + 3·d + 1 bytes (the stride s and dilation d of the row: 3·(s + d) < 16). The lanes'
 * 4 bytes are gathered in registers, AVX-512F / BW only: the run loaded (masked to its bytes),
 * vpermd gives 128-bit lane k the 16 bytes from 4·k·s, vpshufb picks each lane's 4 pixels' windows
 * in it (the same pattern in every lane); then one vpdpbusd with b's 4 bytes broadcast.
 */
export const vnniDotWindow = (s: number, d: number): TensorIntrinsic => {
  const len = 15 * s + 3 * d + 1
  const a = placeholder("a", [len], "uint8")
  const b = placeholder("b", [4], "int8")
  const r = reduceAxis(4, "r")
  const widen = (e: Expr) => cast("int32", e)
  const out = compute("c", [16], (j) => sum(mul(widen(at(a, add(mul(j, c(s)), mul(r.var, c(d))))), widen(at(b, r.var))), [r]), "int32")
  const fn = `tessera_vnni_dot_win_16x4_s${s}_d${d}`
  // (_mm512_set_epi32 / _epi8 list their elements from the highest down)
  const dwords = Array.from({ length: 16 }, (_, e) => Math.floor(e / 4) * s + (e % 4)).reverse()
  const bytes = Array.from({ length: 16 }, (_, e) => Math.floor(e / 4) * s + (e % 4) * d)
  const lanes = [...bytes, ...bytes, ...bytes, ...bytes].reverse()
  const mask = len >= 64 ? "~0ULL" : `0x${(2n ** BigInt(len) - 1n).toString(16)}ULL`
  return cUpdate(`vnni_dot_win_16x4_s${s}_d${d}`, out, [a, b], fn, [
    "#include <immintrin.h>",
    `/* c[16] += sum_r a[j*${s} + r*${d}] (u8) . b[r] (s8): the windows gathered by vpermd and vpshufb, one vpdpbusd */`,
    `static inline __attribute__((always_inline)) void ${fn}(int32_t* c, const uint8_t* a, const int8_t* b) {`,
    "  int32_t b4; memcpy(&b4, b, 4);",
    `  const __m512i run = _mm512_maskz_loadu_epi8(${mask}, a);`,
    `  const __m512i v = _mm512_shuffle_epi8(_mm512_permutexvar_epi32(_mm512_set_epi32(${dwords.join(", ")}), run), _mm512_set_epi8(${lanes.join(", ")}));`,
    "  _mm512_storeu_si512(c, _mm512_dpbusd_epi32(_mm512_loadu_si512(c), v, _mm512_set1_epi32(b4)));",
    "}",
  ])
}

/**
 * vpdpbusd with the channels in the lanes (a depthwise conv's small planes, MLAS's depthwise form):
 * c[16] (int32) += Σ_{r<4} a[r][l] (uint8: 4 pixels of a kernel row, each 16 channels' bytes) ·
 * b[l][r] (int8: channel l's 4 taps of that row) for lane l — one 64-byte run of a plane whose
 * 16 channels are innermost. The lanes' 4 bytes (channel l at 4 pixels) are gathered in registers,
 * AVX-512F / BW only: vpermd gives 128-bit lane m the dwords of channels 4m..4m+3 of each pixel,
 * vpshufb transposes each lane's 4 × 4 bytes; then one vpdpbusd with b's 64 bytes as they are.
 */
export const vnniDotChannels16x4: TensorIntrinsic = (() => {
  const a = placeholder("a", [4, 16], "uint8")
  const b = placeholder("b", [16, 4], "int8")
  const r = reduceAxis(4, "r")
  const widen = (e: Expr) => cast("int32", e)
  const out = compute("c", [16], (l) => sum(mul(widen(at(a, r.var, l)), widen(at(b, l, r.var))), [r]), "int32")
  const fn = "tessera_vnni_dot_ch_16x4"
  // (dword j of the result: dword (j mod 4)·4 + j div 4 of the run — and the same 4 × 4 in bytes
  // inside each 128-bit lane; _mm512_set_epi32 / _epi8 list their elements from the highest down)
  const quad = Array.from({ length: 16 }, (_, j) => (j % 4) * 4 + Math.floor(j / 4))
  const dwords = [...quad].reverse()
  const bytes = [...quad, ...quad, ...quad, ...quad].reverse()
  return cUpdate("vnni_dot_ch_16x4", out, [a, b], fn, [
    "#include <immintrin.h>",
    "/* c[16] += sum_r a[r][l] (u8) . b[l][r] (s8): the 4 pixels' channel bytes transposed by vpermd and vpshufb, one vpdpbusd */",
    `static inline __attribute__((always_inline)) void ${fn}(int32_t* c, const uint8_t* a, const int8_t* b) {`,
    `  const __m512i v = _mm512_shuffle_epi8(_mm512_permutexvar_epi32(_mm512_set_epi32(${dwords.join(", ")}), _mm512_loadu_si512(a)), _mm512_set_epi8(${bytes.join(", ")}));`,
    "  _mm512_storeu_si512(c, _mm512_dpbusd_epi32(_mm512_loadu_si512(c), v, _mm512_loadu_si512(b)));",
    "}",
  ])
})()

/** The windows the gather takes: every stride and dilation with 3·(s + d) < 16. */
export const vnniDotWindows: readonly TensorIntrinsic[] = [1, 2, 3, 4].flatMap((s) => [1, 2, 3, 4].filter((d) => 3 * (s + d) < 16).map((d) => vnniDotWindow(s, d)))

/**
 * The same u8 × s8 → s32 dot over 4 lanes, the shape SIMD128's `i32x4.dot_i16x8_s` (pairwise i16
 * products summed into i32x4) serves: c[4] (int32) += Σ_{r<4} a[r] (uint8) · b[4×4] (int8). The
 * wasm emitter widens a to i16 (a0 a1 a2 a3 twice, and its pairs swapped), b's 16 bytes, regrouped
 * by depth pair, to two i16x8 vectors, and adds two dots: products of at most 255 · 128 in i16
 * operands, two a lane, exact in int32 — the declaration's meaning bit for bit (src/emit/wasm/dot.ts).
 */
export const simd128Dot4x4: TensorIntrinsic = (() => {
  const a = placeholder("a", [4], "uint8")
  const b = placeholder("b", [4, 4], "int8")
  const r = reduceAxis(4, "r")
  const widen = (e: Expr) => cast("int32", e)
  const out = compute("c", [4], (j) => sum(mul(widen(at(a, r.var)), widen(at(b, j, r.var))), [r]), "int32")
  return { name: "simd128_dot_4x4", compute: out, inputs: [a, b], mode: "update", emit: { wasm: "dot_u8s8_4x4" } }
})()

/** Intrinsics by name (for replaying recorded tensorize steps). */
export const lookupIntrinsic = (name: string): TensorIntrinsic | undefined => {
  if (name === vnniDot16x4.name) return vnniDot16x4
  if (name === vnniDotPx16x4.name) return vnniDotPx16x4
  if (name === vnniDotChannels16x4.name) return vnniDotChannels16x4
  if (name === avx2Dot16x4.name) return avx2Dot16x4
  if (name === simd128Dot4x4.name) return simd128Dot4x4
  const win = /^vnni_dot_win_16x4_s(\d+)_d(\d+)$/.exec(name)
  if (win) return vnniDotWindow(Number(win[1]), Number(win[2]))
  const m = /^gemm_(\d+)x(\d+)x(\d+)_(float32|float64)$/.exec(name)
  return m ? gemmMicroKernel(Number(m[1]), Number(m[2]), Number(m[3]), m[4] as DType) : undefined
}
