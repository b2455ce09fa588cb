// int64 / uint64 through the whole compiler, bit for bit (issue 19): random elementwise graphs of
// 64-bit integers — Add, Sub, Mul, Div, Mod, Max, Min, Neg, Abs, Where of a comparison, and casts
// through float64, float32 and int32 and back, broadcast, fused into chains — on values that a
// double does not hold (2^53 + 1, 2^62 + 7, -2^63, 2^63 - 1, 2^64 - 1) and random ones. Each target
// whose code computes them exactly (c: int64_t / uint64_t; wasm: i64; js: BigInt) compiles every
// group (no reference kernel hides a wrong one) and gives the evaluator's exact values
// (ops/exact-int64.ts, the oracle). Divisors are made non-zero (|b| + 1, max(b, 1)): a zero divisor
// is a typed error on the evaluator, 0 in compiled code. c: one gcc run for a batch of graphs;
// skipped, visibly, where gcc is absent.
import { Effect } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../src/ast/graph/attrs.js"
import { runGraph } from "../src/ast/graph/evaluate.js"
import { makeGraph, node, type Node } from "../src/ast/graph/graph.js"
import { exactValues, wideTensor, type Tensor } from "../src/ast/graph/tensor.js"
import { makeTarget } from "../src/ast/target.js"
import type { GraphCase } from "../src/ast/graph/arbitrary.js"
import { compileGraph, loadProgram } from "../src/pipeline.js"
import { lawParams } from "./support.js"
import { HAVE_GCC, mergeGraphs, NO_GCC } from "./support-c.js"

type Wide = "int64" | "uint64"

const SPECIAL: { readonly [W in Wide]: readonly bigint[] } = {
  int64: [0n, 1n, -1n, 7n, -7n, 2n ** 53n + 1n, -(2n ** 53n) - 1n, 2n ** 62n + 7n, -(2n ** 63n), 2n ** 63n - 1n, 2n ** 32n + 1n],
  uint64: [0n, 1n, 7n, 2n ** 53n + 1n, 2n ** 62n + 7n, 2n ** 63n, 2n ** 63n + 5n, 2n ** 64n - 1n, 2n ** 32n + 1n],
}

const arbValue = (d: Wide): fc.Arbitrary<bigint> =>
  fc.oneof(
    fc.constantFrom(...SPECIAL[d]),
    d === "int64" ? fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }) : fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
    fc.bigInt({ min: d === "int64" ? -1000n : 0n, max: 1000n }),
  )

/** One step: an op and the pool values it takes (indices into the pool, reduced modulo its size). */
type Step = { readonly op: string; readonly a: number; readonly b: number; readonly c: number }
const OPS: { readonly [W in Wide]: readonly string[] } = {
  int64: ["Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "Neg", "Abs", "WhereLess", "WhereEqual", "ViaFloat64", "ViaFloat32", "ViaInt32"],
  uint64: ["Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "WhereLess", "WhereGreater", "ViaFloat64", "ViaFloat32", "ViaInt32"],
}
const ONNX_TYPE = { int64: 7, uint64: 13, float64: 11, float32: 1, int32: 6 } as const

/** A random elementwise graph of `d` over x [2, 3] and y [3] (broadcast), and its inputs. */
const arbWideGraph = (d: Wide): fc.Arbitrary<GraphCase> =>
  fc
    .record({
      steps: fc.array(fc.record({ op: fc.constantFrom(...OPS[d]), a: fc.nat(), b: fc.nat(), c: fc.nat() }), { minLength: 1, maxLength: 7 }),
      x: fc.array(arbValue(d), { minLength: 6, maxLength: 6 }),
      y: fc.array(arbValue(d), { minLength: 3, maxLength: 3 }),
      extra: fc.nat(),
    })
    .map(({ steps, x, y, extra }) => {
      const nodes: Node[] = []
      const pool = ["x", "y"]
      let k = 0
      const fresh = () => `v${k++}`
      const add = (op: string, ins: string[], attrs: Node["attrs"] = {}) => {
        const o = fresh()
        nodes.push(node(op, ins, [o], attrs, `n${nodes.length}`))
        return o
      }
      const pick = (n: number) => pool[n % pool.length]
      const nonZero = (v: string) => (d === "int64" ? add("Add", [add("Abs", [v]), "one"]) : add("Max", [v, "one"]))
      for (const s of steps as readonly Step[]) {
        const a = pick(s.a)
        const b = pick(s.b)
        let out: string
        switch (s.op) {
          case "Div":
          case "Mod":
            out = add(s.op, [a, nonZero(b)])
            break
          case "Neg":
          case "Abs":
            out = add(s.op, [a])
            break
          case "WhereLess":
          case "WhereEqual":
          case "WhereGreater":
            out = add("Where", [add(s.op.slice(5), [a, b]), pick(s.c), a])
            break
          case "ViaFloat64":
          case "ViaFloat32":
          case "ViaInt32": {
            const to = s.op === "ViaFloat64" ? "float64" : s.op === "ViaFloat32" ? "float32" : "int32"
            out = add("Cast", [add("Cast", [a], { to: attr.int(ONNX_TYPE[to]) })], { to: attr.int(ONNX_TYPE[d]) })
            break
          }
          default:
            out = add(s.op, [a, b])
        }
        pool.push(out)
      }
      const last = pool[pool.length - 1]
      const other = pool[2 + (extra % (pool.length - 2))]
      const outs = other === last ? [last] : [last, other]
      const big = (vs: readonly bigint[]) => (d === "uint64" ? BigUint64Array.from(vs) : BigInt64Array.from(vs))
      const graph = makeGraph({
        name: `wide_${d}`,
        opset: 13,
        inputs: [
          { name: "x", type: { dtype: d, shape: [2, 3] } },
          { name: "y", type: { dtype: d, shape: [3] } },
        ],
        outputs: outs.map((name) => ({ name, type: { dtype: d, shape: [2, 3] } })),
        nodes,
        initializers: new Map([["one", wideTensor(d, [], big([1n]))]]),
      })
      const inputs = new Map<string, Tensor>([
        ["x", wideTensor(d, [2, 3], big(x))],
        ["y", wideTensor(d, [3], big(y))],
      ])
      return { graph, inputs }
    })

const show = (t: Tensor) => [...exactValues(t)].map(String)

/** Compiles `c` for `kind`, checks every group compiled, runs it twice (planned buffers reused) and compares each output's exact values with the evaluator's. */
const check = async (kind: "js" | "wasm" | "c", c: GraphCase): Promise<void> => {
  const target = makeTarget(kind)
  const program = await Effect.runPromise(compileGraph(c.graph, target))
  expect(program.kernels.filter((k) => k.kind === "fallback").map((k) => (k.kind === "fallback" ? k.reason : ""))).toEqual([])
  const exec = await Effect.runPromise(loadProgram(program, target))
  try {
    const want = runGraph(c.graph, c.inputs)
    for (let r = 0; r < 2; r++) {
      const got = exec.run(c.inputs)
      c.graph.outputs.forEach((o, j) => {
        const g = got.get(o.name)!
        expect(g.dtype).toBe(want[j].dtype)
        expect(show(g), `${kind}: output ${o.name} of ${c.graph.nodes.map((n) => n.op).join(" ")}`).toEqual(show(want[j]))
      })
    }
  } finally {
    exec.module.close()
  }
}

describe("int64 / uint64 compiled exactly", () => {
  for (const d of ["int64", "uint64"] as const)
    for (const kind of ["js", "wasm"] as const)
      it(`${kind} gives the evaluator's exact ${d} values on random elementwise graphs`, async () => {
        for (const c of fc.sample(arbWideGraph(d), lawParams(30))) await check(kind, c)
      }, 300_000)

  for (const d of ["int64", "uint64"] as const)
    it.skipIf(!HAVE_GCC)(`c gives the evaluator's exact ${d} values on random elementwise graphs (batched into one gcc run)${HAVE_GCC ? "" : NO_GCC}`, async () => {
      await check("c", mergeGraphs(fc.sample(arbWideGraph(d), lawParams(30)), `wide_${d}`))
    }, 300_000)
})
