// The host as measured: the FMA pipes and latency derived from timings, the program's output
// parsed (malformed output refused), the per-CPU cache (read back, refused when it is for another
// CPU or out of range, measured again when corrupt), and a real measurement here (where gcc is).
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { compilerAvailable } from "../src/device/c/build.js"
import { fmaShapes, hostFma, parseFmaOutput, parseFmaRecord } from "../src/device/fma.js"
import { cpuIdentity } from "../src/device/host.js"

describe("FMA shape from timings", () => {
  it("one cycle an add: latency = chain / cycle, pipes = cycle / best time per FMA (a Zen 4: two 256-bit pipes, one 512-bit)", () => {
    const t = { addNs: 0.27, widths: [{ lanes: 8, chainNs: 1.08, bestNs: 0.135 }, { lanes: 16, chainNs: 1.08, bestNs: 0.27 }] }
    expect(fmaShapes(t)).toEqual({ "8": { latency: 4, units: 2 }, "16": { latency: 4, units: 1 } })
  })

  it("a Zen 5 (two 512-bit pipes) and a CPU of latency 5; values out of what CPUs have are clamped", () => {
    expect(fmaShapes({ addNs: 0.2, widths: [{ lanes: 16, chainNs: 0.8, bestNs: 0.1 }] })).toEqual({ "16": { latency: 4, units: 2 } })
    expect(fmaShapes({ addNs: 0.3, widths: [{ lanes: 8, chainNs: 1.5, bestNs: 0.3 }] })).toEqual({ "8": { latency: 5, units: 1 } })
    expect(fmaShapes({ addNs: 1, widths: [{ lanes: 4, chainNs: 100, bestNs: 0.01 }] })).toEqual({ "4": { latency: 16, units: 4 } })
  })

  it("parses the program's output: the chain is the one-accumulator time, the best the least per FMA", () => {
    const out = "add 0.25\nfma 8 1 1.0\nfma 8 2 0.5\nfma 8 8 0.125\nfma 8 12 0.13\n"
    expect(parseFmaOutput(out)).toEqual({ addNs: 0.25, widths: [{ lanes: 8, chainNs: 1.0, bestNs: 0.125 }] })
  })

  it("refuses output with no add, no FMA, no one-accumulator chain or a bad number", () => {
    for (const bad of ["", "fma 8 1 1.0", "add 0.25", "add 0.25\nfma 8 2 0.5", "add 0.25\nfma 8 1 nan", "add 0\nfma 8 1 1.0", "add 0.25\nfma x 1 1.0"])
      expect(parseFmaOutput(bad)).toBeUndefined()
  })
})

describe("the per-CPU cache", () => {
  let dir: string
  const saved = process.env.TESSERA_CACHE_DIR
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-fma-test-"))
    process.env.TESSERA_CACHE_DIR = dir
  })
  afterEach(() => {
    if (saved === undefined) delete process.env.TESSERA_CACHE_DIR
    else process.env.TESSERA_CACHE_DIR = saved
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it("a record is refused when it is for another CPU, of another version, out of range or not JSON", () => {
    const ok = { version: 1, cpu: "X", byLanes: { "8": { units: 2, latency: 4 } } }
    expect(parseFmaRecord(JSON.stringify(ok), "X")).toEqual(ok)
    expect(parseFmaRecord(JSON.stringify(ok), "Y")).toBeUndefined()
    expect(parseFmaRecord(JSON.stringify({ ...ok, version: 2 }), "X")).toBeUndefined()
    expect(parseFmaRecord(JSON.stringify({ ...ok, byLanes: { "8": { units: 0, latency: 4 } } }), "X")).toBeUndefined()
    expect(parseFmaRecord(JSON.stringify({ ...ok, byLanes: { "8": { units: 2, latency: 1e9 } } }), "X")).toBeUndefined()
    expect(parseFmaRecord(JSON.stringify({ ...ok, byLanes: null }), "X")).toBeUndefined()
    expect(parseFmaRecord("{ torn", "X")).toBeUndefined()
  })

  it("identifies a CPU by its model name and flags", () => {
    const info = "processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu avx2 avx512f\n\nprocessor\t: 1\nmodel name\t: other\n"
    expect(cpuIdentity(info)).toBe("AMD EPYC 9R14\nfpu avx2 avx512f")
  })

  it.skipIf(!compilerAvailable())("measures here once (plausible pipes and latency), reads the cache after, and measures again over a corrupt file", () => {
    const first = hostFma("this cpu", [4])
    expect(first).toBeDefined()
    const shape = first!.byLanes["4"]
    expect(shape.units).toBeGreaterThanOrEqual(1)
    expect(shape.units).toBeLessThanOrEqual(4)
    expect(shape.latency).toBeGreaterThanOrEqual(2)
    expect(shape.latency).toBeLessThanOrEqual(8)
    const [file] = fs.readdirSync(path.join(dir, "cpu"))
    const cached = path.join(dir, "cpu", file)
    // what is cached is what is used: a record written there is read back as it is
    const planted = { version: 1, cpu: "this cpu", byLanes: { "4": { units: 3, latency: 7 } } }
    fs.writeFileSync(cached, JSON.stringify(planted))
    expect(hostFma("this cpu", [4])).toEqual(planted)
    fs.writeFileSync(cached, "{ torn")
    // a torn file: measured again, and the cache holds a valid record again
    expect(hostFma("this cpu", [4])!.byLanes["4"].latency).toBeGreaterThanOrEqual(2)
    expect(parseFmaRecord(fs.readFileSync(cached, "utf8"), "this cpu")).toBeDefined()
  })
})
