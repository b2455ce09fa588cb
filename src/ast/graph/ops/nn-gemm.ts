// The one fast matrix product behind Conv (im2col), MatMul and Gemm: C = A · Bᵀ over Float32Array
// operands whose reduction axis is contiguous in both (A is M×K, B is N×K, both row-major), so the
// innermost loop is a unit-stride dot product. Register-blocked 4×4 (sixteen accumulators, eight
// loads per k step); columns are blocked so a panel of B stays in cache while every row panel of A
// streams over it. Accumulation is in float64 (JS numbers); each result is stored once.

/** Columns of B per cache block: about 128 KiB of B at K = 256. */
const blockColumns = (k: number): number => Math.max(8, Math.min(512, ((32768 / Math.max(k, 1)) | 0) & ~3))

/**
 * C[cOff + i·ldc + j] = bias(i, j) + Σ_k A[aOff + i·lda + k] · B[bOff + j·ldb + k], for i < m, j < n.
 * `rowBias` (indexed by i) and `colBias` (indexed by j) are optional start values.
 */
export const gemmNT = (
  m: number,
  n: number,
  k: number,
  a: Float32Array,
  aOff: number,
  lda: number,
  b: Float32Array,
  bOff: number,
  ldb: number,
  c: Float32Array | Float64Array,
  cOff: number,
  ldc: number,
  rowBias?: ArrayLike<number>,
  colBias?: ArrayLike<number>,
): void => {
  const nb = blockColumns(k)
  const m4 = m & ~3
  for (let j0 = 0; j0 < n; j0 += nb) {
    const j1 = Math.min(n, j0 + nb)
    const j4 = j0 + ((j1 - j0) & ~3)
    for (let i = 0; i < m4; i += 4) {
      const pa0 = aOff + i * lda
      const pa1 = pa0 + lda
      const pa2 = pa1 + lda
      const pa3 = pa2 + lda
      const r0 = rowBias ? rowBias[i] : 0
      const r1 = rowBias ? rowBias[i + 1] : 0
      const r2 = rowBias ? rowBias[i + 2] : 0
      const r3 = rowBias ? rowBias[i + 3] : 0
      for (let j = j0; j < j4; j += 4) {
        const pb0 = bOff + j * ldb
        const pb1 = pb0 + ldb
        const pb2 = pb1 + ldb
        const pb3 = pb2 + ldb
        let c00 = 0, c01 = 0, c02 = 0, c03 = 0
        let c10 = 0, c11 = 0, c12 = 0, c13 = 0
        let c20 = 0, c21 = 0, c22 = 0, c23 = 0
        let c30 = 0, c31 = 0, c32 = 0, c33 = 0
        for (let kk = 0; kk < k; kk++) {
          const b0 = b[pb0 + kk]
          const b1 = b[pb1 + kk]
          const b2 = b[pb2 + kk]
          const b3 = b[pb3 + kk]
          const a0 = a[pa0 + kk]
          c00 += a0 * b0
          c01 += a0 * b1
          c02 += a0 * b2
          c03 += a0 * b3
          const a1 = a[pa1 + kk]
          c10 += a1 * b0
          c11 += a1 * b1
          c12 += a1 * b2
          c13 += a1 * b3
          const a2 = a[pa2 + kk]
          c20 += a2 * b0
          c21 += a2 * b1
          c22 += a2 * b2
          c23 += a2 * b3
          const a3 = a[pa3 + kk]
          c30 += a3 * b0
          c31 += a3 * b1
          c32 += a3 * b2
          c33 += a3 * b3
        }
        const q0 = colBias ? colBias[j] : 0
        const q1 = colBias ? colBias[j + 1] : 0
        const q2 = colBias ? colBias[j + 2] : 0
        const q3 = colBias ? colBias[j + 3] : 0
        let pc = cOff + i * ldc + j
        c[pc] = r0 + q0 + c00
        c[pc + 1] = r0 + q1 + c01
        c[pc + 2] = r0 + q2 + c02
        c[pc + 3] = r0 + q3 + c03
        pc += ldc
        c[pc] = r1 + q0 + c10
        c[pc + 1] = r1 + q1 + c11
        c[pc + 2] = r1 + q2 + c12
        c[pc + 3] = r1 + q3 + c13
        pc += ldc
        c[pc] = r2 + q0 + c20
        c[pc + 1] = r2 + q1 + c21
        c[pc + 2] = r2 + q2 + c22
        c[pc + 3] = r2 + q3 + c23
        pc += ldc
        c[pc] = r3 + q0 + c30
        c[pc + 1] = r3 + q1 + c31
        c[pc + 2] = r3 + q2 + c32
        c[pc + 3] = r3 + q3 + c33
      }
      // column tail: 4×1
      for (let j = j4; j < j1; j++) {
        const pb = bOff + j * ldb
        let c0 = 0, c1 = 0, c2 = 0, c3 = 0
        for (let kk = 0; kk < k; kk++) {
          const bv = b[pb + kk]
          c0 += a[pa0 + kk] * bv
          c1 += a[pa1 + kk] * bv
          c2 += a[pa2 + kk] * bv
          c3 += a[pa3 + kk] * bv
        }
        const q = colBias ? colBias[j] : 0
        const pc = cOff + i * ldc + j
        c[pc] = r0 + q + c0
        c[pc + ldc] = r1 + q + c1
        c[pc + 2 * ldc] = r2 + q + c2
        c[pc + 3 * ldc] = r3 + q + c3
      }
    }
    // row tail: 1×4, then 1×1
    for (let i = m4; i < m; i++) {
      const pa = aOff + i * lda
      const r = rowBias ? rowBias[i] : 0
      for (let j = j0; j < j4; j += 4) {
        const pb0 = bOff + j * ldb
        const pb1 = pb0 + ldb
        const pb2 = pb1 + ldb
        const pb3 = pb2 + ldb
        let c0 = 0, c1 = 0, c2 = 0, c3 = 0
        for (let kk = 0; kk < k; kk++) {
          const av = a[pa + kk]
          c0 += av * b[pb0 + kk]
          c1 += av * b[pb1 + kk]
          c2 += av * b[pb2 + kk]
          c3 += av * b[pb3 + kk]
        }
        const pc = cOff + i * ldc + j
        c[pc] = r + (colBias ? colBias[j] : 0) + c0
        c[pc + 1] = r + (colBias ? colBias[j + 1] : 0) + c1
        c[pc + 2] = r + (colBias ? colBias[j + 2] : 0) + c2
        c[pc + 3] = r + (colBias ? colBias[j + 3] : 0) + c3
      }
      for (let j = j4; j < j1; j++) {
        const pb = bOff + j * ldb
        let acc = 0
        for (let kk = 0; kk < k; kk++) acc += a[pa + kk] * b[pb + kk]
        c[cOff + i * ldc + j] = r + (colBias ? colBias[j] : 0) + acc
      }
    }
  }
}

/** The transpose of a rows×cols block of `src` (row stride `ld`) into a fresh cols×rows array. */
export const transposeInto = (
  src: ArrayLike<number>,
  off: number,
  rows: number,
  cols: number,
  ld: number,
  dst: Float32Array,
): Float32Array => {
  const T = 32
  for (let r0 = 0; r0 < rows; r0 += T) {
    const r1 = Math.min(rows, r0 + T)
    for (let c0 = 0; c0 < cols; c0 += T) {
      const c1 = Math.min(cols, c0 + T)
      for (let r = r0; r < r1; r++) {
        const ps = off + r * ld
        for (let c = c0; c < c1; c++) dst[c * rows + r] = src[ps + c]
      }
    }
  }
  return dst
}
