// f32x4 min / max against a constant as the pseudo-min / max (`f32x4.pmin` / `f32x4.pmax`).
//
// `f32x4.min` / `f32x4.max` are IEEE's: a NaN in either operand gives NaN, and −0 < +0. x86 has no
// such instruction (minps / maxps return their second operand on a NaN or two zeros), so V8 emits
// each as two minps / maxps and a fix-up of about six more instructions. `pmin(a, b) = b < a ? b : a`
// and `pmax(a, b) = a < b ? b : a` are one minps / maxps. Against a constant c that is not NaN, with
// the varying operand x first, they give Math.min / Math.max (the TE's and TIR's meaning) exactly:
// - a NaN x: `c < NaN` and `NaN < c` are false, so both give x — the NaN, as Math's do;
// - x ≠ c, neither NaN: the comparison picks the smaller / larger;
// - x == c: the same value, except where both are zeros of different signs: pmax(−0, +0) is −0
//   (Math.max gives +0), pmin(+0, −0) is +0 (Math.min gives −0). max(x, +0) is therefore pmax
//   then + (+0) — −0 + +0 is +0 under round-to-nearest, every other value plus +0 itself — and
//   min(x, −0) keeps the IEEE op (no single add makes +0 into −0 and leaves the rest alone).
// ReLU6 (Clip 0..6, MobileNetV2's), ReLU and Clip are min / max against constants: two or three
// instructions where there were about fifteen.

/** How a float min / max against a constant is emitted: the pseudo-op, and whether + (+0) follows. */
export interface PseudoMinMax {
  readonly op: "f32x4.pmin" | "f32x4.pmax"
  /** Add the constant (+0) after: max(x, +0)'s −0 made +0. */
  readonly addZero: boolean
}

/** The pseudo-op for `op(x, c)` with c the constant `value`, or undefined where only the IEEE op is exact. */
export const pseudoMinMax = (op: "min" | "max", value: number): PseudoMinMax | undefined => {
  if (Number.isNaN(value)) return undefined
  const negZero = Object.is(value, -0)
  const posZero = Object.is(value, 0)
  if (op === "max") return { op: "f32x4.pmax", addZero: posZero }
  return negZero ? undefined : { op: "f32x4.pmin", addZero: false }
}
