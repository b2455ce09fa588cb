// The wasm target: every compute family under random schedules, lowered, emitted as a WebAssembly
// module (own encoder, SIMD128), validated, instantiated and run, equals the TE evaluator (with and
// without the bounds-check debug mode); emission is deterministic; a wrong index traps; scalar
// dtypes and intrinsics agree with the TIR evaluator; goldens of fixed cases match byte for byte.
//
// Goldens (golden/wasm/<case>.wat: the WAT-like text of the module, then its size and FNV-1a hash
// of the bytes). Any change fails; to accept a reviewed change:
//   UPDATE_GOLDENS=1 npx vitest run test/emit-wasm.test.ts
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import * as fc from "fast-check"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { arbScheduledCase, COMPUTE_FAMILIES } from "../src/ast/te/arbitrary.js"
import { evaluateTE } from "../src/ast/te/evaluate.js"
import { allocate, type DType } from "../src/ast/graph/dtype.js"
import { fromArray, sizeOf, type Tensor } from "../src/ast/graph/tensor.js"
import { add, bin, c, call, cast, floordiv, floormod, lt, mapExpr, mul, read, select, v, type BinOp, type Expr, type Intrinsic } from "../src/ast/te/expr.js"
import { mapStmt, type PrimFunc, type Stmt } from "../src/ast/tir/tir.js"
import { evaluatePrimFunc } from "../src/ast/tir/evaluate.js"
import { lowerSync } from "../src/lowering/lower.js"
import { cpuTirPipeline } from "../src/lowering/tir/cpu-pipeline.js"
import { runTirSync } from "../src/lowering/tir/tir-pass.js"
import { emitWasmModule } from "../src/emit/wasm/emit.js"
import { printWasmModule } from "../src/emit/wasm/print.js"
import { uleb, sleb } from "../src/emit/wasm/encoder.js"
import { loadWasmModule, loadWasmModuleSync, validateWasm, type KernelFn } from "../src/device/wasm/load.js"
import { GOLDEN_CASES, goldenFunc, WASM_GOLDEN_CASES } from "../scripts/update-goldens.js"
import { assertAllClose, lawParams } from "../laws/support.js"

/** The emit layer's typed error from the wasm target, its reason matching `reason` (and its kernel, when given). */
const emitError = (reason: RegExp, kernel?: string) => expect.objectContaining({ _tag: "EmitError", target: "wasm", reason: expect.stringMatching(reason), ...(kernel === undefined ? {} : { kernel }) })

/** Runs a loaded kernel on named tensors: params in order, outputs allocated. */
const callKernel = (fn: KernelFn, f: PrimFunc, inputs: ReadonlyMap<string, Tensor>): Map<string, Tensor> => {
  const arrays = f.params.map((p) => {
    const shape = p.view?.shape ?? p.shape
    return inputs.get(p.name)?.data.slice() ?? allocate(p.dtype, sizeOf(shape))
  })
  fn(...arrays)
  return new Map(f.params.map((p, k) => [p.name, { dtype: p.dtype, shape: p.view?.shape ?? p.shape, data: arrays[k] }] as const))
}

const lowerCase = (schedule: Parameters<typeof lowerSync>[0]) => runTirSync(cpuTirPipeline(), lowerSync(schedule))

describe("wasm target", () => {
  for (const family of COMPUTE_FAMILIES)
    it(`emitted wasm equals the TE evaluator for ${family} under random schedules`, async () => {
      const cases = fc.sample(arbScheduledCase([family]), lawParams(20))
      const funcs = cases.map((cc, k) => ({ name: `k${k}`, func: lowerCase(cc.schedule) }))
      for (const boundsCheck of [false, true]) {
        const em = emitWasmModule(funcs, { boundsCheck })
        expect(emitWasmModule(funcs, { boundsCheck }).bytes).toEqual(em.bytes) // deterministic
        expect(validateWasm(em.bytes)).toBe(true)
        const fns = await Effect.runPromise(loadWasmModule(em.bytes, em.kernels))
        cases.forEach((cc, k) => {
          const outs = callKernel(fns.get(`k${k}`)!, funcs[k].func, cc.inputs)
          const want = evaluateTE(cc.outputs, cc.inputs)
          assertAllClose(cc.outputs.map((o) => outs.get(o.name)!), want, 1e-4, 1e-5)
        })
      }
    })

  it("vectorized float32 loops use SIMD128 and agree with the scalar path", () => {
    const f = goldenFunc(GOLDEN_CASES[2]()) // dense: 16 columns vectorized
    const em = emitWasmModule([{ name: "k", func: f }])
    expect(em.module.funcs[0].code.some((i) => i.op === "f32x4.mul")).toBe(true)
    expect(em.module.funcs[0].code.some((i) => i.op === "v128.store")).toBe(true)
  })

  it("counts: random schedules reach the SIMD path", () => {
    let simd = 0
    for (const family of ["elementwise", "matmul", "conv2d_nchwc", "softmax"] as const) {
      const cases = fc.sample(arbScheduledCase([family]), lawParams(20))
      for (const cc of cases) if (emitWasmModule([{ name: "k", func: lowerCase(cc.schedule) }]).module.funcs.some((f) => f.code.some((i) => i.op === "v128.store"))) simd++
    }
    if (process.env.WASM_SIMD_COUNT) console.log(`SIMD kernels: ${simd} of 80`)
    expect(simd).toBeGreaterThan(0)
  })

  for (const dt of ["float32", "int32"] as const)
    for (const [ext, dynMin] of [[4, false], [6, false], [8, true], [6, true], [3, false]] as const)
      it(`a vectorized ${dt} loop of extent ${ext}${dynMin ? " from a non-constant min" : ""} equals the TIR evaluator`, () => {
        const i = v("i")
        const j = v("j")
        const n = 3 * 8
        const min = dynMin ? mul(i, c(8)) : c(1)
        const one = c(1, dt)
        // O[j] = A[j] * B[i] + A[j] - 1 (B[i] invariant in j: splatted); O[j] = O[j] max A[j]
        const body: Stmt = {
          kind: "seq",
          body: [
            { kind: "store", buffer: "O", indices: [j], value: bin("sub", add(mul(read("A", [j], dt), read("B", [i], dt)), read("A", [j], dt)), one) },
            { kind: "store", buffer: "O", indices: [j], value: bin("max", read("O", [j], dt), call("neg", read("A", [j], dt))) },
          ],
        }
        const f: PrimFunc = {
          name: "vec",
          params: [
            { name: "A", dtype: dt, shape: [n], scope: "global" },
            { name: "B", dtype: dt, shape: [3], scope: "global" },
            { name: "O", dtype: dt, shape: [n], scope: "global" },
          ],
          body: { kind: "for", var: i, min: c(0), extent: c(3), forKind: "serial", body: { kind: "for", var: j, min, extent: c(ext), forKind: "vectorized", body } },
        }
        const inputs = new Map([
          ["A", fromArray(dt, [n], Array.from({ length: n }, (_, k) => (dt === "int32" ? (k * 7) % 11 - 5 : Math.sin(k))))],
          ["B", fromArray(dt, [3], [2, -3, 5])],
        ])
        const want = evaluatePrimFunc(f, inputs).get("O")!
        for (const boundsCheck of [false, true]) {
          const em = emitWasmModule([{ name: "k", func: f }], { boundsCheck })
          expect(em.module.funcs[0].code.some((x) => x.op === "v128.store")).toBe(ext >= 4)
          const got = callKernel(loadWasmModuleSync(em.bytes, em.kernels).get("k")!, f, inputs).get("O")!
          assertAllClose([got], [want], 1e-6, 1e-7)
        }
      })

  it("a local accumulator tile lives in v128 locals, its lane loops take the SIMD path, and it equals the TIR evaluator", () => {
    const [i, r, a, m] = [v("i"), v("r"), v("a"), v("m")]
    const f32 = "float32" as const
    const lanes = (body: Stmt, kind: "serial" | "vectorized"): Stmt => ({ kind: "for", var: a, min: c(0), extent: c(2), forKind: "serial", body: { kind: "for", var: m, min: c(0), extent: c(4), forKind: kind, body } })
    const acc = add(mul(a, c(4)), m)
    // O[i, 0:8] = Σ_r A[r, 0:8] · B[i, r], accumulated in acc[8] @local; the copy-out loop is serial
    const f: PrimFunc = {
      name: "tile",
      params: [
        { name: "A", dtype: f32, shape: [24], scope: "global" },
        { name: "B", dtype: f32, shape: [12], scope: "global" },
        { name: "O", dtype: f32, shape: [32], scope: "global" },
      ],
      body: {
        kind: "for", var: i, min: c(0), extent: c(4), forKind: "serial",
        body: {
          kind: "allocate", buffer: { name: "acc", dtype: f32, shape: [8], scope: "local" },
          body: {
            kind: "seq",
            body: [
              lanes({ kind: "store", buffer: "acc", indices: [acc], value: c(0, f32) }, "vectorized"),
              { kind: "for", var: r, min: c(0), extent: c(3), forKind: "serial", body: lanes({ kind: "store", buffer: "acc", indices: [acc], value: add(read("acc", [acc], f32), mul(read("A", [add(mul(r, c(8)), acc)], f32), read("B", [add(mul(i, c(3)), r)], f32))) }, "vectorized") },
              lanes({ kind: "store", buffer: "O", indices: [add(mul(i, c(8)), acc)], value: read("acc", [acc], f32) }, "serial"),
            ],
          },
        },
      },
    }
    const inputs = new Map([
      ["A", fromArray(f32, [24], Array.from({ length: 24 }, (_, k) => Math.sin(k)))],
      ["B", fromArray(f32, [12], Array.from({ length: 12 }, (_, k) => Math.cos(k)))],
    ])
    const want = evaluatePrimFunc(f, inputs).get("O")!
    for (const boundsCheck of [false, true]) {
      const em = emitWasmModule([{ name: "k", func: f }], { boundsCheck })
      expect(em.kernels[0].frameBytes).toBe(0) // no frame bytes for acc
      expect(em.module.funcs[0].locals.filter((t) => t === "v128").length).toBeGreaterThanOrEqual(2)
      const code = em.module.funcs[0].code
      expect(code.some((x) => x.op === "f32x4.replace_lane" || x.op === "f32x4.extract_lane")).toBe(false) // every access is a whole v128
      expect(code.filter((x) => x.op === "v128.store").length).toBe(2) // O, 4 lanes at a time
      const got = callKernel(loadWasmModuleSync(em.bytes, em.kernels).get("k")!, f, inputs).get("O")!
      assertAllClose([got], [want], 1e-6, 1e-7)
    }
  })

  it("a select with a loop-invariant condition stays on the SIMD path, its arms lazy", () => {
    const [i, m] = [v("i"), v("m")]
    const f32 = "float32" as const
    // O[4i + m] = (i ≥ 1 ? A[4i + m - 4] : 0) + 1: the arm would read A[-4..-1] at i = 0
    const f: PrimFunc = {
      name: "pad",
      params: [
        { name: "A", dtype: f32, shape: [8], scope: "global" },
        { name: "O", dtype: f32, shape: [12], scope: "global" },
      ],
      body: {
        kind: "for", var: i, min: c(0), extent: c(3), forKind: "serial",
        body: { kind: "for", var: m, min: c(0), extent: c(4), forKind: "vectorized", body: { kind: "store", buffer: "O", indices: [add(mul(i, c(4)), m)], value: add(select(bin("ge", i, c(1)), read("A", [add(add(mul(i, c(4)), m), c(-4))], f32), c(0, f32)), c(1, f32)) } },
      },
    }
    const inputs = new Map([["A", fromArray(f32, [8], Array.from({ length: 8 }, (_, k) => k + 0.5))]])
    const want = evaluatePrimFunc(f, inputs).get("O")!
    for (const boundsCheck of [false, true]) {
      const em = emitWasmModule([{ name: "k", func: f }], { boundsCheck })
      expect(em.module.funcs[0].code.some((x) => x.op === "if" && x.t === "v128")).toBe(true)
      expect(em.module.funcs[0].code.some((x) => x.op === "v128.store")).toBe(true)
      const got = callKernel(loadWasmModuleSync(em.bytes, em.kernels).get("k")!, f, inputs).get("O")!
      assertAllClose([got], [want], 0, 0)
    }
  })

  it("only outputs never read and stored outside any if skip the copy into the frame", () => {
    const i = v("i")
    const f32 = "float32" as const
    const params = [
      { name: "A", dtype: f32, shape: [4], scope: "global" as const },
      { name: "O", dtype: f32, shape: [4], scope: "global" as const },
    ]
    const loop = (body: Stmt): PrimFunc => ({ name: "k", params, body: { kind: "for", var: i, min: c(0), extent: c(4), forKind: "serial", body } })
    const copyIn = (f: PrimFunc) => emitWasmModule([{ name: "k", func: f }]).kernels[0].params.map((p) => p.copyIn)
    const put: Stmt = { kind: "store", buffer: "O", indices: [i], value: read("A", [i], f32) }
    expect(copyIn(loop(put))).toEqual([true, false])
    expect(copyIn(loop({ kind: "if", cond: lt(i, c(2)), then: put }))).toEqual([true, true])
    expect(copyIn(loop({ kind: "store", buffer: "O", indices: [i], value: add(read("O", [i], f32), read("A", [i], f32)) }))).toEqual([true, true])
    // a partly written output keeps the caller's values elsewhere
    const f = loop({ kind: "if", cond: lt(i, c(2)), then: put })
    const em = emitWasmModule([{ name: "k", func: f }])
    const out = Float32Array.of(9, 9, 9, 9)
    loadWasmModuleSync(em.bytes, em.kernels).get("k")!(Float32Array.of(1, 2, 3, 4), out)
    expect([...out]).toEqual([1, 2, 9, 9])
  })

  it("a shared memory works as well as a plain one", async () => {
    const g = GOLDEN_CASES[4]()
    const f = goldenFunc(g)
    const em = emitWasmModule([{ name: "k", func: f }], { sharedMemory: true })
    const fns = await Effect.runPromise(loadWasmModule(em.bytes, em.kernels, { shared: true }))
    const outs = callKernel(fns.get("k")!, f, g.inputs)
    assertAllClose(g.outputs.map((o) => outs.get(o.name)!), evaluateTE(g.outputs, g.inputs), 1e-4, 1e-5)
  })

  it("with bounds checks, a wrong index traps instead of reading another buffer", () => {
    const i = v("i")
    const f: PrimFunc = {
      name: "oob",
      params: [
        { name: "A", dtype: "float32", shape: [4], scope: "global" },
        { name: "B", dtype: "float32", shape: [4], scope: "global" },
      ],
      body: { kind: "for", var: i, min: c(0), extent: c(4), forKind: "serial", body: { kind: "store", buffer: "B", indices: [i], value: read("A", [add(i, c(4))], "float32") } },
    }
    const checked = emitWasmModule([{ name: "k", func: f }], { boundsCheck: true })
    const fn = loadWasmModuleSync(checked.bytes, checked.kernels).get("k")!
    expect(() => fn(new Float32Array(4), new Float32Array(4))).toThrow(/unreachable/)
  })

  it("names from programs never reach the module or its text", () => {
    const f = goldenFunc(GOLDEN_CASES[4]())
    const hostile = "x*/ ; process.exit(1); /*\n(module)"
    const to = new Map(f.params.map((p, k) => [p.name, `${hostile}${k}`] as const))
    const body = mapStmt(
      f.body,
      (x) => (x.kind === "store" && to.has(x.buffer) ? { ...x, buffer: to.get(x.buffer)! } : undefined),
      (e) => mapExpr(e, (x) => (x.kind === "read" && to.has(x.source) ? { ...x, source: to.get(x.source)! } : undefined)),
    )
    const renamed: PrimFunc = { name: hostile, params: f.params.map((p) => ({ ...p, name: to.get(p.name)! })), body }
    const em = emitWasmModule([{ name: "k0", func: renamed }])
    const text = printWasmModule(em.module)
    expect(text).not.toContain("process.exit")
    expect(Buffer.from(em.bytes).toString("latin1")).not.toContain("process.exit")
  })

  it("kernel names must be safe identifiers", () => {
    const f = goldenFunc(GOLDEN_CASES[4]())
    expect(() => emitWasmModule([{ name: "a b", func: f }])).toThrow(emitError(/safe identifier/))
    expect(() => emitWasmModule([{ name: "k", func: f }, { name: "k", func: f }])).toThrow(emitError(/twice/))
  })

  it("LEB128 encodes the edge values", () => {
    expect(uleb(0)).toEqual([0])
    expect(uleb(127)).toEqual([0x7f])
    expect(uleb(128)).toEqual([0x80, 0x01])
    expect(uleb(624485)).toEqual([0xe5, 0x8e, 0x26])
    expect(sleb(-1)).toEqual([0x7f])
    expect(sleb(63)).toEqual([0x3f])
    expect(sleb(64)).toEqual([0xc0, 0x00])
    expect(sleb(-64)).toEqual([0x40])
    expect(sleb(-65)).toEqual([0xbf, 0x7f])
    expect(sleb(-123456)).toEqual([0xc0, 0xbb, 0x78])
    expect(sleb(-0x80000000)).toEqual([0x80, 0x80, 0x80, 0x80, 0x78])
  })
})

// ---------------------------------------------------------------------------------------------
// Scalar dtypes and intrinsics, against the TIR evaluator

/** out[i] = body(A[i], B[i], i) over n elements, A and B of dtype `dt`, out of dtype `od`. */
const mapFunc = (dt: DType, od: DType, n: number, body: (a: Expr, b: Expr, i: Expr) => Expr): PrimFunc => {
  const i = v("i")
  const loop: Stmt = { kind: "for", var: i, min: c(0), extent: c(n), forKind: "serial", body: { kind: "store", buffer: "O", indices: [i], value: cast(od, body(read("A", [i], dt), read("B", [i], dt), i)) } }
  return {
    name: "map",
    params: [
      { name: "A", dtype: dt, shape: [n], scope: "global" },
      { name: "B", dtype: dt, shape: [n], scope: "global" },
      { name: "O", dtype: od, shape: [n], scope: "global" },
    ],
    body: loop,
  }
}

const inputsFor = (dt: DType, n: number, seed: number): Map<string, Tensor> => {
  let s = seed
  const rnd = () => ((s = (s * 1103515245 + 12345) % 2147483648), s / 2147483648)
  const int = !dt.startsWith("float")
  const gen = (nonzero: boolean) =>
    Array.from({ length: n }, () => {
      const x = int ? Math.floor(rnd() * 200 - 100) : rnd() * 6 - 3
      return nonzero && x === 0 ? 7 : x
    })
  const lim = dt === "uint8" ? (x: number) => Math.abs(x) : (x: number) => x
  return new Map([
    ["A", fromArray(dt, [n], gen(false).map(lim))],
    ["B", fromArray(dt, [n], gen(true).map(lim))],
  ])
}

const BINS: readonly BinOp[] = ["add", "sub", "mul", "div", "floordiv", "floormod", "min", "max", "eq", "ne", "lt", "le", "gt", "ge"]
const MATH: readonly Intrinsic[] = ["exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "fabs", "floor", "ceil", "round", "sin", "cos", "neg"]

describe("wasm scalar paths", () => {
  const n = 37
  const scalarDtypes: readonly DType[] = ["float32", "float64", "int32", "int8", "uint8", "int64", "int16", "uint16"]
  for (const dt of scalarDtypes)
    it(`binary ops, select and casts on ${dt} equal the TIR evaluator`, () => {
      const funcs: { name: string; func: PrimFunc }[] = []
      const isInt = !dt.startsWith("float")
      BINS.forEach((op) => {
        if (isInt && (op === "div" || op === "floordiv" || op === "floormod") && dt !== "int32" && dt !== "int64") return // narrow ints: the evaluator keeps int math in doubles
        const out: DType = ["eq", "ne", "lt", "le", "gt", "ge"].includes(op) ? "bool" : dt
        funcs.push({ name: `b_${op}`, func: mapFunc(dt, out, n, (a, b) => bin(op, a, b)) })
      })
      funcs.push({ name: "floordiv_c", func: mapFunc(dt, dt, n, (a) => floordiv(a, c(3, dt))) })
      funcs.push({ name: "floormod_c", func: mapFunc(dt, dt, n, (a) => floormod(a, c(3, dt))) })
      funcs.push({ name: "floordiv_p2", func: mapFunc(dt, dt, n, (a) => floordiv(a, c(4, dt))) })
      funcs.push({ name: "floormod_p2", func: mapFunc(dt, dt, n, (a) => floormod(a, c(4, dt))) })
      funcs.push({ name: "sel", func: mapFunc(dt, dt, n, (a, b) => select(lt(a, b), mul(a, c(2, dt)), b)) })
      for (const to of ["float32", "float64", "int32", "int8", "uint8", "bool", "int64"] as const) funcs.push({ name: `cast_${to}`, func: mapFunc(dt, to, n, (a) => cast(to, a)) })
      if (!isInt) for (const fn of MATH) funcs.push({ name: `m_${fn}`, func: mapFunc(dt, dt, n, (a) => call(fn, fn === "log" || fn === "sqrt" || fn === "rsqrt" ? call("fabs", a) : a)) })
      if (!isInt) funcs.push({ name: "m_pow", func: mapFunc(dt, dt, n, (a, b) => call("pow", call("fabs", a), b)) })
      const em = emitWasmModule(funcs, { boundsCheck: true })
      const fns = loadWasmModuleSync(em.bytes, em.kernels)
      const inputs = inputsFor(dt, n, 7)
      for (const { name, func } of funcs) {
        const got = callKernel(fns.get(name)!, func, inputs).get("O")!
        const want = evaluatePrimFunc(func, inputs).get("O")!
        try {
          assertAllClose([got], [want], 1e-5, 1e-6)
        } catch (e) {
          throw new Error(`${dt} ${name}: ${(e as Error).message}`)
        }
      }
    })
})

// ---------------------------------------------------------------------------------------------
// Goldens

const DIR = path.resolve(import.meta.dirname, "../golden/wasm")
const GOLDEN_NAMES = new Set(["conv2d_nchwc", "depthwise_conv2d", "dense", "softmax", "conv2d_int8_simd128"])

const fnv1a = (bytes: Uint8Array): string => {
  let h = 0x811c9dc5
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193) >>> 0
  return h.toString(16).padStart(8, "0")
}

const renderGoldens = () =>
  new Map(
    [...GOLDEN_CASES, ...WASM_GOLDEN_CASES]
      .map((mk) => mk())
      .filter((g) => GOLDEN_NAMES.has(g.name))
      .map((g) => {
        const em = emitWasmModule([{ name: g.name, func: goldenFunc(g) }])
        return [`${g.name}.wat`, `;; Generated by Tessera (wasm target). Do not edit.\n;; ${em.bytes.length} bytes, fnv1a ${fnv1a(em.bytes)}\n${printWasmModule(em.module)}`] as const
      }),
  )

describe("golden/wasm", () => {
  const files = renderGoldens()
  if (process.env.UPDATE_GOLDENS) {
    mkdirSync(DIR, { recursive: true })
    for (const [name, text] of files) {
      const file = path.join(DIR, name)
      const old = existsSync(file) ? readFileSync(file, "utf8") : undefined
      if (old !== text) {
        writeFileSync(file, text)
        console.log(`${old === undefined ? "added" : "changed"} golden/wasm/${name}`)
      }
    }
  }
  for (const [name, text] of files)
    it(`${name} is byte-for-byte the golden`, () => {
      const file = path.join(DIR, name)
      expect(existsSync(file), `${file} is missing: UPDATE_GOLDENS=1 npx vitest run test/emit-wasm.test.ts`).toBe(true)
      expect(text === readFileSync(file, "utf8"), `${name} changed: review the diff, then UPDATE_GOLDENS=1 npx vitest run test/emit-wasm.test.ts`).toBe(true)
    })
  it("emission is deterministic", () => {
    const again = renderGoldens()
    for (const [name, text] of files) expect(again.get(name)).toBe(text)
  })
  it("every golden case runs and equals the TE evaluator", () => {
    for (const g of [...GOLDEN_CASES, ...WASM_GOLDEN_CASES].map((mk) => mk())) {
      const f = goldenFunc(g)
      const em = emitWasmModule([{ name: "k", func: f }])
      const outs = callKernel(loadWasmModuleSync(em.bytes, em.kernels).get("k")!, f, g.inputs)
      assertAllClose(g.outputs.map((o) => outs.get(o.name)!), evaluateTE(g.outputs, g.inputs), 1e-4, 1e-5)
    }
  })
})
