// A move in a task's space: one knob that matters changed (a tile's prime factor moved between
// its levels, a split's neighbouring factor, or a knob resampled). Evolutionary search mutates
// with it and the xgb tuner's simulated annealing steps with it.
import type { prng } from "../ast/graph/arbitrary.js"
import { canonicalConfig } from "../lowering/templates/sketch.js"
import { knobActive, type Config, type Knob } from "../lowering/templates/template.js"

type Rng = ReturnType<typeof prng>

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng.next() * xs.length)]

const smallestPrime = (n: number): number => {
  for (let p = 2; p * p <= n; p++) if (n % p === 0) return p
  return n
}

/**
 * A multi-level tile knob's value with one prime factor moved between two of its levels (the
 * loop outside the tiles, the L1 tile, the register tile), where the result is a candidate.
 */
export const moveFactor = (knob: Knob & { kind: "choice" }, value: unknown, rng: Rng): string | undefined => {
  const [a, b] = String(value).split(".").map(Number)
  const extent = knob.extent ?? a * b
  const levels = [extent / (a * b), a, b]
  for (let tries = 0; tries < 6; tries++) {
    const from = Math.floor(rng.next() * 3)
    const to = (from + 1 + Math.floor(rng.next() * 2)) % 3
    if (levels[from] <= 1) continue
    const p = smallestPrime(levels[from])
    const next = [...levels]
    next[from] /= p
    next[to] *= p
    const v = `${next[1]}.${next[2]}`
    if ((knob.candidates as readonly unknown[]).includes(v)) return v
  }
  return undefined
}

/** One mutation: a tile factor moved between levels, a split's neighbouring factor, or a knob resampled. */
export const mutate = (knobs: readonly Knob[], c: Config, rng: Rng): Config => {
  // only knobs that are active in c (the others are held at their absent values)
  const live = knobs.filter((k) => k.candidates.length > 1 && knobActive(knobs, k, c))
  if (live.length === 0) return c
  const k = pick(rng, live)
  let v: string | number | boolean = pick(rng, k.candidates as readonly (string | number | boolean)[])
  if (k.kind === "choice" && k.levels === 2) v = moveFactor(k, c[k.name], rng) ?? v
  else if (k.kind === "split" && rng.next() < 0.5) {
    const i = k.candidates.indexOf(c[k.name] as number)
    v = k.candidates[Math.max(0, Math.min(k.candidates.length - 1, i + (rng.next() < 0.5 ? -1 : 1)))]
  }
  return canonicalConfig(knobs, { ...c, [k.name]: v })
}
