// The task scheduler (Ansor's): warm-up round robin, then rounds to the task with the largest
// expected end-to-end gain per trial (weight × time reduction); the caller's clock stops it.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { budgetReserveMs, parseDuration } from "../src/cli/tune.js"
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

  it("a whole-model tune keeps in hand the next round and a round per tried task for its confirmation", () => {
    const rounds = new Map([
      [0, [10_000, 20_000]],
      [3, [30_000]],
    ])
    // the next round: the mean of all three (20 s); the confirmations: 15 s and 30 s
    expect(budgetReserveMs(rounds, 3)).toBeCloseTo(20_000 + 15_000 + 30_000)
    expect(budgetReserveMs(rounds, 0)).toBeCloseTo(20_000)
    expect(budgetReserveMs(new Map(), 3)).toBe(0)
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
