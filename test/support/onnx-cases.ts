// ONNX's conformance cases (../shared/onnx-tests): listing, loading and running one case through
// decode + the reference evaluator, compared the way ONNX's own runner does.
import { fromBinary } from "@bufbuild/protobuf"
import * as fs from "node:fs"
import * as path from "node:path"
import { TensorProtoSchema } from "onnx-buf"
import { isFloat } from "../../src/ast/graph/dtype.js"
import { NodeError, UnsupportedOpError } from "../../src/ast/graph/errors.js"
import { OpUnsupported, type ValueType } from "../../src/ast/graph/op.js"
import { checkFeeds, resolveNode, runGraph, type NodeObserver } from "../../src/ast/graph/evaluate.js"
import { inferSubgraphTypes, typeAdmits, typeOf } from "../../src/ast/graph/infer.js"
import { showType } from "../../src/ast/graph/graph.js"
import type { Graph } from "../../src/ast/graph/graph.js"
import { fromArray, showShape, sizeOf, type Tensor } from "../../src/ast/graph/tensor.js"
import { decodeModelSync } from "../../src/ast/onnx/decode.js"
import { decodeTensor } from "../../src/ast/onnx/tensor-proto.js"

/** The repository root: the nearest folder above this file with a package.json (works from test/ and from bundles). */
const repoRoot = (): string => {
  let dir = import.meta.dirname
  while (!fs.existsSync(path.join(dir, "package.json")) && path.dirname(dir) !== dir) dir = path.dirname(dir)
  return dir
}

export const ONNX_TESTS = path.resolve(process.env.TESSERA_ONNX_TESTS ?? path.join(repoRoot(), "../shared/onnx-tests"))

export const SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple", "light"] as const
export type Suite = (typeof SUITES)[number]

export interface OnnxCase {
  readonly suite: Suite
  readonly name: string
  readonly model: string
  /** Each data set: input files and expected output files (empty for light models: ramp inputs). */
  readonly dataSets: readonly { readonly inputs: readonly string[]; readonly outputs: readonly string[] }[]
}

export type CaseStatus = "pass" | "fail" | "unsupported"
export interface CaseResult {
  readonly suite: Suite
  readonly name: string
  readonly status: CaseStatus
  readonly reason: string
  readonly ops: readonly string[]
  readonly ms: number
}

/** Tolerances: ONNX's defaults, and the cases ONNX's runner itself loosens (with why). */
const TOLERANCE: Record<string, { rtol: number; atol: number; why: string }> = {
  light_densenet121: { rtol: 2e-3, atol: 1e-7, why: "ONNX's runner uses rtol 2e-3 for densenet121" },
  // the reference outputs were computed by numpy's float32 FFT: where the exact value is 0 (the
  // imaginary part of a real signal's inverse), they hold rounding noise of ~1.9e-7 (> atol 1e-7)
  test_dft_inverse: { rtol: 1e-3, atol: 1e-6, why: "float32 FFT noise of ~2e-7 in the expected zeros" },
  test_dft_inverse_opset19: { rtol: 1e-3, atol: 1e-6, why: "float32 FFT noise of ~2e-7 in the expected zeros" },
}

const sorted = (xs: string[]) => xs.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
const numbered = (dir: string, prefix: string) =>
  sorted(fs.readdirSync(dir).filter((f) => f.startsWith(prefix) && f.endsWith(".pb")))
    .sort((a, b) => Number(a.slice(prefix.length, -3)) - Number(b.slice(prefix.length, -3)))
    .map((f) => path.join(dir, f))

export const listCases = (root = ONNX_TESTS): OnnxCase[] => {
  const cases: OnnxCase[] = []
  for (const suite of SUITES) {
    const dir = path.join(root, suite)
    if (!fs.existsSync(dir)) continue
    if (suite === "light") {
      for (const f of sorted(fs.readdirSync(dir).filter((f) => f.endsWith(".onnx")))) {
        const name = f.slice(0, -5)
        const out = path.join(dir, `${name}_output_0.pb`)
        cases.push({ suite, name, model: path.join(dir, f), dataSets: [{ inputs: [], outputs: fs.existsSync(out) ? [out] : [] }] })
      }
      continue
    }
    for (const name of sorted(fs.readdirSync(dir))) {
      const model = path.join(dir, name, "model.onnx")
      if (!fs.existsSync(model)) continue
      const sets = sorted(fs.readdirSync(path.join(dir, name)).filter((d) => d.startsWith("test_data_set_")))
      cases.push({
        suite,
        name,
        model,
        dataSets: sets.map((s) => ({ inputs: numbered(path.join(dir, name, s), "input_"), outputs: numbered(path.join(dir, name, s), "output_") })),
      })
    }
  }
  return cases
}

export const readTensorFile = (file: string): { name: string; tensor: Tensor } => {
  const tp = fromBinary(TensorProtoSchema, fs.readFileSync(file))
  return { name: tp.name, tensor: decodeTensor(tp, path.basename(file)) }
}

/** ONNX's light-model feed: arange(n).reshape(shape) / n as float32, unknown dims as 1. */
export const rampInput = (shape: readonly (number | string)[]): Tensor => {
  const dims = shape.map((d) => (typeof d === "number" ? d : 1))
  const n = sizeOf(dims)
  const values = new Float32Array(n)
  for (let i = 0; i < n; i++) values[i] = i / n
  return fromArray("float32", dims, values)
}

/** numpy.testing.assert_allclose semantics; a message on mismatch, undefined when equal. */
export const compareTensors = (got: Tensor, want: Tensor, rtol = 1e-3, atol = 1e-7): string | undefined => {
  if (got.dtype !== want.dtype) return `dtype ${got.dtype}, expected ${want.dtype}`
  if (got.shape.length !== want.shape.length || got.shape.some((d, i) => d !== want.shape[i]))
    return `shape ${showShape(got.shape)}, expected ${showShape(want.shape)}`
  const exact = !isFloat(want.dtype)
  let bad = 0
  let first = -1
  for (let i = 0; i < want.data.length; i++) {
    const a = got.data[i]
    const b = want.data[i]
    if (Number.isNaN(b) || Number.isNaN(a)) {
      if (Number.isNaN(a) !== Number.isNaN(b)) {
        bad++
        if (first < 0) first = i
      }
      continue
    }
    if (a === b) continue
    if (exact || !(Math.abs(a - b) <= atol + rtol * Math.abs(b))) {
      bad++
      if (first < 0) first = i
    }
  }
  if (!bad) return undefined
  return `${bad}/${want.data.length} elements differ; first at ${first}: got ${got.data[first]}, expected ${want.data[first]}`
}

const opsOf = (g: Graph, acc = new Set<string>()): Set<string> => {
  for (const n of g.nodes) {
    acc.add(n.domain ? `${n.domain}.${n.op}` : n.op)
    for (const a of Object.values(n.attrs)) if (a.kind === "graph") opsOf(a.value, acc)
  }
  return acc
}

const UNSUPPORTED_TAGS = new Set(["UnsupportedOpError", "UnsupportedModelError"])

/**
 * Checks every node's type relation against what its kernel produced: the inferred dtype must be
 * the real one and every numeric dim the real dim (symbolic dims match anything). Input values
 * are given to the relation where they are compile-time constants (initializers and nodes over them).
 */
export const inferenceChecker = (graph: Graph, feeds: ReadonlyMap<string, Tensor> = new Map()): NodeObserver => {
  const constants = new Map<string, Tensor>(graph.initializers)
  // the types of every value seen so far: the scope subgraph inference looks into
  const seen = new Map<string, ValueType>([...graph.initializers, ...feeds].map(([k, t]) => [k, typeOf(t)] as const))
  return (n, inputs, outputs) => {
    const { def, attrs } = resolveNode(n)
    n.inputs.forEach((name, k) => name !== "" && inputs[k] && seen.set(name, typeOf(inputs[k]!)))
    const values = n.inputs.map((name) => (name === "" ? undefined : constants.get(name)))
    let inferred
    try {
      inferred = def.infer({
        node: n.name,
        attrs,
        opset: graph.opset,
        inputs: inputs.map((t) => (t ? typeOf(t) : undefined)),
        values,
        outputs: n.outputs.length,
        inferSubgraph: (sub, subInputs) => inferSubgraphTypes(sub, subInputs, seen, constants),
      })
    } catch (e) {
      // a relation that cannot say (a rank decided at run time) is a limit, not a wrong answer
      if (e instanceof OpUnsupported || e instanceof UnsupportedOpError)
        throw new UnsupportedOpError({ node: n.name, op: n.op, domain: n.domain, reason: `type relation: ${e.message}` })
      throw new NodeError({ node: n.name, op: n.op, reason: `type relation failed where the kernel ran: ${e instanceof Error ? e.message : String(e)}` })
    }
    n.outputs.forEach((o, j) => o !== "" && outputs[j] && seen.set(o, typeOf(outputs[j])))
    n.outputs.forEach((o, j) => {
      if (o === "") return
      const t = inferred[j]
      if (!t || !typeAdmits(t, outputs[j]))
        throw new NodeError({ node: n.name, op: n.op, reason: `type relation says ${t ? showType(t) : "nothing"} for output ${j}, the kernel gave ${showType(typeOf(outputs[j]))}` })
    })
    const hasGraph = Object.values(n.attrs).some((a) => a.kind === "graph" || a.kind === "graphs")
    if (!hasGraph && n.inputs.every((name) => name === "" || constants.has(name)))
      n.outputs.forEach((o, j) => o !== "" && constants.set(o, outputs[j]))
  }
}

/** The graph transform applied before evaluation (identity, or the optimizer's pipeline). */
export type GraphTransform = (g: Graph) => Graph

/** Runs one case: decode, feed every data set, compare every output. */
/** The input shapes of a case's first data set (light models: their declared shapes), as the targets compile it. */
export const caseShapes = (c: OnnxCase, graph: Graph): Map<string, readonly number[]> => {
  const shapes = new Map<string, readonly number[]>()
  const set = c.dataSets[0]
  if (c.suite === "light" || !set) {
    for (const i of graph.inputs) if (i.type.dtype === "float32") shapes.set(i.name, rampInput(i.type.shape).shape)
  } else
    set.inputs.forEach((file, j) => {
      const { name, tensor } = readTensorFile(file)
      const target = graph.inputs.find((i) => i.name === name) ?? graph.inputs[j]
      if (target) shapes.set(target.name, tensor.shape)
    })
  return shapes
}

export const runCase = (c: OnnxCase, transform: GraphTransform = (g) => g): CaseResult => {
  const t0 = performance.now()
  let ops: string[] = []
  const result = (status: CaseStatus, reason: string): CaseResult => ({
    suite: c.suite,
    name: c.name,
    status,
    reason,
    ops,
    ms: Math.round(performance.now() - t0),
  })
  try {
    const graph0 = decodeModelSync(fs.readFileSync(c.model))
    ops = sorted([...opsOf(graph0)])
    const graph = transform(graph0)
    for (const [k, set] of c.dataSets.entries()) {
      const feeds = new Map<string, Tensor>()
      if (c.suite === "light") {
        for (const i of graph.inputs) if (i.type.dtype === "float32") feeds.set(i.name, rampInput(i.type.shape))
      } else {
        set.inputs.forEach((file, j) => {
          const { name, tensor } = readTensorFile(file)
          const byName = graph.inputs.find((i) => i.name === name)
          const target = byName ?? graph.inputs[j]
          if (!target) throw new Error(`data set ${k}: input file ${j} matches no graph input`)
          feeds.set(target.name, tensor)
        })
      }
      checkFeeds(graph, feeds)
      const outs = runGraph(graph, feeds, undefined, inferenceChecker(graph, feeds))
      const tol = TOLERANCE[c.name] ?? { rtol: 1e-3, atol: 1e-7 }
      for (const [j, file] of set.outputs.entries()) {
        const want = readTensorFile(file).tensor
        const got = outs[j]
        if (!got) return result("fail", `data set ${k}: output ${j} missing`)
        const diff = compareTensors(got, want, tol.rtol, tol.atol)
        if (diff) return result("fail", `data set ${k}, output ${j} (${graph.outputs[j]?.name}): ${diff}`)
      }
    }
    return result("pass", "")
  } catch (e) {
    const tag = typeof e === "object" && e !== null && "_tag" in e ? String((e as { _tag: unknown })._tag) : undefined
    const msg = e instanceof Error ? e.message : String(e)
    if (tag && UNSUPPORTED_TAGS.has(tag)) return result("unsupported", msg)
    return result("fail", tag ? `${tag}: ${msg}` : `untyped ${e instanceof Error ? e.name : "exception"}: ${msg}`)
  }
}

/**
 * Runs one case through the compiler for a target (graph passes, fusion, lowering, emission,
 * the executor with planned buffers): the same comparison as `runCase`. Groups the compiler has no
 * compute for run through the named fallback; `compiled` counts the groups that ran generated code.
 */
export const runCaseOnTarget = async (
  c: OnnxCase,
  target: "js" | "c" | "wasm" | "cuda-sim",
): Promise<CaseResult & { readonly compiled: number; readonly fallback: number }> => {
  const { Effect } = await import("effect")
  const { compileGraph, loadProgram } = await import("../../src/pipeline.js")
  const { makeTarget } = await import("../../src/ast/target.js")
  const t0 = performance.now()
  let ops: string[] = []
  let compiled = 0
  let fallback = 0
  const result = (status: CaseStatus, reason: string) => ({ suite: c.suite, name: c.name, status, reason, ops, ms: Math.round(performance.now() - t0), compiled, fallback })
  try {
    const graph = decodeModelSync(fs.readFileSync(c.model))
    ops = sorted([...opsOf(graph)])
    for (const [k, set] of c.dataSets.entries()) {
      const feeds = new Map<string, Tensor>()
      if (c.suite === "light") {
        for (const i of graph.inputs) if (i.type.dtype === "float32") feeds.set(i.name, rampInput(i.type.shape))
      } else
        set.inputs.forEach((file, j) => {
          const { name, tensor } = readTensorFile(file)
          const target = graph.inputs.find((i) => i.name === name) ?? graph.inputs[j]
          if (target) feeds.set(target.name, tensor)
        })
      checkFeeds(graph, feeds)
      const shapes = new Map([...feeds].map(([n, t]) => [n, t.shape] as const))
      const outs = await (async () => {
        if (target === "cuda-sim") {
          // the GPU schedules, every kernel verified, run by the TIR evaluator (test/support/cuda-sim.ts)
          const { compileCudaSim, runCudaSim } = await import("./cuda-sim.js")
          const program = compileCudaSim(graph, shapes)
          compiled = program.kernels.filter((x) => x.kind === "compiled").length
          fallback = program.kernels.length - compiled
          return runCudaSim(program, feeds)
        }
        const t = makeTarget(target, { vectorLanes: target === "c" ? 16 : 4 })
        const program = await Effect.runPromise(compileGraph(graph, t, { optLevel: 3, shapes }))
        compiled = program.kernels.filter((x) => x.kind === "compiled").length
        fallback = program.kernels.length - compiled
        return (await Effect.runPromise(loadProgram(program, t))).run(feeds)
      })()
      const tol = TOLERANCE[c.name] ?? { rtol: 1e-3, atol: 1e-7 }
      for (const [j, file] of set.outputs.entries()) {
        const want = readTensorFile(file).tensor
        const got = outs.get(graph.outputs[j].name)
        if (!got) return result("fail", `data set ${k}: output ${j} missing`)
        const diff = compareTensors(got, want, tol.rtol, tol.atol)
        if (diff) return result("fail", `data set ${k}, output ${j}: ${diff}`)
      }
    }
    return result("pass", "")
  } catch (e) {
    const cause = typeof e === "object" && e !== null && "cause" in e ? (e as { cause: unknown }).cause : undefined
    const err = (cause ?? e) as unknown
    const tag = typeof err === "object" && err !== null && "_tag" in err ? String((err as { _tag: unknown })._tag) : undefined
    const msg = err instanceof Error ? err.message : String(err)
    if (tag && (UNSUPPORTED_TAGS.has(tag) || tag === "InputError")) return result("unsupported", msg)
    return result("fail", tag ? `${tag}: ${msg}` : `untyped: ${msg}`)
  }
}
