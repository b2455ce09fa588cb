// The esbuild plugin: `import model from "./mlp.onnx"` compiles at build time; the example app built
// with it runs in Node and gives the interpreter's top-1; the same model and options build the same
// bytes; a model Tessera cannot take is an esbuild error naming the file, the node and the op; a
// tuning log's record for one of the model's workloads changes the emitted module (and it still
// computes the same), and a bad log is an esbuild diagnostic, not an exception.
import { spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, writeFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { build } from "esbuild"
import { Effect } from "effect"
import { evaluate } from "../src/ast/graph/evaluate.js"
import { makeGraph } from "../src/ast/graph/graph.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { encodeOnnx } from "../src/ast/onnx/encode.js"
import { tessera } from "../src/esbuild/plugin.js"
import { cpuAttrs, type Target } from "../src/ast/target.js"
import { backendOf } from "../src/backend/index.js"
import { compileGraph, emitArtifact } from "../src/pipeline.js"
import { tasksOfProgram } from "../src/search/extract.js"
import { serializeRecord, type TuningRecord } from "../src/search/records.js"
import { configAt, fnv1a } from "../src/search/task.js"
import { compileModel } from "../src/web/compile-model.js"
import { zooModel } from "../src/zoo/index.js"
import { buildExample, EXAMPLE_DIR, writeExampleModel } from "../examples/classify/build.js"
import { seededInput } from "../examples/classify/input.js"

const dirs: string[] = []
const tmp = () => {
  const d = mkdtempSync(path.join(tmpdir(), "tessera-esbuild-"))
  dirs.push(d)
  return d
}
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })))

const files = (dir: string) => new Map(readdirSync(dir).sort().map((f) => [f, readFileSync(path.join(dir, f))] as const))

/** The interpreter's scores for the example's input. */
const reference = () => {
  const g = decodeModelSync(readFileSync(path.join(EXAMPLE_DIR, "mlp.onnx")))
  const input = g.inputs[0]
  const shape = input.type.shape as number[]
  const x = seededInput(shape.reduce((a, b) => a * b, 1))
  const out = Effect.runSync(evaluate(g, new Map([[input.name, { dtype: "float32", shape, data: x }]])))
  return Array.from(out.get(g.outputs[0].name)!.data as Float32Array)
}

/** The example's typings as committed (before any build here rewrites them): `npm run typecheck` checks the app against them. */
const COMMITTED_TYPINGS = readFileSync(path.join(EXAMPLE_DIR, "mlp.d.onnx.ts"), "utf8")

describe("the esbuild plugin", () => {
  writeExampleModel(zooModel("mlp"))

  for (const target of ["wasm", "js"] as const)
    it(`builds the example for Node (${target}): it runs and gives the interpreter's top-1`, async () => {
      const out = tmp()
      const r = await buildExample(tessera({ target }), "node", out)
      expect(r.errors).toEqual([])
      expect([...files(out).keys()].some((f) => f.endsWith(target === "wasm" ? ".wasm" : ".js") && f.startsWith("mlp-"))).toBe(true)
      const run = spawnSync(process.execPath, [path.join(out, "node.js")], { encoding: "utf8", timeout: 60_000 })
      expect(run.stderr).toBe("")
      const got = JSON.parse(run.stdout) as { top1: number; scores: number[] }
      const want = reference()
      expect(got.top1).toBe(want.indexOf(Math.max(...want)))
      got.scores.forEach((s, k) => expect(Math.abs(s - want[k])).toBeLessThan(1e-4))
    }, 120_000)

  it("gives the same bytes for the same model and options", async () => {
    const [a, b] = [tmp(), tmp()]
    await buildExample(tessera({ target: "wasm", optLevel: 3 }), "browser", a)
    await buildExample(tessera({ target: "wasm", optLevel: 3 }), "browser", b)
    const fa = files(a)
    const fb = files(b)
    expect([...fa.keys()]).toEqual([...fb.keys()])
    for (const [name, bytes] of fa) expect(Buffer.compare(bytes, fb.get(name)!), name).toBe(0)
    // and other options, other bytes (the comparison can fail)
    const c = tmp()
    await buildExample(tessera({ target: "wasm", optLevel: 0 }), "browser", c)
    expect([...files(c).keys()]).not.toEqual([...fa.keys()])
  }, 120_000)

  describe("tuningLog", () => {
    /** The example's module (the .wasm asset's bytes) and its Node run, built with these options. */
    const built = async (o: Parameters<typeof tessera>[0]) => {
      const out = tmp()
      const r = await buildExample(tessera({ target: "wasm", ...o }), "node", out)
      const wasm = [...files(out)].find(([f]) => f.endsWith(".wasm"))![1]
      return { r, wasm, out }
    }
    const ran = (out: string) => {
      const run = spawnSync(process.execPath, [path.join(out, "node.js")], { encoding: "utf8", timeout: 60_000 })
      expect(run.stderr).toBe("")
      return JSON.parse(run.stdout) as { top1: number; scores: number[] }
    }
    /** A record for the model's first task (as the plugin compiles it): a point of its space, not its default. */
    const record = (config?: Record<string, string | number | boolean>): TuningRecord => {
      const target = backendOf("wasm").target(cpuAttrs(), 1) as Target
      const bytes = new Uint8Array(readFileSync(path.join(EXAMPLE_DIR, "mlp.onnx")))
      const { program } = Effect.runSync(compileModel({ compileGraph, emitArtifact }, bytes, target, { optLevel: 3 }))
      const { task } = tasksOfProgram(program, target)[0]
      return { v: 1, task: fnv1a(task.workload), workload: task.workload, target: "wasm", config: config ?? configAt(task.knobs, 0), costs: [1e-4], timestamp: "2026-11-26T00:00:00.000Z" }
    }
    const logOf = (...lines: string[]) => {
      const file = path.join(tmp(), "tune.jsonl")
      writeFileSync(file, lines.join("\n") + "\n")
      return file
    }

    it("a record for one of the model's workloads changes the emitted module, which still computes the interpreter's scores", async () => {
      const plain = await built({})
      const rec = record()
      const tuned = await built({ tuningLog: logOf(serializeRecord(rec)) })
      expect(tuned.r.errors).toEqual([])
      expect(tuned.r.warnings).toEqual([])
      expect(Buffer.compare(tuned.wasm, plain.wasm)).not.toBe(0)
      const got = ran(tuned.out)
      const want = reference()
      expect(got.top1).toBe(want.indexOf(Math.max(...want)))
      got.scores.forEach((s, k) => expect(Math.abs(s - want[k])).toBeLessThan(1e-4))
      // the record is what changed it: the same log with the record for another target is the plain build
      const other = await built({ tuningLog: logOf(serializeRecord({ ...rec, target: "c" })) })
      expect(Buffer.compare(other.wasm, plain.wasm)).toBe(0)
    }, 180_000)

    it("a log that cannot be read is an esbuild error on the log, not an exception", async () => {
      const missing = path.join(tmp(), "no-such-log.jsonl")
      const r = await buildExample(tessera({ target: "wasm", tuningLog: missing }), "node", tmp()).then(
        () => undefined,
        (e: { errors: { text: string; location: { file: string } | null }[] }) => e.errors,
      )
      expect(r).toBeDefined()
      expect(r).toHaveLength(1)
      expect(r![0].text).toMatch(/tuning log no-such-log\.jsonl: cannot be read/)
      expect(path.resolve(r![0].location!.file)).toBe(missing)
    }, 60_000)

    it("a log's lines that are not records, and records outside their template's knobs, are warnings on the log; the module is the untuned one", async () => {
      const plain = await built({})
      const outside = serializeRecord(record({ tile_inner: 3 }))
      const log = logOf("not json {", JSON.stringify({ v: 1, task: "x" }), JSON.stringify({ v: 99 }), outside)
      const b = await built({ tuningLog: log })
      expect(b.r.errors).toEqual([])
      // (esbuild orders its messages by location)
      const on = (re: RegExp) => b.r.warnings.filter((w) => re.test(w.text))
      expect(b.r.warnings).toHaveLength(4)
      expect(on(/line 1: not JSON/)).toHaveLength(1)
      expect(on(/line 2: not a tuning record/).map((w) => w.location?.line)).toEqual([2])
      expect(on(/line 3: record version 99 is not 1/)).toHaveLength(1)
      expect(on(/group \d+: 1 record \(\w+\) outside the template's knobs \(.*\), not applied/)).toHaveLength(1)
      expect(b.r.warnings.every((w) => path.resolve(w.location!.file) === log)).toBe(true)
      expect(Buffer.compare(b.wasm, plain.wasm)).toBe(0)
    }, 120_000)
  })

  it("writes the model's typings", () => {
    const dts = readFileSync(path.join(EXAMPLE_DIR, "mlp.d.onnx.ts"), "utf8")
    expect(dts).toContain("export declare const run")
    expect(dts).toMatch(/readonly shape: readonly \[1, 784\]/)
    // (a change to the plugin's typings is a change to the committed file: the example typechecks against it)
    expect(COMMITTED_TYPINGS, "examples/classify/mlp.d.onnx.ts is not what the plugin writes: commit the new one").toBe(dts)
  })

  it("reports a model it cannot compile as an esbuild error naming the file, the node and the op", async () => {
    const dir = tmp()
    const g = decodeModelSync(zooModel("mlp"))
    const bad = makeGraph({ ...g, nodes: g.nodes.map((n, k) => (k === 1 ? { ...n, name: "the_bad_node", op: "NoSuchOp" } : n)) })
    writeFileSync(path.join(dir, "bad.onnx"), encodeOnnx(bad))
    writeFileSync(path.join(dir, "main.js"), 'import m from "./bad.onnx"\nconsole.log(m)\n')
    const r = await build({ entryPoints: [path.join(dir, "main.js")], bundle: true, write: false, logLevel: "silent", plugins: [tessera({ typings: false })] }).then(
      () => undefined,
      (e: { errors: { text: string; location: { file: string } | null }[] }) => e.errors,
    )
    expect(r).toBeDefined()
    expect(r![0].text).toContain("the_bad_node")
    expect(r![0].text).toContain("NoSuchOp")
    expect(r![0].location?.file).toContain("bad.onnx")
  }, 60_000)
})
