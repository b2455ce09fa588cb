// Tuners behind one interface: each proposes configs to measure and learns from the results.
//   random — uniform without repeats;  grid — the space in index order;
//   ga     — a genetic search over knob values (tournament selection, crossover, mutation);
//   xgb    — AutoTVM's: parallel simulated annealing over the space guided by the cost model,
//            batches chosen from the model's best with epsilon-greedy diversity; its model can
//            start from other tasks' records (transfer learning).
import { Effect } from "effect"
import { prng } from "../ast/graph/arbitrary.js"
import type { Config } from "../lowering/templates/template.js"
import { canonicalConfig } from "../lowering/templates/sketch.js"
import type { CostModelShape, CostModelError } from "./cost-model.js"
import { mutate } from "./mutate.js"
import { configAt, configHash, sampleConfig, spaceSize, type Task } from "./task.js"

export interface MeasureResult {
  readonly config: Config
  /** Seconds per run; undefined when the candidate failed (error). */
  readonly cost: number | undefined
}

export interface Tuner {
  readonly name: "random" | "grid" | "ga" | "xgb" | "evo"
  /** Up to n configs not measured yet. */
  readonly next: (n: number) => Effect.Effect<Config[], CostModelError>
  readonly update: (results: readonly MeasureResult[]) => Effect.Effect<void, CostModelError>
  readonly hasNext: () => boolean
}

const visitedSet = () => {
  const seen = new Set<string>()
  return { has: (c: Config) => seen.has(configHash(c)), add: (c: Config) => seen.add(configHash(c)), size: () => seen.size }
}

export const randomTuner = (task: Pick<Task, "knobs">, seed = 1): Tuner => {
  const rng = prng(seed)
  const size = spaceSize(task.knobs)
  const seen = visitedSet()
  return {
    name: "random",
    hasNext: () => seen.size() < size,
    next: (n) =>
      Effect.sync(() => {
        const out: Config[] = []
        for (let tries = 0; out.length < n && seen.size() < size && tries < n * 50; tries++) {
          const c = sampleConfig(task.knobs, size, rng)
          if (seen.has(c)) continue
          seen.add(c)
          out.push(c)
        }
        return out
      }),
    update: () => Effect.void,
  }
}

export const gridTuner = (task: Pick<Task, "knobs">): Tuner => {
  const size = spaceSize(task.knobs)
  let i = 0
  return {
    name: "grid",
    hasNext: () => i < size,
    next: (n) =>
      Effect.sync(() => {
        const out: Config[] = []
        while (out.length < n && i < size) out.push(configAt(task.knobs, i++))
        return out
      }),
    update: () => Effect.void,
  }
}

export const gaTuner = (task: Pick<Task, "knobs">, seed = 1, populationSize = 16, mutation = 0.15): Tuner => {
  const rng = prng(seed)
  const size = spaceSize(task.knobs)
  const seen = visitedSet()
  const scored: { config: Config; fitness: number }[] = []
  const mutate = (c: Config): Config =>
    canonicalConfig(task.knobs, Object.fromEntries(task.knobs.map((k) => [k.name, rng.next() < mutation ? k.candidates[Math.floor(rng.next() * k.candidates.length)] : c[k.name]])))
  const pick = () => {
    // tournament of two among the fittest
    const pool = [...scored].sort((a, b) => b.fitness - a.fitness).slice(0, populationSize)
    const a = pool[Math.floor(rng.next() * pool.length)]
    const b = pool[Math.floor(rng.next() * pool.length)]
    return (a.fitness >= b.fitness ? a : b).config
  }
  return {
    name: "ga",
    hasNext: () => seen.size() < size,
    next: (n) =>
      Effect.sync(() => {
        const out: Config[] = []
        for (let tries = 0; out.length < n && seen.size() < size && tries < n * 100; tries++) {
          let c: Config
          if (scored.length < populationSize) c = sampleConfig(task.knobs, size, rng)
          else {
            const p1 = pick()
            const p2 = pick()
            c = mutate(Object.fromEntries(task.knobs.map((k) => [k.name, rng.next() < 0.5 ? p1[k.name] : p2[k.name]])))
          }
          if (seen.has(c)) continue
          seen.add(c)
          out.push(c)
        }
        return out
      }),
    update: (results) =>
      Effect.sync(() => {
        for (const r of results) scored.push({ config: r.config, fitness: r.cost ? 1 / r.cost : 0 })
      }),
  }
}

export interface XgbTunerOptions {
  readonly seed?: number
  /** Featurizes a config (lowers it and reads the TIR). */
  readonly features: (c: Config) => readonly number[]
  readonly model: CostModelShape
  /** Rows from other tasks' records to start the model from (transfer learning). */
  readonly transfer?: { readonly xs: readonly (readonly number[])[]; readonly ys: readonly number[] }
  readonly epsilon?: number
  readonly saChains?: number
  readonly saSteps?: number
  /**
   * What the model regresses: "ratio" (the default), best cost / cost; "rank", the measured
   * configs' rank (`rankTargets`), which spreads near-ties apart — a flat top, where the ratio
   * separates the best schedules by less than the model resolves (VTA's layers at their epilogue
   * ceiling: C6's best three within 0.15%).
   */
  readonly target?: "ratio" | "rank"
}

/** Regression targets by rank: the fastest 1, the slowest finite 0.5, evenly between; failures 0. */
export const rankTargets = (costs: readonly number[]): number[] => {
  const finite = costs.filter((c) => Number.isFinite(c)).sort((x, y) => x - y)
  const rank = new Map<number, number>()
  finite.forEach((c, k) => {
    if (!rank.has(c)) rank.set(c, k)
  })
  const n = Math.max(1, finite.length - 1)
  return costs.map((c) => (Number.isFinite(c) ? 0.5 + 0.5 * (1 - rank.get(c)! / n) : 0))
}

/** A config's feature row, computed once per config (by its hash). */
export const memoFeatures = (features: (c: Config) => readonly number[]): ((c: Config) => readonly number[]) => {
  const rows = new Map<string, readonly number[]>()
  return (c) => {
    const k = configHash(c)
    let f = rows.get(k)
    if (!f) {
      f = features(c)
      rows.set(k, f)
    }
    return f
  }
}

export const xgbTuner = (task: Pick<Task, "knobs">, options: XgbTunerOptions): Tuner => {
  const rng = prng(options.seed ?? 1)
  const size = spaceSize(task.knobs)
  const seen = visitedSet()
  const xs: (readonly number[])[] = []
  const costs: number[] = []
  const featuresOf = memoFeatures(options.features)
  const eps = options.epsilon ?? 0.05
  const chains = options.saChains ?? 8
  const steps = options.saSteps ?? 40
  // a step changes one knob that matters (evolutionary.ts's mutation: active knobs with a choice,
  // a tile's prime factor moved between levels); drawing from every knob, a third of the steps on
  // a generated space changed an inactive template knob that canonicalConfig set back: no move
  const neighbour = (c: Config): Config => mutate(task.knobs, c, rng)
  /** Measured configs, fastest first: where the annealing chains start (with the last run's points). */
  const measured: { config: Config; cost: number }[] = []
  let points: Config[] = []
  let started = false
  const start = Effect.gen(function* () {
    if (started) return
    started = true
    if (options.transfer && options.transfer.xs.length > 1) yield* options.model.fit(options.transfer.xs, options.transfer.ys)
  })
  /** Parallel simulated annealing over the space, scored by the model; the best unseen configs. */
  const explore = (n: number) =>
    Effect.gen(function* () {
      const pool = new Map<string, { config: Config; score: number }>()
      let temp = 1
      // half the chains from the fastest measured configs (Ansor's population), the rest where the
      // last annealing stopped (AutoTVM keeps its points), random ones where there are none: from
      // random starts alone, 40 steps in a space of 10^10 never reached the region the measured
      // best had found (bert's AV product: 90 GFLOP/s after 200 trials, random search 113)
      const bestFirst = measured.slice(0, Math.floor(chains / 2)).map((m) => m.config)
      const kept = points.slice(0, chains - bestFirst.length)
      let current = [...bestFirst, ...kept]
      while (current.length < chains) current.push(sampleConfig(task.knobs, size, rng))
      let scores = yield* options.model.predict(current.map(featuresOf))
      for (let s = 0; s < steps; s++) {
        const cand = current.map(neighbour)
        const cs = yield* options.model.predict(cand.map(featuresOf))
        current = current.map((c, k) => {
          const accept = cs[k] > scores[k] || rng.next() < Math.exp((cs[k] - scores[k]) / Math.max(temp, 1e-3))
          const next = accept ? cand[k] : c
          if (accept) scores[k] = cs[k]
          if (!seen.has(next)) pool.set(configHash(next), { config: next, score: scores[k] })
          return next
        })
        scores = [...scores]
        temp *= 0.9
      }
      points = current
      return [...pool.values()].sort((a, b) => b.score - a.score).slice(0, n).map((p) => p.config)
    })
  return {
    name: "xgb",
    hasNext: () => seen.size() < size,
    next: (n) =>
      Effect.gen(function* () {
        yield* start
        const out: Config[] = []
        const take = (c: Config) => {
          if (seen.has(c) || out.length >= n) return
          seen.add(c)
          out.push(c)
        }
        if (options.model.trained()) for (const c of yield* explore(n)) if (rng.next() >= eps) take(c)
        for (let tries = 0; out.length < n && seen.size() < size && tries < n * 50; tries++) take(sampleConfig(task.knobs, size, rng))
        return out
      }),
    update: (results) =>
      Effect.gen(function* () {
        for (const r of results) {
          // a resumed log's configs too: never proposed again
          seen.add(canonicalConfig(task.knobs, r.config))
          xs.push(featuresOf(r.config))
          costs.push(r.cost ?? Infinity)
          if (r.cost !== undefined) measured.push({ config: r.config, cost: r.cost })
        }
        measured.sort((a, b) => a.cost - b.cost)
        // regression on normalised throughput: best = 1, failures = 0
        const best = Math.min(...costs)
        const ys = options.target === "rank" ? rankTargets(costs) : costs.map((c) => (Number.isFinite(c) ? best / c : 0))
        const tx = options.transfer?.xs ?? []
        const ty = options.transfer?.ys ?? []
        yield* options.model.fit([...tx, ...xs], [...ty, ...ys])
      }),
  }
}

