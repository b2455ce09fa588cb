// The c pool's parallel regions as measured (src/device/region.ts): the program's output parsed
// (malformed output refused, the least of the sittings kept), the break-even interpolated where the
// pool's lead crosses zero, the per-CPU cache (read back, refused for another CPU, out of range or
// torn), the thread counts measured, the target record refusing impossible figures, and a real
// measurement here with the c target's pool (where gcc is).
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { cpuAttrs, regionAt, type ParallelRegionRecord } from "../src/ast/target.js"
import { compilerAvailable } from "../src/device/c/build.js"
import { hostRegion, measureRegion, MIN_JOINED, REFUSED_RETRY_MS, parseRegionOutput, parseRegionRecord, regionMeasure, regionRecord, regionThreadCounts, REGION_GAP_NS } from "../src/device/region.js"
import { cPool } from "../src/emit/c/pool.js"

const gap = REGION_GAP_NS

describe("the region program's output", () => {
  const sitting = (peak: number, region: number, joined: number, empty: number, serial: number, parallel: number) =>
    [`peak ${peak}`, `region 2 ${gap} ${region} ${joined}`, `empty 2 ${gap} ${empty} 301`, `region 2 50000 5000 ${joined}`, `stream 2 8192 ${serial} ${parallel} ${joined}`].join("\n")

  it("keeps the least of the valid sittings' medians per figure, and the largest peak", () => {
    const t = parseRegionOutput([sitting(150, 900, 290, 200, 500, 900), sitting(190, 700, 280, 250, 450, 950)].join("\n"))!
    expect(t.flopsPerNs).toBe(190)
    const two = t.byThreads.get(2)!
    expect(two.regionNs.get(gap)).toBe(700)
    expect(two.regionNs.get(50000)).toBe(5000)
    expect(two.emptyNs.get(gap)).toBe(200)
    expect(two.stream).toEqual([{ bytes: 8192, serialNs: 450, parallelNs: 900 }])
  })

  it(`a sitting whose worker joined fewer than ${MIN_JOINED} of the regions is the load's, not the machine's: left out; none left, no thread count`, () => {
    const t = parseRegionOutput([sitting(150, 30000, 20, 200, 400, 30000), sitting(190, 700, MIN_JOINED, 250, 450, 950)].join("\n"))!
    expect(t.byThreads.get(2)!.regionNs.get(gap)).toBe(700)
    expect(t.byThreads.get(2)!.stream).toEqual([{ bytes: 8192, serialNs: 450, parallelNs: 950 }])
    const loaded = parseRegionOutput([sitting(150, 30000, 20, 200, 400, 30000), sitting(190, 35000, MIN_JOINED - 1, 250, 450, 950)].join("\n"))!
    expect(loaded.byThreads.size).toBe(0)
    expect(regionRecord(loaded)).toBeUndefined()
  })

  it("refuses output with no peak or a bad number", () => {
    for (const bad of ["", `region 2 ${gap} 700 300`, `peak 100\nregion 2 ${gap} nan 300`, `peak 0\nregion 2 ${gap} 700 300`]) expect(parseRegionOutput(bad)).toBeUndefined()
  })
})

describe("the record of one thread count", () => {
  const t = (stream: [number, number, number][], region = 600, empty = 100) => ({
    regionNs: new Map([[gap, region]]),
    emptyNs: new Map([[gap, empty]]),
    stream: stream.map(([bytes, serialNs, parallelNs]) => ({ bytes, serialNs, parallelNs })),
  })

  it("the break-even where the pool's lead crosses zero, interpolated in one core's time and bytes; the rate there", () => {
    // lead −200 at 8 KiB (400 vs 600 ns), +200 at 16 KiB (1000 vs 800): crosses halfway
    const m = regionMeasure(t([[4096, 200, 500], [8192, 400, 600], [16384, 1000, 800], [32768, 2000, 1300]]))!
    expect(m.regionNs).toBe(600)
    expect(m.breakEvenNs).toBeCloseTo(700)
    expect(m.streamBytesPerNs).toBeCloseTo(12288 / 700)
  })

  it("a win at one size that the next loses is noise: the break-even is past the last loss", () => {
    const m = regionMeasure(t([[4096, 200, 150], [8192, 400, 600], [16384, 1000, 800]]))!
    expect(m.breakEvenNs).toBeCloseTo(700)
  })

  it("the pool winning from the smallest size: that size; never winning: the largest; the region at least the empty one", () => {
    expect(regionMeasure(t([[4096, 200, 150], [8192, 400, 300]]))!.breakEvenNs).toBe(200)
    expect(regionMeasure(t([[4096, 200, 350], [8192, 400, 500]]))!.breakEvenNs).toBe(400)
    expect(regionMeasure(t([[4096, 200, 150]], -30, 90))!.regionNs).toBe(90)
  })

  it("a record of every thread count measured; none without a region at the executor's gap", () => {
    const timings = { flopsPerNs: 200, byThreads: new Map([[2, t([[4096, 200, 150]])], [4, { ...t([[4096, 200, 150]]), regionNs: new Map([[50000, 1]]) }]]) }
    const r = regionRecord(timings)!
    expect(Object.keys(r.byThreads)).toEqual(["2"])
    expect(r.flopsPerNs).toBe(200)
  })

  it("thread counts: 2, 4, … below the cores, and the cores; none on one core", () => {
    expect(regionThreadCounts(1)).toEqual([])
    expect(regionThreadCounts(2)).toEqual([2])
    expect(regionThreadCounts(6)).toEqual([2, 4, 6])
    expect(regionThreadCounts(8)).toEqual([2, 4, 8])
  })
})

describe("the record in the target", () => {
  const record: ParallelRegionRecord = { flopsPerNs: 200, byThreads: { "2": { regionNs: 800, breakEvenNs: 3000, streamBytesPerNs: 20 }, "8": { regionNs: 2000, breakEvenNs: 9000, streamBytesPerNs: 20 } } }

  it("the region for a thread count: the largest measured not above it; none below 2", () => {
    expect(regionAt(record, 1)).toBeUndefined()
    expect(regionAt(record, 2)).toMatchObject({ threads: 2, regionNs: 800 })
    expect(regionAt(record, 7)).toMatchObject({ threads: 2 })
    expect(regionAt(record, 16)).toMatchObject({ threads: 8, regionNs: 2000 })
    expect(regionAt(undefined, 2)).toBeUndefined()
  })

  it("a target refuses a record with a figure that is not positive or a thread count under 2", () => {
    expect(cpuAttrs({ parallelRegion: record }).parallelRegion).toEqual(record)
    expect(() => cpuAttrs({ parallelRegion: { ...record, flopsPerNs: 0 } })).toThrow(/flopsPerNs/)
    expect(() => cpuAttrs({ parallelRegion: { flopsPerNs: 1, byThreads: { "1": record.byThreads["2"] } } })).toThrow(/byThreads/)
    expect(() => cpuAttrs({ parallelRegion: { flopsPerNs: 1, byThreads: { "2": { ...record.byThreads["2"], regionNs: Number.NaN } } } })).toThrow(/byThreads/)
  })
})

describe("the per-CPU cache of the region record", () => {
  let dir: string
  const saved = process.env.TESSERA_CACHE_DIR
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-region-test-"))
    process.env.TESSERA_CACHE_DIR = dir
  })
  afterEach(() => {
    if (saved === undefined) delete process.env.TESSERA_CACHE_DIR
    else process.env.TESSERA_CACHE_DIR = saved
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("a cached record is refused when it is for another CPU, of another version, not positive or not JSON", () => {
    const record = { flopsPerNs: 200, byThreads: { "2": { regionNs: 800, breakEvenNs: 3000, streamBytesPerNs: 20 } } }
    const ok = { version: 1, cpu: "X", record }
    expect(parseRegionRecord(JSON.stringify(ok), "X")).toEqual(record)
    expect(parseRegionRecord(JSON.stringify(ok), "Y")).toBeUndefined()
    expect(parseRegionRecord(JSON.stringify({ ...ok, version: 2 }), "X")).toBeUndefined()
    expect(parseRegionRecord(JSON.stringify({ ...ok, record: { ...record, byThreads: { "2": { ...record.byThreads["2"], breakEvenNs: -1 } } } }), "X")).toBeUndefined()
    expect(parseRegionRecord(JSON.stringify({ ...ok, record: { ...record, byThreads: {} } }), "X")).toBeUndefined()
    expect(parseRegionRecord("{ torn", "X")).toBeUndefined()
  })

  it("a refusal within the hour stands (nothing measured); an older one does not", () => {
    const pool = cPool("static ")
    const now = 10 * REFUSED_RETRY_MS
    // the refusal's file is the record's name with .refused: found by measuring once where gcc is, else planted by name
    fs.mkdirSync(path.join(dir, "cpu"), { recursive: true })
    const plant = (at: number) => {
      for (const f of fs.readdirSync(path.join(dir, "cpu"))) fs.rmSync(path.join(dir, "cpu", f))
      fs.writeFileSync(path.join(dir, "cpu", refusedName), `${at}\n`)
    }
    const refusedName = (() => {
      const key = createHash("sha256").update(`other cpu\n2\n4\n${pool}`).digest("hex").slice(0, 24)
      return `region-${key}.refused`
    })()
    plant(now - REFUSED_RETRY_MS / 2)
    const t0 = Date.now()
    expect(hostRegion("other cpu", pool, [2], 4, now)).toBeUndefined()
    expect(Date.now() - t0).toBeLessThan(500)
    expect(fs.readdirSync(path.join(dir, "cpu"))).toEqual([refusedName])
  })

  it("one core: nothing to measure", () => {
    expect(hostRegion("this cpu", cPool("static "), [], 16)).toBeUndefined()
  })

  it.skipIf(!compilerAvailable())("measures the c target's pool here (plausible figures), reads the cache after, and measures again over a torn file", () => {
    const pool = cPool("static ")
    // the program builds with the pool and prints what the parser reads, loaded or not
    const timings = measureRegion(pool, [2], 4)
    expect(timings?.flopsPerNs).toBeGreaterThan(0.1)
    const first = hostRegion("this cpu", pool, [2], 4)
    // (a machine whose cores other processes hold gives no record: its refusal cached, the bytes rule holds)
    if (first === undefined) {
      const files = fs.readdirSync(path.join(dir, "cpu"))
      expect(files.filter((f) => f.endsWith(".json"))).toEqual([])
      expect(files.filter((f) => f.endsWith(".refused"))).toHaveLength(1)
      return
    }
    const two = first!.byThreads["2"]
    // a region costs more than nothing and less than a millisecond; one core streams 0.1–1000 bytes a ns
    expect(two.regionNs).toBeGreaterThan(0)
    expect(two.regionNs).toBeLessThan(1e6)
    expect(two.breakEvenNs).toBeGreaterThan(0)
    expect(two.streamBytesPerNs).toBeGreaterThan(0.1)
    expect(two.streamBytesPerNs).toBeLessThan(1000)
    expect(first!.flopsPerNs).toBeGreaterThan(0.1)
    const [file] = fs.readdirSync(path.join(dir, "cpu"))
    const cached = path.join(dir, "cpu", file)
    const planted = { version: 1, cpu: "this cpu", record: { flopsPerNs: 3, byThreads: { "2": { regionNs: 5, breakEvenNs: 7, streamBytesPerNs: 11 } } } }
    fs.writeFileSync(cached, JSON.stringify(planted))
    expect(hostRegion("this cpu", pool, [2], 4)).toEqual(planted.record)
    // another pool's text is another record (measured again)
    expect(hostRegion("this cpu", pool + "\n", [2], 4)).not.toEqual(planted.record)
    fs.writeFileSync(cached, "{ torn")
    expect(hostRegion("this cpu", pool, [2], 4)!.byThreads["2"].regionNs).toBeGreaterThan(0)
  })
})
