// issue 21's graph side end to end: a small shift-requantized int8 network (two residual blocks
// and a strided 1×1 head; 20 channels, so the pack pads them) partitioned between VTA (the
// simulator) and the c target, run by one executor, equals the c target running the same integer
// graph, bit for bit; the artifact is deterministic; a node forced onto VTA that it cannot run is a
// typed error naming it; and the command line's run / compile / inspect --target vta.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { bindSync } from "../src/ast/graph/infer.js"
import { scalar } from "../src/ast/graph/tensor.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { loadVta, planVta, runOnC, vtaArtifactFiles } from "../src/cli/vta.js"
import { partitionForVta, VtaPartitionError } from "../src/rewrite/vta-partition.js"
import { vtaNet, vtaNetInput, type VtaNetSpec } from "../laws/vta/net-cases.js"
import { BIN } from "./support/dist.js"

const spec: VtaNetSpec = { c: 20, h: 6, w: 6, blocks: 2, out: 24, seed: 7 }
const shapes = new Map([["input", [1, spec.c, spec.h, spec.w]]])
const feeds = new Map([["input", vtaNetInput(spec)]])
const OFFLOADED = ["b0.conv1_conv", "b0.conv2_conv", "b0.add_add", "b1.conv1_conv", "b1.conv2_conv", "b1.add_add", "head_conv"]

describe("vta target, end to end", () => {
  it("a 2-block quantized net on vta gives exactly the c target's outputs; every offloaded layer is listed", async () => {
    const plan = planVta(vtaNet(spec), shapes)
    expect(plan.partition.offloaded.map((l) => l.name)).toEqual(OFFLOADED)
    expect(plan.partition.segments.map((s) => s.device)).toEqual(["c", "vta", "c"])
    const model = await Effect.runPromise(loadVta(plan))
    const got = model.run(feeds)
    const want = await Effect.runPromise(runOnC(plan, feeds))
    const g = Array.from(got.outputs.get("output")!.data as Float32Array)
    const w = Array.from(want.get("output")!.data as Float32Array)
    expect(g).toEqual(w)
    // not a degenerate answer: the head's int8 outputs take many values
    expect(new Set(w).size).toBeGreaterThan(20)
    expect(got.layers.map((l) => l.name)).toEqual(OFFLOADED)
    // the copies: the quantized input packed onto VTA (2 channel blocks × 6 × 6 rows of 16), the head's output unpacked
    expect(got.copies).toEqual([
      { value: "x0", direction: "c→vta", bytes: 2 * 6 * 6 * 16 },
      { value: "y", direction: "vta→c", bytes: 2 * 3 * 3 * 16 },
    ])
    for (const l of got.layers) expect(l.stats.totalCycles).toBeGreaterThan(0)
  }, 120_000)

  it("compiles to the same bytes twice (streams, micro-ops, packed weights, c segments, manifest)", async () => {
    const a = await Effect.runPromise(vtaArtifactFiles("net.onnx", planVta(vtaNet(spec), shapes)))
    const b = await Effect.runPromise(vtaArtifactFiles("net.onnx", planVta(vtaNet(spec), shapes)))
    expect([...a.keys()]).toEqual([...b.keys()])
    for (const [k, v] of a) expect(Buffer.from(b.get(k)!).equals(Buffer.from(v))).toBe(true)
    expect([...a.keys()].filter((k) => k.endsWith(".wgt.bin"))).toHaveLength(5)
    const manifest = JSON.parse(new TextDecoder().decode(a.get("manifest.json")!))
    expect(manifest.offloaded.map((l: { name: string }) => l.name)).toEqual(OFFLOADED)
  }, 120_000)

  it("a node forced onto VTA that it cannot run is a VtaPartitionError naming the node and what is missing", () => {
    const net = vtaNet(spec)
    // a requantize multiplier that is no power of two: VTA's shift cannot express it
    const bad = { ...net, initializers: new Map([...net.initializers, ["head_shift", scalar("float64", 0.3)]]) }
    const bound = bindSync(bad, shapes)
    expect(partitionForVta(bound).offloaded.map((l) => l.name)).toEqual(OFFLOADED.slice(0, -1))
    expect(partitionForVta(bound).kept).toEqual([{ node: "head_conv", op: "ConvInteger", reason: expect.stringContaining("is not 2^-k") }])
    let caught: unknown
    try {
      partitionForVta(bound, { force: new Set(["head_conv"]) })
    } catch (e) {
      caught = e
    }
    expect(caught).toBeInstanceOf(VtaPartitionError)
    expect(caught).toMatchObject({ node: "head_conv", op: "ConvInteger" })
    expect((caught as Error).message).toMatch(/head_conv.*0\.3 is not 2\^-k/)
    expect(() => partitionForVta(bound, { force: new Set(["quantize"]) })).toThrow(/'quantize' \(QuantizeLinear\)/)
  })
})

describe("tessera … --target vta", () => {
  let tmp = ""
  let model = ""
  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-vta-"))
    model = path.join(tmp, "net.onnx")
    fs.writeFileSync(model, encodeOnnx(vtaNet(spec)))
  })
  afterAll(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
  })
  const tessera = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { cwd: tmp, encoding: "utf8", timeout: 120_000 })

  it("run prints the offloaded layers, the copies and the VTA / CPU split", () => {
    const r = tessera("run", model, "--target", "vta")
    expect(r.stderr).toBe("")
    expect(r.status).toBe(0)
    const s = JSON.parse(r.stdout.trim())
    expect(s.target).toBe("vta")
    expect(s.offloaded.map((l: { name: string }) => l.name)).toEqual(OFFLOADED)
    expect(s.copies.map((c: { direction: string }) => c.direction)).toEqual(["c→vta", "vta→c"])
    expect(s.vta.clockMhz).toBe(100)
    expect(s.vta.share + s.cpu.share).toBeCloseTo(1, 3)
  }, 120_000)

  it("compile writes a deterministic folder; inspect prints per layer with and without virtual threads", () => {
    for (const out of ["a", "b"]) {
      const r = tessera("compile", model, "--target", "vta", "--out", out)
      expect(r.stderr).toBe("")
      expect(r.status).toBe(0)
    }
    const list = (dir: string): string[] => fs.readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((f) => fs.statSync(path.join(dir, f)).isFile()).sort()
    const files = list(path.join(tmp, "a"))
    expect(files).toEqual(list(path.join(tmp, "b")))
    expect(files).toContain("manifest.json")
    expect(files.some((f) => f.endsWith(".insn.bin"))).toBe(true)
    for (const f of files) expect(fs.readFileSync(path.join(tmp, "a", f)).equals(fs.readFileSync(path.join(tmp, "b", f)))).toBe(true)
    const i = tessera("inspect", model, "--target", "vta")
    expect(i.stderr).toBe("")
    expect(i.status).toBe(0)
    for (const name of OFFLOADED) expect(i.stdout).toContain(name)
    expect(i.stdout).toMatch(/cycles 1vt/)
    expect(i.stdout).toMatch(/c→vta {2}x0 {2}1152 bytes/)
    expect(i.stdout).toMatch(/whole network: VTA \d+ cycles = [\d.]+ ms at 100 MHz/)
  }, 120_000)

  it("tune --target vta writes a log that compile / run / inspect --tuned apply: same bytes, fewer cycles", () => {
    const t = tessera("tune", model, "--target", "vta", "--trials", "12", "--log", "vta.jsonl")
    expect(t.status).toBe(0)
    // the c tuner's progress lines (stderr is no terminal here), then the table on stdout
    expect(t.stderr).toMatch(/^tessera tune: 3 tasks \(5 conv layers offloaded\) from .*net\.onnx; vta, the simulator's cycles at 100 MHz; xgb, 12 trials each; log vta\.jsonl\n/)
    expect(t.stderr).toMatch(/tessera tune: \[3\/3\] [0-9a-f]{8} 20x6x6 k1 s2 -> 24 \+bias \(1 layer\): 12 trials, best \d+ cycles \([\d.]+% utilization\), default \d+ cycles/)
    expect(t.stdout).toMatch(/default cycles +best cycles +best util +vs default/)
    const plain = tessera("run", model, "--target", "vta", "--out", "plain")
    const tuned = tessera("run", model, "--target", "vta", "--tuned", "vta.jsonl", "--out", "tuned")
    expect(tuned.status).toBe(0)
    expect(tuned.stderr).toMatch(/tuning log vta\.jsonl: \d+ records; target vta\n {2}applied: 5 of 5 conv layers/)
    expect(fs.readFileSync(path.join(tmp, "tuned", "output.npy")).equals(fs.readFileSync(path.join(tmp, "plain", "output.npy")))).toBe(true)
    const a = JSON.parse(plain.stdout.trim())
    const b = JSON.parse(tuned.stdout.trim())
    expect(b.vta.cycles).toBeLessThan(a.vta.cycles)
    expect(b.offloaded.filter((l: { tuned?: boolean }) => l.tuned).length).toBe(5)
    const i = tessera("inspect", model, "--target", "vta", "--tuned", "vta.jsonl")
    expect(i.status).toBe(0)
    expect(i.stdout).toMatch(/tuned vs default \(5 of 5 conv layers tuned\)/)
    expect(i.stdout).toMatch(/head_conv +\d+ +[\d.]+% +\d+ +[\d.]+% +[\d.]+x {2}tiles/)
    const c = tessera("compile", model, "--target", "vta", "--tuned", "vta.jsonl", "--out", "tuned-art")
    expect(c.status).toBe(0)
    expect(JSON.parse(c.stdout.trim()).tuned).toHaveLength(5)
    const refused = tessera("tune", model, "--target", "vta", "--threads", "2", "--log", "x.jsonl")
    expect(refused.status).toBe(2)
    expect(refused.stderr).toMatch(/--threads: VTA's trials are simulated cycle counts/)
  }, 120_000)

  it("run --target vta honours --opt-level, --report and --dump-ir as run --target c does; a bad opt level is a usage error", () => {
    const r = tessera("run", model, "--target", "vta", "--opt-level", "0", "--report", "--dump-ir", "ir", "--out", "o0")
    expect(r.status).toBe(0)
    const s = JSON.parse(r.stdout.trim())
    expect(s.optLevel).toBe(0)
    expect(s.passes.map((p: { pass: string }) => p.pass).slice(0, 4)).toEqual(["rewrite.QdqToInteger", "rewrite.VtaRequantize", "rewrite.VtaPartition", "lowering.VtaLayers"])
    expect(s.passes.some((p: { pass: string }) => p.pass === "c segment 0")).toBe(true)
    // opt level 0 runs fewer graph passes on the c segments than 3 does
    const o3 = JSON.parse(tessera("run", model, "--target", "vta", "--report", "--out", "o3").stdout.trim())
    const inner = (x: { passes: { depth: number }[] }) => x.passes.filter((p) => p.depth > 0).length
    expect(inner(s)).toBeLessThan(inner(o3))
    expect(fs.readFileSync(path.join(tmp, "o0", "output.npy")).equals(fs.readFileSync(path.join(tmp, "o3", "output.npy")))).toBe(true)
    expect(r.stderr).toMatch(/^pass +ms +nodes\nrewrite\.QdqToInteger/)
    const files = fs.readdirSync(path.join(tmp, "ir"), { recursive: true, encoding: "utf8" }).sort()
    expect(files).toEqual(expect.arrayContaining(["00-input.txt", "01-rewrite.QdqToInteger.txt", "02-rewrite.VtaRequantize.txt", "03-rewrite.VtaPartition.txt", "04-lowering.VtaLayers.txt", "c-segment-00", "c-segment-02"]))
    expect(s.irFiles).toBe(files.filter((f) => f.endsWith(".txt")).length)
    expect(fs.readFileSync(path.join(tmp, "ir", "04-lowering.VtaLayers.txt"), "utf8")).toMatch(/# head_conv: tiles .*\n0000 {2}LOAD/)
    const bad = tessera("run", model, "--target", "vta", "--opt-level", "7")
    expect(bad.status).toBe(2)
    expect(bad.stderr).toMatch(/--opt-level: 7 is not an opt level/)
    // what --target vta cannot honour is refused, never ignored
    const fused = tessera("inspect", model, "--target", "vta", "--fused")
    expect(fused.status).toBe(2)
    expect(fused.stderr).toMatch(/--fused: --target vta shows the partition/)
    const threads = tessera("compile", model, "--target", "vta", "--out", "t2", "--threads", "2")
    expect(threads.status).toBe(2)
    expect(threads.stderr).toMatch(/--threads: --target vta compiles its c segments for one thread/)
  }, 120_000)

  it("run and tune --target vta stop at their --deadline: one line, exit 124", () => {
    for (const args of [["run", model, "--target", "vta"], ["tune", model, "--target", "vta", "--log", "deadline.jsonl"]]) {
      const r = tessera(...args, "--deadline", "20ms")
      expect(r.status).toBe(124)
      expect(r.stderr.trim().split("\n")).toHaveLength(1)
      expect(r.stderr).toMatch(/interrupted \(the --deadline of 20ms passed\)/)
      expect(r.stdout).toBe("")
    }
  }, 120_000)
})
