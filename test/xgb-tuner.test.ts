// The xgb tuner's search and the features it learns from, with a stand-in cost model (a function
// of the config, no XGBoost): where its annealing starts, what it never proposes again, and which
// configs the feature rows tell apart. The tuner end to end with XGBoost is in tune.test.ts.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type { CostModelShape } from "../src/search/cost-model.js"
import { featuresOf } from "../src/search/features.js"
import { configHash, spaceSize } from "../src/search/task.js"
import { xgbTuner } from "../src/search/tuners.js"
import type { Config, Knob } from "../src/lowering/templates/template.js"
import type { PrimFunc } from "../src/ast/tir/tir.js"

const knob = (name: string, n: number): Knob => ({ kind: "choice", name, candidates: Array.from({ length: n }, (_, k) => k) })

/** A model that scores configs by a function of their knob values; trained once fit was called. */
const standIn = (score: (values: readonly number[]) => number): CostModelShape => {
  let trained = false
  return {
    fit: () => Effect.sync(() => void (trained = true)),
    predict: (xs) => Effect.sync(() => xs.map(score)),
    save: () => Effect.succeed(null),
    load: () => Effect.void,
    trained: () => trained,
  }
}

const run = <A>(e: Effect.Effect<A, unknown>) => Effect.runPromise(e as Effect.Effect<A, never>)

describe("xgb tuner", () => {
  it("never proposes a config it was told of in update (a resumed log's), even when its model ranks it first", async () => {
    const task = { knobs: [knob("x", 3), knob("y", 3)] }
    const values = (c: Config) => task.knobs.map((k) => c[k.name] as number)
    // the model likes every config the same: what it proposes is whatever the annealing met
    const tuner = xgbTuner(task, { seed: 2, model: standIn(() => 1), features: values })
    const all = Array.from({ length: 9 }, (_, i) => ({ x: i % 3, y: Math.floor(i / 3) }))
    await run(tuner.update(all.slice(0, 8).map((config, k) => ({ config, cost: 1 + k }))))
    const next = await run(tuner.next(9))
    expect(next.map(configHash)).toEqual([configHash(all[8])])
  })

  it("anneals from the fastest measured configs: its next batch holds neighbours of the best, 10 knobs away from random starts", async () => {
    const task = { knobs: Array.from({ length: 10 }, (_, k) => knob(`k${k}`, 10)) }
    expect(spaceSize(task.knobs)).toBe(1e10)
    const values = (c: Config) => task.knobs.map((k) => c[k.name] as number)
    const best: Config = Object.fromEntries(task.knobs.map((k) => [k.name, 7]))
    const distance = (xs: readonly number[]) => xs.filter((v) => v !== 7).length
    // the model has learned that configs near the measured best are fast
    const tuner = xgbTuner(task, { seed: 3, model: standIn((xs) => -distance(xs)), features: values })
    const others: Config[] = Array.from({ length: 15 }, (_, i) => Object.fromEntries(task.knobs.map((k, j) => [k.name, (i + j) % 7])))
    await run(tuner.update([{ config: best, cost: 1 }, ...others.map((config) => ({ config, cost: 5 }))]))
    const next = await run(tuner.next(16))
    expect(next.length).toBe(16)
    expect(Math.min(...next.map((c) => distance(values(c))))).toBe(1)
  })
})

describe("features of the generated space's splits", () => {
  // a conv's generated space: five data axes ("a.b" register tiles), three reduce axes
  const data = [1, 12, 28, 28, 16]
  const knobs: Knob[] = [
    ...data.map((e, i): Knob => ({ kind: "choice", name: `sk_s${i}`, extent: e, levels: 2, candidates: [...new Set(["1.1", `1.${e}`, `${e}.1`])], absent: "1.1" })),
    ...[32, 1, 1].map((e, j): Knob => ({ kind: "choice", name: `sk_r${j}`, extent: e, candidates: [1, 2, 4, 8], absent: 1 })),
  ]
  // one TIR function for every config: what tells them apart here is the knob slots alone (as in
  // unrolled code, where the loops a split made are gone from the TIR)
  const f = { kind: "primfunc", name: "f", params: [], body: { kind: "seq", body: [] } } as unknown as PrimFunc
  const base: Config = Object.fromEntries(knobs.map((k) => [k.name, k.candidates[0]]))

  it("configs that differ in any one split (a later axis's tile, a reduce factor) have different rows", () => {
    const row = featuresOf(f, knobs, base)
    for (const k of knobs)
      for (const v of k.candidates.slice(1)) expect(featuresOf(f, knobs, { ...base, [k.name]: v }), `${k.name} = ${String(v)}`).not.toEqual(row)
  })
})
