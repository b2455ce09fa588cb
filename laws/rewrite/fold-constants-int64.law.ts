// rewrite.FoldConstants on int64 past 2^53 (issue 19): random chains of int64 ops (Add, Sub, Mul,
// Div, Mod, Neg, Abs, Max, Min, Gather, Concat + Slice, Reshape, Where over Less, ReduceSum, Cast
// through float64 and back) over constants near 2^53, 2^62 and ±2^63 and a graph input, so that
// some islands fold and some stay. The law: the interpreter gives a BigInt oracle's values, exactly,
// before folding and after — a folded constant that kept only its doubles (2^53 + 1 as 2^53) or a
// kernel that computed in double fails it.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { attr } from "../../src/ast/graph/attrs.js"
import { makeGraph, node, type Node } from "../../src/ast/graph/graph.js"
import { exactValues, wideTensor, type Tensor } from "../../src/ast/graph/tensor.js"
import { foldConstantsSync } from "../../src/rewrite/fold-constants.js"
import { evalGraph, lawParams } from "../support.js"

const L = 3
const wrap = (v: bigint) => BigInt.asIntN(64, v)
const SEEDS = [2n ** 53n + 1n, 2n ** 53n - 1n, -(2n ** 53n) - 3n, 2n ** 62n + 7n, -(2n ** 63n), 2n ** 63n - 1n, 3n, -5n, 1n, 0n]
const arbValue = fc.oneof(fc.constantFrom(...SEEDS), fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.bigInt({ min: -100n, max: 100n }))
const arbVec = fc.array(arbValue, { minLength: L, maxLength: L })

type Step =
  | { readonly op: "Add" | "Sub" | "Mul" | "Max" | "Min" | "WhereLess" | "SumAdd"; readonly a: number; readonly b: number }
  | { readonly op: "Div" | "Mod"; readonly a: number; readonly d: readonly bigint[]; readonly fmod: number }
  | { readonly op: "Neg" | "Abs" | "Reshape" | "CastF64" | "ConcatSlice"; readonly a: number }
  | { readonly op: "Gather"; readonly a: number; readonly idx: readonly number[] }

const nonZero = fc.array(arbValue.filter((v) => v !== 0n), { minLength: L, maxLength: L })
const arbStep: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ op: fc.constantFrom("Add", "Sub", "Mul", "Max", "Min", "WhereLess", "SumAdd"), a: fc.nat(), b: fc.nat() }),
  fc.record({ op: fc.constantFrom("Div", "Mod"), a: fc.nat(), d: nonZero, fmod: fc.constantFrom(0, 1) }),
  fc.record({ op: fc.constantFrom("Neg", "Abs", "Reshape", "CastF64", "ConcatSlice"), a: fc.nat() }),
  fc.record({ op: fc.constant("Gather"), a: fc.nat(), idx: fc.array(fc.integer({ min: -L, max: L - 1 }), { minLength: L, maxLength: L }) }),
) as fc.Arbitrary<Step>

const i64 = (vs: readonly bigint[], shape: number[] = [vs.length]): Tensor => wideTensor("int64", shape, BigInt64Array.from(vs))
const io = (name: string) => ({ name, type: { dtype: "int64" as const, shape: [L] } })

/** A chain over two constants and the input x, and what a BigInt oracle says it computes. */
const build = (c0: readonly bigint[], c1: readonly bigint[], x: readonly bigint[], steps: readonly Step[]) => {
  const names = ["c0", "c1", "x"]
  const vals: bigint[][] = [[...c0], [...c1], [...x]]
  const initializers = new Map<string, Tensor>([["c0", i64(c0)], ["c1", i64(c1)]])
  const nodes: Node[] = []
  let k = 0
  const konst = (vs: readonly bigint[], shape?: number[]) => {
    const n = `k${k++}`
    initializers.set(n, i64(vs, shape))
    return n
  }
  for (const s of steps) {
    const a = s.a % names.length
    const av = vals[a]
    const out = `v${names.length}`
    let r: bigint[]
    switch (s.op) {
      case "Add":
      case "Sub":
      case "Mul":
      case "Max":
      case "Min": {
        const b = s.b % names.length
        const f = { Add: (p: bigint, q: bigint) => p + q, Sub: (p: bigint, q: bigint) => p - q, Mul: (p: bigint, q: bigint) => p * q, Max: (p: bigint, q: bigint) => (p > q ? p : q), Min: (p: bigint, q: bigint) => (p < q ? p : q) }[s.op]
        nodes.push(node(s.op, [names[a], names[b]], [out]))
        r = av.map((v, i) => wrap(f(v, vals[b][i])))
        break
      }
      case "WhereLess": {
        const b = s.b % names.length
        nodes.push(node("Less", [names[a], names[b]], [`${out}_lt`]), node("Where", [`${out}_lt`, names[a], names[b]], [out]))
        r = av.map((v, i) => (v < vals[b][i] ? v : vals[b][i]))
        break
      }
      case "SumAdd": {
        const b = s.b % names.length
        nodes.push(node("ReduceSum", [names[a], konst([0n])], [`${out}_sum`], { keepdims: attr.int(1) }), node("Add", [`${out}_sum`, names[b]], [out]))
        const sum = av.reduce((p, q) => wrap(p + q), 0n)
        r = vals[b].map((v) => wrap(sum + v))
        break
      }
      case "Div":
      case "Mod": {
        const d = konst(s.d)
        nodes.push(node(s.op, [names[a], d], [out], s.op === "Mod" ? { fmod: attr.int(s.fmod) } : {}))
        r = av.map((v, i) => {
          const q = s.d[i]
          if (s.op === "Div") return wrap(v / q)
          const m = v % q
          return s.fmod === 0 && m !== 0n && m < 0n !== q < 0n ? m + q : m
        })
        break
      }
      case "Neg":
        nodes.push(node("Neg", [names[a]], [out]))
        r = av.map((v) => wrap(-v))
        break
      case "Abs":
        nodes.push(node("Abs", [names[a]], [out]))
        r = av.map((v) => wrap(v < 0n ? -v : v))
        break
      case "Reshape":
        nodes.push(node("Reshape", [names[a], konst([1n, -1n])], [`${out}_2d`]), node("Reshape", [`${out}_2d`, konst([BigInt(L)])], [out]))
        r = [...av]
        break
      case "CastF64":
        // to the nearest double and back: truncated, and wrapped past 2^63 like the cast
        nodes.push(node("Cast", [names[a]], [`${out}_f`], { to: attr.int(11) }), node("Cast", [`${out}_f`], [out], { to: attr.int(7) }))
        r = av.map((v) => wrap(BigInt(Number(v))))
        break
      case "ConcatSlice":
        nodes.push(
          node("Concat", [names[a], names[a]], [`${out}_cat`], { axis: attr.int(0) }),
          node("Slice", [`${out}_cat`, konst([1n]), konst([BigInt(L + 1)])], [out]),
        )
        r = [...av.slice(1), av[0]]
        break
      case "Gather":
        nodes.push(node("Gather", [names[a], konst(s.idx.map(BigInt))], [out]))
        r = s.idx.map((i) => av[i < 0 ? i + L : i])
        break
    }
    names.push(out)
    vals.push(r)
  }
  const last = names.length - 1
  const outputs = [io(names[last]), ...(last > 3 ? [io(names[last - 1])] : [])]
  const graph = makeGraph({ opset: 13, inputs: [io("x")], outputs, nodes, initializers })
  return { graph, want: outputs.map((o) => vals[names.indexOf(o.name)].map(String)) }
}

const arbChain = fc.tuple(arbVec, arbVec, arbVec, fc.array(arbStep, { minLength: 1, maxLength: 8 }))

describe("rewrite.FoldConstants on int64 beyond 2^53", () => {
  it("the interpreter gives the BigInt oracle's values exactly, before and after folding", () => {
    let folded = 0
    fc.assert(
      fc.property(arbChain, ([c0, c1, x, steps]) => {
        const { graph, want } = build(c0, c1, x, steps)
        const feeds = new Map([["x", i64(x)]])
        const exact = (ts: readonly Tensor[]) => ts.map((t) => [...exactValues(t)].map(String))
        expect(exact(evalGraph(graph, feeds))).toEqual(want)
        const after = foldConstantsSync(graph)
        folded += graph.nodes.length - after.nodes.length
        expect(exact(evalGraph(after, feeds))).toEqual(want)
      }),
      lawParams(300),
    )
    // many islands fold (the chains read the constants often)
    expect(folded).toBeGreaterThan(100)
  })
})
