// The task scheduler (Ansor's): warm-up round robin, then rounds to the task with the largest
// expected end-to-end gain per trial (weight × time reduction); the caller's clock stops it.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { parseDuration } from "../src/cli/tune.js"
import { expectedGain, nextTask, scheduleTasks } from "../src/search/task-scheduler.js"
import type { TaskSession, TuneResult } from "../src/search/tune.js"
import type { Task } from "../src/search/task.js"

/** A session whose trials cost what `costAt(trial)` says (best-so-far kept), counting its runs. */
const fakeSession = (id: string, costAt: (t: number) => number, size = Infinity) => {
  const costs: number[] = []
  const session: TaskSession<never> = {
    task: { id } as Task,
    run: (trials) =>
      Effect.sync(() => {
        while (costs.length < Math.min(trials, size)) costs.push(Math.min(costs.at(-1) ?? Infinity, costAt(costs.length)))
      }),
    open: () => costs.length < size,
    costs: () => costs,
    finish: () => Effect.succeed({ task: { id } as Task, curve: [], trials: costs.length, errors: 0 } as TuneResult),
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

  it("--time-budget takes seconds, minutes and hours", () => {
    expect(parseDuration("10m")).toBe(600)
    expect(parseDuration("90s")).toBe(90)
    expect(parseDuration("1.5h")).toBe(5400)
    expect(parseDuration("45")).toBe(45)
    expect(parseDuration("ten minutes")).toBeNaN()
    expect(parseDuration("0m")).toBeNaN()
  })
})
