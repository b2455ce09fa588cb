// A small seeded PRNG for zoo weights and test inputs: mulberry32 for uniforms, Box–Muller for
// normals. Plain and deterministic: the same seed gives the same stream on every platform.

export interface Rng {
  /** Uniform in [0, 1). */
  readonly uniform: () => number
  /** Standard normal. */
  readonly normal: () => number
}

/** A 32-bit hash of a seed and a label, so independent streams can be drawn per tensor. */
export const mixSeed = (seed: number, label: string): number => {
  let h = (Math.imul(seed | 0, 0x9e3779b1) ^ 0x85ebca6b) >>> 0
  for (let i = 0; i < label.length; i++) {
    h ^= label.charCodeAt(i)
    h = Math.imul(h, 16777619) >>> 0
  }
  h ^= h >>> 16
  h = Math.imul(h, 0x7feb352d) >>> 0
  h ^= h >>> 15
  return h >>> 0
}

export const rng = (seed: number): Rng => {
  let s = seed >>> 0
  const uniform = (): number => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  let spare: number | undefined
  const normal = (): number => {
    if (spare !== undefined) {
      const z = spare
      spare = undefined
      return z
    }
    const u = 1 - uniform() // (0, 1]: log is finite
    const v = uniform()
    const r = Math.sqrt(-2 * Math.log(u))
    spare = r * Math.sin(2 * Math.PI * v)
    return r * Math.cos(2 * Math.PI * v)
  }
  return { uniform, normal }
}
