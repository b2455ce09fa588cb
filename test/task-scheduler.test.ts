// The task scheduler (Ansor's): warm-up round robin, then rounds to the task with the largest
// expected end-to-end gain per trial (weight × time reduction); the caller's clock stops it.
import { Effect } from "effect"
import { fc, test as fcTest } from "@fast-check/vitest"
import { describe, expect, it } from "vitest"
import { parseDuration } from "../src/cli/tune.js"
import { budgetReserveMs, confirmationMs, type TrialCosts } from "../src/cli/tune-budget.js"
import { expectedGain, nextTask, scheduleTasks } from "../src/search/task-scheduler.js"
import type { TaskSession, TuneResult } from "../src/search/tune.js"
import type { Task } from "../src/search/task.js"

/** A session whose trials cost what `costAt(trial)` says (best-so-far kept), counting its runs. */
const fakeSession = (id: string, costAt: (t: number) => number, size = Infinity, finished: boolean[] = []) => {
  const costs: number[] = []
  const session: TaskSession<never> = {
    task: { id } as Task,
    run: (trials) =>
      Effect.sync(() => {
        while (costs.length < Math.min(trials, size)) costs.push(Math.min(costs.at(-1) ?? Infinity, costAt(costs.length)))
      }),
    open: () => costs.length < size,
    costs: () => costs,
    finish: (confirm = true) => Effect.sync(() => (finished.push(confirm), { task: { id } as Task, curve: [], trials: costs.length, errors: 0 } as TuneResult)),
  }
  return session
}

describe("task scheduler", () => {
  it("every task gets a round first (warm-up), in order", () => {
    const states = [
      { costs: [1, 1], weight: 1, open: true, trials: 2 },
      { costs: [], weight: 1, open: true, trials: 0 },
      { costs: [], weight: 5, open: true, trials: 0 },
    ]
    expect(nextTask(states, 8, 100)).toBe(1)
  })

  it("the gain is weight × time reduction: a task run by more groups, or taking longer, goes first; a closed or full task never", () => {
    const a = { costs: [2e-3, 1e-3], weight: 1, open: true, trials: 2 }
    const b = { costs: [2e-3, 1e-3], weight: 3, open: true, trials: 2 }
    expect(expectedGain(b, 2)).toBeCloseTo(3 * expectedGain(a, 2))
    expect(nextTask([a, b], 2, 100)).toBe(1)
    expect(nextTask([a, { ...b, open: false }], 2, 100)).toBe(0)
    expect(nextTask([a, b], 2, 2)).toBeUndefined()
    // a task that improved lately gains more than one that did not, at equal time
    const flat = { costs: [1e-3, 1e-3, 1e-3, 1e-3], weight: 1, open: true, trials: 4 }
    const falling = { costs: [4e-3, 3e-3, 2e-3, 1e-3], weight: 1, open: true, trials: 4 }
    expect(expectedGain(falling, 2)).toBeGreaterThan(expectedGain(flat, 2))
  })

  it("runs rounds until the clock stops it, most trials to the heaviest task, then finishes every task", async () => {
    const light = fakeSession("light", () => 1e-3)
    const heavy = fakeSession("heavy", () => 1e-3)
    let rounds = 0
    const results = await Effect.runPromise(
      scheduleTasks(
        [
          { session: light, weight: 1 },
          { session: heavy, weight: 4 },
        ],
        { round: 4, maxTrials: 1000, stop: () => rounds++ >= 10 },
      ),
    )
    expect(results.map((r) => r.task.id)).toEqual(["light", "heavy"])
    expect(light.costs().length).toBeGreaterThanOrEqual(4)
    expect(heavy.costs().length).toBeGreaterThan(light.costs().length)
    expect(light.costs().length + heavy.costs().length).toBe(40)
  })

  it("ends when every task's space is spent, without the clock", async () => {
    const a = fakeSession("a", (t) => 1 / (t + 1), 5)
    const b = fakeSession("b", (t) => 2 / (t + 1), 3)
    const results = await Effect.runPromise(scheduleTasks([{ session: a, weight: 1 }, { session: b, weight: 1 }], { round: 4, maxTrials: 100, stop: () => false }))
    expect(results.map((r) => r.trials)).toEqual([5, 3])
  })

  it("confirms each tried task while confirmWhile says so; past it the rest finish unconfirmed, and onSkipped names them", async () => {
    const confirmedBy: boolean[][] = [[], [], [], []]
    const sessions = ["a", "b", "c", "untried"].map((id, k) => ({ session: fakeSession(id, () => 1e-3, Infinity, confirmedBy[k]), weight: 1 }))
    let rounds = 0
    let confirmations = 0
    let skipped: readonly number[] = []
    await Effect.runPromise(
      scheduleTasks(sessions, {
        round: 2,
        maxTrials: 100,
        // three rounds: the warm-up of a, b and c; "untried" never gets one
        stop: () => rounds++ >= 3,
        // the budget lasts one confirmation
        confirmWhile: () => confirmations++ < 1,
        onSkipped: (ks) => (skipped = ks),
      }),
    )
    expect(sessions.map((s) => s.session.costs().length)).toEqual([2, 2, 2, 0])
    expect(confirmedBy).toEqual([[true], [false], [false], [true]])
    expect(skipped).toEqual([1, 2])
  })

  it("a whole-model tune keeps in hand the next round and each tried task's confirmation as its trials' costs bound it", () => {
    const rounds = new Map([
      [0, [10_000, 20_000]],
      [3, [30_000]],
    ])
    // ResNet-18's 56² Winograd task as the fourteenth session logged it: a 262 s round, of which
    // 8 lowerings of 0.5 s and 8 candidates measured in 2 calls, 30 s: the search is the rest
    const winograd: TrialCosts = { lowerMs: 4_000, lowered: 8, measureMs: 30_000, calls: 2, candidates: 8 }
    // a small task: 16 candidates in 2 calls, 6 s; no lowering counted
    const pool: TrialCosts = { lowerMs: 0, lowered: 0, measureMs: 6_000, calls: 2, candidates: 16 }
    const confirm = { top: 3, repeatsRatio: 3 }
    // 4 configs (the top 3 and the default): their lowering, and their measuring at 3 times the repeats
    expect(confirmationMs(winograd, 3, 3)).toBeCloseTo(4 * 500 + 4 * 3 * (30_000 / 8))
    expect(confirmationMs(pool, 3, 3)).toBeCloseTo(4 * 3 * (6_000 / 16))
    // far less than the Winograd task's round, which the reserve kept before
    expect(confirmationMs(winograd, 3, 3)).toBeLessThan(262_000 / 4)
    const costs = new Map([
      [0, winograd],
      [3, pool],
    ])
    // the next round: the mean of all three (20 s); then the two confirmations
    expect(budgetReserveMs(rounds, costs, confirm)).toBeCloseTo(20_000 + 47_000 + 4_500)
    expect(budgetReserveMs(rounds, costs, { top: 0, repeatsRatio: 3 })).toBeCloseTo(20_000)
    expect(budgetReserveMs(new Map(), new Map(), confirm)).toBe(0)
  })

  it("where the device tells each candidate's build and runs (c), a confirmation is its configs' own builds and runs", () => {
    // a Winograd round: a 21 s build of an sk_unroll 512 candidate inflates the batch's mean,
    // but the default and the fastest three built in 1-3 s and ran 0.1 s each (3 repeats)
    const measured: TrialCosts = {
      lowerMs: 8_000,
      lowered: 16,
      measureMs: 84_000,
      calls: 2,
      candidates: 8,
      spent: {
        confirmed: [
          { build: 2_000, run: 100 },
          { build: 1_000, run: 100 },
          { build: 3_000, run: 100 },
          { build: 1_500, run: 100 },
        ],
        outsideMs: 2_000,
      },
    }
    // lowering 4 × 0.5 s, their builds 7.5 s, their runs at 3 times the repeats 1.2 s, one call's outside 1 s
    expect(confirmationMs(measured, 3, 3)).toBeCloseTo(2_000 + 7_500 + 1_200 + 1_000)
    // from the calls alone it would keep 4 × 3 × 84 s / 8 (+ the lowering)
    const { spent: _, ...calls } = measured
    expect(confirmationMs(calls, 3, 3)).toBeCloseTo(2_000 + 126_000)
    // a config of the four it has no figures for (a resumed log's): at the trials' mean
    expect(confirmationMs({ ...measured, spent: { confirmed: measured.spent!.confirmed.slice(0, 3), outsideMs: 2_000 } }, 3, 3)).toBeCloseTo(2_000 + 6_000 + 900 + 1_000 + 31_500)
  })

  it("on an H100 a confirmation keeps at least one nvcc round in hand (the budget's guarantee there)", () => {
    // cuda: each candidate its own nvcc run, all in parallel (~18 s a batch, whatever its size);
    // a confirmation builds its 4 configs in parallel too: one nvcc round and 36 timed runs
    const nvcc = (candidates: number): TrialCosts => ({ lowerMs: 0, lowered: 0, measureMs: 18_000, calls: 1, candidates })
    for (const n of [8, 16, 32]) expect(confirmationMs(nvcc(n), 3, 3)).toBeGreaterThanOrEqual(18_000)
    expect(confirmationMs(nvcc(8), 3, 3)).toBeCloseTo(27_000)
  })

  // The bound, against a model of a serial measurer (c with one build job): a candidate costs its
  // build plus its repeats' runs; a confirmation builds and runs `top` + 1 configs at `ratio` times
  // the repeats. Where the confirmed configs lower, build and run no slower than the trials' mean
  // (the fastest configs, as the default: what a confirmation measures), it fits in confirmationMs.
  fcTest.prop([
    fc.array(fc.record({ lower: fc.double({ min: 0, max: 30_000, noNaN: true }), build: fc.double({ min: 0, max: 20_000, noNaN: true }), run: fc.double({ min: 0.02, max: 2, noNaN: true }) }), {
      minLength: 1,
      maxLength: 40,
    }),
    fc.integer({ min: 1, max: 16 }),
    fc.integer({ min: 1, max: 10 }),
    fc.integer({ min: 0, max: 7 }),
    fc.double({ min: 0, max: 1, noNaN: true }),
  ])("a confirmation of configs no slower than the trials' mean fits in confirmationMs", (cands, batch, repeats, top, share) => {
    const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length
    const ratio = Math.max(9, 3 * repeats) / repeats
    const calls = Math.ceil(cands.length / batch)
    const costs: TrialCosts = {
      lowerMs: cands.reduce((a, c) => a + c.lower, 0),
      lowered: cands.length,
      measureMs: cands.reduce((a, c) => a + c.build + repeats * c.run, 0),
      calls,
      candidates: cands.length,
    }
    // the confirmed configs: `share` of the way from free to the trials' mean, in each cost
    const [lower, build, run] = [mean(cands.map((c) => c.lower)), mean(cands.map((c) => c.build)), mean(cands.map((c) => c.run))].map((x) => share * x)
    const confirmation = (top + 1) * (lower + build + ratio * repeats * run)
    expect(confirmation).toBeLessThanOrEqual(confirmationMs(costs, top, ratio) * (1 + 1e-9) + 1e-9)
  })

  it("--time-budget takes seconds, minutes and hours", () => {
    expect(parseDuration("10m")).toBe(600)
    expect(parseDuration("90s")).toBe(90)
    expect(parseDuration("1.5h")).toBe(5400)
    expect(parseDuration("45")).toBe(45)
    expect(parseDuration("ten minutes")).toBeNaN()
    expect(parseDuration("0m")).toBeNaN()
  })
})
