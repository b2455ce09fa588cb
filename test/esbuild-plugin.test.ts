// The esbuild plugin: `import model from "./mlp.onnx"` compiles at build time; the example app built
// with it runs in Node and gives the interpreter's top-1; the same model and options build the same
// bytes; a model Tessera cannot take is an esbuild error naming the file, the node and the op.
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

  it("writes the model's typings", () => {
    const dts = readFileSync(path.join(EXAMPLE_DIR, "mlp.d.onnx.ts"), "utf8")
    expect(dts).toContain("export declare const run")
    expect(dts).toMatch(/readonly shape: readonly \[1, 784\]/)
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
