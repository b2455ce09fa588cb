// Bad input, twice: the library throws (or fails with) a typed error whose `_tag` says what kind,
// and the CLI prints one clear line on stderr, exits non-zero, and writes no output file.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { evaluate } from "../src/ast/graph/evaluate.js"
import { fromArray, type Tensor } from "../src/ast/graph/tensor.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { readModelSync } from "../src/device/files.js"
import { serializeNpy } from "../src/device/npy.js"
import { initializer, intsAttr, modelBytes, rawInitializer, transposeModel, valueInfo } from "./cli-models.js"
import { CLI } from "./support/dist.js"
import { runFailure } from "./support/effect.js"

let tmp = ""

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tessera-bad-input-"))
})
afterAll(() => {
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
})

const write = (name: string, bytes: Uint8Array | string): string => {
  const f = path.join(tmp, name)
  fs.writeFileSync(f, bytes)
  return f
}

/** The typed error `f` throws. */
const thrown = (f: () => unknown): Error & { _tag: string } => {
  try {
    f()
  } catch (e) {
    expect(e).toBeInstanceOf(Error)
    expect(typeof (e as { _tag?: unknown })._tag).toBe("string")
    return e as Error & { _tag: string }
  }
  throw new Error("expected a typed error, got a result")
}

let outCount = 0
/**
 * Runs the CLI expecting a clean failure: exit code `code`, exactly one stderr line (no stack),
 * nothing on stdout, and no file in the --out folder. Returns the stderr line.
 */
const cliFails = (args: readonly string[], code = 1): string => {
  const out = path.join(tmp, `out${outCount++}`)
  const withOut = args[0] === "run" ? [...args, "--out", out] : args
  const r = spawnSync(process.execPath, [CLI, ...withOut], { cwd: tmp, encoding: "utf8", timeout: 60_000 })
  const lines = r.stderr.split("\n").filter((l) => l.trim() !== "")
  expect(lines, r.stderr).toHaveLength(1)
  expect(r.stderr).not.toMatch(/^\s+at /m)
  expect(r.stdout).toBe("")
  expect(r.status, r.stderr).toBe(code)
  expect(fs.existsSync(out) ? fs.readdirSync(out) : []).toEqual([])
  return lines[0]
}

const good = transposeModel()

describe("bad model bytes", () => {
  const cases: { name: string; bytes: () => Uint8Array; tag: string; says: RegExp }[] = [
    { name: "truncated", bytes: () => good.subarray(0, Math.floor(good.length / 2)), tag: "DecodeError", says: /cannot decode model/ },
    {
      name: "corrupted",
      bytes: () => {
        const b = good.slice()
        b.fill(0xff, 8, 24)
        return b
      },
      tag: "DecodeError",
      says: /not a valid ONNX protobuf/,
    },
    { name: "not ONNX (text)", bytes: () => new TextEncoder().encode("name,age\nada,36\n"), tag: "DecodeError", says: /cannot decode model/ },
    { name: "not ONNX (PNG header)", bytes: () => new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]), tag: "DecodeError", says: /cannot decode model/ },
    { name: "empty", bytes: () => new Uint8Array(0), tag: "DecodeError", says: /empty/ },
    {
      name: "negative input dim",
      bytes: () => modelBytes({ inputs: [valueInfo("x", "float32", [-1, 3])], outputs: [valueInfo("y", "float32", [3, 2])], nodes: [{ op: "Transpose", inputs: ["x"], outputs: ["y"] }] }),
      tag: "DecodeError",
      says: /dim 0 is negative/,
    },
    {
      name: "negative initializer dim",
      bytes: () =>
        modelBytes({
          inputs: [valueInfo("x", "float32", [2])],
          outputs: [valueInfo("y", "float32", [4])],
          initializers: [rawInitializer("w", [-2n])],
          nodes: [{ op: "Concat", inputs: ["x", "w"], outputs: ["y"], attrs: [intsAttr("unused", [])] }],
        }),
      tag: "DecodeError",
      says: /initializer 'w'.*dim 0 is negative/,
    },
    {
      name: "overflowing initializer dims",
      bytes: () =>
        modelBytes({
          inputs: [valueInfo("x", "float32", [2])],
          outputs: [valueInfo("y", "float32", [4])],
          initializers: [rawInitializer("w", [2n ** 20n, 2n ** 20n])],
          nodes: [{ op: "Concat", inputs: ["x", "w"], outputs: ["y"] }],
        }),
      tag: "DecodeError",
      says: /initializer 'w'.*more than 2147483647 elements/,
    },
    {
      name: "huge initializer dim",
      bytes: () =>
        modelBytes({
          inputs: [valueInfo("x", "float32", [2])],
          outputs: [valueInfo("y", "float32", [4])],
          initializers: [rawInitializer("w", [2n ** 62n])],
          nodes: [{ op: "Concat", inputs: ["x", "w"], outputs: ["y"] }],
        }),
      tag: "DecodeError",
      says: /dim 0 is too large/,
    },
    {
      name: "unknown op",
      bytes: () => modelBytes({ inputs: [valueInfo("x", "float32", [2])], outputs: [valueInfo("y", "float32", [2])], nodes: [{ op: "FrobnicateV2", inputs: ["x"], outputs: ["y"] }] }),
      tag: "UnsupportedOpError",
      says: /'FrobnicateV2'/,
    },
    {
      name: "unknown domain",
      bytes: () =>
        modelBytes({
          inputs: [valueInfo("x", "float32", [2])],
          outputs: [valueInfo("y", "float32", [2])],
          nodes: [{ op: "Transpose", domain: "com.example", inputs: ["x"], outputs: ["y"] }],
          extraOpsets: [{ domain: "com.example", version: 1 }],
        }),
      tag: "UnsupportedOpError",
      says: /domain 'com.example'/,
    },
    { name: "opset newer than 28", bytes: () => transposeModel(29), tag: "UnsupportedModelError", says: /opset 29 is newer than the newest supported \(28\)/ },
    {
      name: "external data leaving the model's folder",
      bytes: () =>
        modelBytes({
          inputs: [valueInfo("x", "float32", [2])],
          outputs: [valueInfo("y", "float32", [4])],
          initializers: [{ ...rawInitializer("w", [2n]), dataLocation: 1, externalData: [{ $typeName: "onnx.StringStringEntryProto", key: "location", value: "../../etc/passwd" }] }],
          nodes: [{ op: "Concat", inputs: ["x", "w"], outputs: ["y"] }],
        }),
      tag: "DecodeError",
      says: /leaves the model's folder/,
    },
  ]
  for (const c of cases) {
    it(`${c.name}: library`, () => {
      const e = thrown(() => decodeModelSync(c.bytes()))
      expect(e._tag).toBe(c.tag)
      expect(e.message).toMatch(c.says)
    })
    it(`${c.name}: CLI run and inspect`, () => {
      const file = write(`${c.name.replace(/\W+/g, "_")}.onnx`, c.bytes())
      const line = cliFails(["run", file])
      expect(line).toMatch(/^tessera run: /)
      expect(line).toContain(file)
      expect(line).toMatch(c.says)
      if (c.tag === "UnsupportedOpError" || c.tag === "UnsupportedModelError") {
        // inspect still describes the model, and says what stands in the way
        const r = spawnSync(process.execPath, [CLI, "inspect", file, "--format", "json"], { cwd: tmp, encoding: "utf8" })
        expect(r.status, r.stderr).toBe(0)
        const j = JSON.parse(r.stdout.trim().split("\n").at(-1)!)
        expect(j.error).toMatch(c.says)
        expect(j.inputs.map((i: { name: string }) => i.name)).toEqual(["x"])
        if (c.tag === "UnsupportedOpError") expect(Object.keys(j.unsupported)).toHaveLength(1)
      } else expect(cliFails(["inspect", file])).toMatch(c.says)
    })
  }

  it("a missing file: library", () => {
    const e = thrown(() => readModelSync(path.join(tmp, "nowhere.onnx")))
    expect(e._tag).toBe("FileAccessError")
    expect(e.message).toMatch(/no such file/)
  })
  it("a missing file: CLI", () => expect(cliFails(["run", "nowhere.onnx"])).toBe("tessera run: cannot read 'nowhere.onnx': no such file or folder. Check the path and its permissions"))
  it("a folder instead of a file: CLI", () => expect(cliFails(["inspect", tmp])).toMatch(/it is a folder, not a file/))
  it("external data that is missing: CLI", () => {
    const dir = fs.mkdtempSync(path.join(tmp, "ext-"))
    const bytes = modelBytes({
      inputs: [valueInfo("x", "float32", [2])],
      outputs: [valueInfo("y", "float32", [4])],
      initializers: [{ ...rawInitializer("w", [2n]), dataLocation: 1, externalData: [{ $typeName: "onnx.StringStringEntryProto", key: "location", value: "weights.bin" }] }],
      nodes: [{ op: "Concat", inputs: ["x", "w"], outputs: ["y"], attrs: [] }],
    })
    fs.writeFileSync(path.join(dir, "m.onnx"), bytes)
    expect(cliFails(["run", path.join(dir, "m.onnx")])).toMatch(/cannot read '.*weights\.bin': no such file/)
    fs.writeFileSync(path.join(dir, "weights.bin"), new Uint8Array(4)) // 4 bytes, 8 needed
    expect(cliFails(["run", path.join(dir, "m.onnx")])).toMatch(/needs 8 bytes at offset 0, the file has 4 bytes/)
  })
})

describe("bad inputs", () => {
  const graph = () => decodeModelSync(transposeModel()) // x: float32[N, 3]
  const feeds = (t: Tensor) => new Map([["x", t]])

  it("wrong dtype: library", async () => {
    const e = await runFailure(evaluate(graph(), feeds(fromArray("int64", [2, 3], [1, 2, 3, 4, 5, 6]))))
    expect(e._tag).toBe("InputError")
    expect(e.message).toMatch(/dtype int64, the model expects float32/)
  })
  it("wrong shape: library", async () => {
    const e = await runFailure(evaluate(graph(), feeds(fromArray("float32", [2, 4], new Array(8).fill(0)))))
    expect(e._tag).toBe("InputError")
    expect(e.message).toMatch(/dim 1 is 4, the model expects 3/)
  })
  it("missing input: library", async () => {
    const e = await runFailure(evaluate(graph(), new Map()))
    expect(e._tag).toBe("InputError")
    expect(e.message).toMatch(/input 'x': missing/)
  })

  const model = () => write("transpose.onnx", transposeModel())
  const npy = (name: string, t: Tensor) => write(name, serializeNpy(t))

  it("wrong dtype: CLI", () =>
    expect(cliFails(["run", model(), "--input", `x=${npy("i64.npy", fromArray("int64", [2, 3], [1, 2, 3, 4, 5, 6]))}`])).toBe(
      `tessera run: input 'x': the file holds int64, the model expects float32. 'tessera inspect ${path.join(tmp, "transpose.onnx")}' shows the inputs the model expects`,
    ))
  it("wrong rank: CLI", () =>
    expect(cliFails(["run", model(), "--input", `x=${npy("r3.npy", fromArray("float32", [1, 2, 3], new Array(6).fill(0)))}`])).toMatch(
      /input 'x': the file's shape \[1, 2, 3\] has rank 3, the model expects rank 2 \[N, 3\]/,
    ))
  it("wrong static dim: CLI", () =>
    expect(cliFails(["run", model(), "--shape", "x=2x4"])).toMatch(/input 'x': --shape \[2, 4\] has dim 1 = 4, the model fixes it at 3/))
  it("missing input (an unbound symbolic dim): CLI names the input and the dim", () =>
    expect(cliFails(["run", model()])).toBe(
      "tessera run: input 'x': dim 0 ('N') is symbolic and unbound: give the input's data with --input x=FILE.npy, or its shape with --shape x=Nx3",
    ))
  it("an input the model does not have: CLI", () =>
    expect(cliFails(["run", model(), "--shape", "y=2x3"])).toMatch(/input 'y': the model has no such input \(its inputs: x\)/))
  it("an input given twice: CLI", () => expect(cliFails(["run", model(), "--shape", "x=2x3", "--shape", "x=4x3"], 2)).toMatch(/--shape: input 'x' is given twice/))
  it("a .npy that is not one: CLI", () =>
    expect(cliFails(["run", model(), "--input", `x=${write("bad.npy", "not numpy")}`])).toMatch(/cannot read \.npy '.*bad\.npy': not a \.npy file.*Save the array with numpy\.save/))
  it("a Fortran-order .npy: CLI", () => {
    const f = npy("f.npy", fromArray("float32", [2, 3], new Array(6).fill(0)))
    const b = fs.readFileSync(f).toString("latin1").replace("'fortran_order': False", "'fortran_order': True ")
    fs.writeFileSync(f, Buffer.from(b, "latin1"))
    expect(cliFails(["run", model(), "--input", `x=${f}`])).toMatch(/Fortran order/)
  })
  it("a missing .npy: CLI", () => expect(cliFails(["run", model(), "--input", "x=gone.npy"])).toMatch(/cannot read 'gone\.npy': no such file/))
  it("a bad --shape: CLI exits 2", () => expect(cliFails(["run", model(), "--shape", "x=2by3"], 2)).toMatch(/--shape: '2by3' is not a shape like 1x3x224x224/))
  it("a spec without '=': CLI exits 2", () => expect(cliFails(["run", model(), "--input", "x.npy"], 2)).toMatch(/--input: 'x\.npy' is not NAME=VALUE/))
  it("a target that is not one: CLI exits 2", () => expect(cliFails(["run", model(), "--target", "tpu"], 2)).toMatch(/--target: no target 'tpu' here \(choose one of: interp, js, c, wasm, cuda\)/))
  it("an unknown flag: CLI exits 2", () => expect(cliFails(["run", model(), "--frobnicate"], 2)).toMatch(/^tessera run: Unrecognized flag: --frobnicate.*--help/))
  it("an unknown command: CLI exits 2", () => expect(cliFails(["compile-all"], 2)).toMatch(/Unknown subcommand "compile-all"/))
  it("a missing argument: CLI exits 2", () => expect(cliFails(["run"], 2)).toMatch(/Missing required argument: model/))

  it("a run that fails inside the model writes nothing", () => {
    // x: float32[N] reshaped to [2, 2]: N = 5 cannot be
    const m = write(
      "reshape.onnx",
      modelBytes({
        inputs: [valueInfo("x", "float32", ["N"])],
        outputs: [valueInfo("y", "float32", [2, 2])],
        initializers: [initializer(fromArray("int64", [2], [2, 2]), "s")],
        nodes: [{ op: "Reshape", inputs: ["x", "s"], outputs: ["y"] }],
      }),
    )
    expect(cliFails(["run", m, "--shape", "x=5"])).toMatch(/^tessera run: .*reshape\.onnx: node 'Reshape_0' \(Reshape\): /)
  })
  it("an output folder that cannot be made writes nothing", () => {
    const blocker = write("blocker", "a file where a folder should be")
    const r = spawnSync(process.execPath, [CLI, "run", model(), "--shape", "x=2x3", "--out", path.join(blocker, "out")], { cwd: tmp, encoding: "utf8" })
    expect(r.status).toBe(1)
    expect(r.stderr.trim().split("\n")).toHaveLength(1)
    expect(r.stderr).toMatch(/cannot write '.*blocker\/out': a part of the path is not a folder/)
    expect(r.stdout).toBe("")
  })
})
