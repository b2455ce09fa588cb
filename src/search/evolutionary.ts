// Ansor's evolutionary search, guided by the cost model: a population from the task's defaults,
// the best measured configs and random samples; each generation mutates it (a tile factor moved
// between levels, an annotation resampled: unroll, parallel extent, compute location, vectorize),
// crosses pairs over knob by knob, and keeps the fittest by the model's prediction (XGBoost on the
// lowered TIR's features). A batch is the best unmeasured configs the generations met, with a
// share ε of random ones; measured results retrain the model. Seeded: the same seed, task and
// measurements give the same proposals.
import { Effect } from "effect"
import { prng } from "../ast/graph/arbitrary.js"
import { canonicalConfig } from "../lowering/templates/sketch.js"
import type { Config, Knob } from "../lowering/templates/template.js"
import type { CostModelShape } from "./cost-model.js"
import { configHash, sampleConfig, spaceSize, type Task } from "./task.js"
import { moveFactor, mutate } from "./mutate.js"
import { memoFeatures, type MeasureResult, type Tuner } from "./tuners.js"

export interface EvoTunerOptions {
  readonly seed?: number
  /** Featurizes a config (lowers it and reads the TIR). */
  readonly features: (c: Config) => readonly number[]
  readonly model: CostModelShape
  /** Configs the first population starts from (the template's defaults). */
  readonly seeds?: readonly Config[]
  /** Rows from other tasks' records to start the model from (transfer learning). */
  readonly transfer?: { readonly xs: readonly (readonly number[])[]; readonly ys: readonly number[] }
  readonly population?: number
  readonly generations?: number
  /** Share of each batch drawn at random (ε-greedy). */
  readonly epsilon?: number
  /** Chance that a child is a crossover of two parents rather than a mutant of one. */
  readonly crossover?: number
}

type Rng = ReturnType<typeof prng>

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng.next() * xs.length)]

export { moveFactor, mutate }


const crossover = (knobs: readonly Knob[], x: Config, y: Config, rng: Rng): Config =>
  canonicalConfig(knobs, Object.fromEntries(knobs.map((k) => [k.name, (rng.next() < 0.5 ? x : y)[k.name]])))

export const evoTuner = (task: Pick<Task, "knobs">, options: EvoTunerOptions): Tuner => {
  const rng = prng(options.seed ?? 1)
  const size = spaceSize(task.knobs)
  const seen = new Set<string>()
  const measured: { config: Config; cost: number }[] = []
  const xs: (readonly number[])[] = []
  const costs: number[] = []
  const featuresOf = memoFeatures(options.features)
  const population = options.population ?? 48
  const generations = options.generations ?? 4
  const eps = options.epsilon ?? 0.1
  const pCross = options.crossover ?? 0.2
  const seeds = (options.seeds ?? []).map((c) => canonicalConfig(task.knobs, c))
  let started = false
  const start = Effect.gen(function* () {
    if (started) return
    started = true
    if (options.transfer && options.transfer.xs.length > 1) yield* options.model.fit(options.transfer.xs, options.transfer.ys)
  })
  /** The generations' fittest unmeasured configs by predicted throughput, best first. */
  const evolve = (n: number) =>
    Effect.gen(function* () {
      const best = [...measured].sort((a, b) => a.cost - b.cost).slice(0, Math.floor(population / 2)).map((m) => m.config)
      let pop: Config[] = [...seeds, ...best]
      while (pop.length < population) pop.push(sampleConfig(task.knobs, size, rng))
      // every config met in any generation, with its predicted throughput
      const met = new Map<string, { config: Config; score: number }>()
      const score = (cs: readonly Config[]) =>
        Effect.gen(function* () {
          const fresh = [...new Map(cs.filter((c) => !met.has(configHash(c))).map((c) => [configHash(c), c] as const)).values()]
          const ys = fresh.length ? yield* options.model.predict(fresh.map(featuresOf)) : []
          fresh.forEach((c, k) => met.set(configHash(c), { config: c, score: ys[k] }))
        })
      yield* score(pop)
      const fitness = (c: Config) => met.get(configHash(c))?.score ?? 0
      for (let g = 0; g < generations; g++) {
        const parent = () => {
          const x = pick(rng, pop)
          const y = pick(rng, pop)
          return fitness(x) >= fitness(y) ? x : y
        }
        const children = Array.from({ length: population }, () => (rng.next() < pCross ? crossover(task.knobs, parent(), parent(), rng) : mutate(task.knobs, parent(), rng)))
        yield* score(children)
        const unique = new Map([...pop, ...children].map((c) => [configHash(c), c] as const))
        pop = [...unique.values()].sort((a, b) => fitness(b) - fitness(a)).slice(0, population)
      }
      return [...met.entries()]
        .filter(([h]) => !seen.has(h))
        .sort((a, b) => b[1].score - a[1].score)
        .slice(0, n)
        .map(([, m]) => m.config)
    })
  return {
    name: "evo",
    hasNext: () => seen.size < size,
    next: (n) =>
      Effect.gen(function* () {
        yield* start
        const out: Config[] = []
        const take = (c: Config) => {
          const h = configHash(c)
          if (seen.has(h) || out.length >= n) return
          seen.add(h)
          out.push(c)
        }
        for (const c of seeds) take(c)
        if (options.model.trained()) {
          const greedy = Math.round(n * (1 - eps))
          for (const c of yield* evolve(greedy)) take(c)
        }
        for (let tries = 0; out.length < n && seen.size < size && tries < n * 50; tries++) take(sampleConfig(task.knobs, size, rng))
        return out
      }),
    update: (results: readonly MeasureResult[]) =>
      Effect.gen(function* () {
        for (const r of results) {
          seen.add(configHash(canonicalConfig(task.knobs, r.config)))
          xs.push(featuresOf(r.config))
          costs.push(r.cost ?? Infinity)
          if (r.cost !== undefined) measured.push({ config: r.config, cost: r.cost })
        }
        const best = Math.min(...costs)
        const ys = costs.map((c) => (Number.isFinite(c) ? best / c : 0))
        yield* options.model.fit([...(options.transfer?.xs ?? []), ...xs], [...(options.transfer?.ys ?? []), ...ys])
      }),
  }
}
