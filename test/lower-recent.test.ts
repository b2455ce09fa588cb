// lowerRecent: the tuner lowers a measured config once for its build and its feature row.
import { describe, expect, it } from "vitest"
import { lowerRecent } from "../src/search/extract.js"
import type { Config } from "../src/lowering/templates/template.js"

describe("lowerRecent", () => {
  const counting = () => {
    const calls: string[] = []
    const lower = (c: Config) => {
      calls.push(JSON.stringify(c))
      if (c.bad) throw new Error("cannot schedule")
      return { lowered: c.tile }
    }
    return { calls, lower }
  }

  it("lowers a config once while it is among the last `kept`, and gives the same function back", () => {
    const { calls, lower } = counting()
    const recent = lowerRecent(lower, 2)
    const a = recent({ tile: 4, order: "x" })
    // the same config, its keys in another order: the same schedule
    expect(recent({ order: "x", tile: 4 })).toBe(a)
    expect(calls).toHaveLength(1)
    recent({ tile: 8 })
    recent({ tile: 16 }) // 3 configs: the least recently used (tile 4) goes
    expect(recent({ tile: 16 })).toEqual({ lowered: 16 })
    expect(calls).toHaveLength(3)
    recent({ tile: 4, order: "x" })
    expect(calls).toHaveLength(4)
    // a hit counts as a use: tile 16 was used after tile 8, so tile 8 went when tile 4 came back
    recent({ tile: 16 })
    expect(calls).toHaveLength(4)
  })

  it("keeps nothing of a config that fails to lower: it throws again", () => {
    const { calls, lower } = counting()
    const recent = lowerRecent(lower, 4)
    expect(() => recent({ bad: true })).toThrow("cannot schedule")
    expect(() => recent({ bad: true })).toThrow("cannot schedule")
    expect(calls).toHaveLength(2)
  })
})
