// Scan: N state variables carried through a body run once per slice of M scan inputs; the body's
// K extra outputs are stacked into scan outputs. Opset 9+ scans along scan_input_axes with
// per-input / per-output directions and output axes; opset 8 has a leading batch axis on every
// input and output (and an optional sequence_lens input first), and scans axis 1.
import { A, attrs } from "../attrs.js"
import type { Graph } from "../graph.js"
import { check, defineOp, fail, unsupported, type Dim, type InferCtx, type KernelCtx, type ValueType } from "../op.js"
import type { Tensor } from "../tensor.js"
import { declaredType, feedsOf, mergeTypes, ownDims, sliceAxis, stackAxis, subgraphOutputTypes } from "./control-common.js"

const scanAttrs = attrs({
  body: A.graph(),
  num_scan_inputs: A.int(),
  scan_input_axes: A.optInts(),
  scan_input_directions: A.optInts(),
  scan_output_axes: A.optInts(),
  scan_output_directions: A.optInts(),
  directions: A.optInts(),
})
type ScanAttrs = (typeof scanAttrs)["_A"]

/** N (states), M (scan inputs), K (scan outputs) and where the state inputs start. */
const scanArity = (a: ScanAttrs, inputs: number, opset: number) => {
  const first = opset < 9 ? 1 : 0 // opset 8: sequence_lens comes first
  const M = a.num_scan_inputs
  const N = inputs - first - M
  check(M >= 1 && N >= 0, () => `num_scan_inputs is ${M}, but the node has ${inputs - first} state and scan inputs`)
  check(a.body.inputs.length === N + M, () => `the body declares ${a.body.inputs.length} inputs, expected ${N + M} (${N} states, ${M} scan slices)`)
  const K = a.body.outputs.length - N
  check(K >= 0, () => `the body declares ${a.body.outputs.length} outputs, expected at least ${N} (the states)`)
  return { first, N, M, K }
}

/** A per-input attribute list (axes or directions), defaulting to zeros. */
const perInput = (xs: readonly number[] | undefined, n: number, what: string): readonly number[] => {
  if (!xs) return Array.from({ length: n }, () => 0)
  check(xs.length === n, () => `${what} has ${xs.length} entries, expected ${n}`)
  return xs
}

const directionsOf = (xs: readonly number[] | undefined, n: number, what: string): readonly boolean[] =>
  perInput(xs, n, what).map((d) => {
    check(d === 0 || d === 1, () => `${what} entries must be 0 (forward) or 1 (reverse), got ${d}`)
    return d === 1
  })

const normAxis = (axis: number, rank: number, what: string): number => {
  const a = axis < 0 ? axis + rank : axis
  check(a >= 0 && a < rank, () => `${what} ${axis} out of range for rank ${rank}`)
  return a
}

// ---------------------------------------------------------------------------------------------
// Type relation

const inferScan = (ctx: InferCtx<ScanAttrs>): ValueType[] => {
  const a = ctx.attrs
  const { first, N, M, K } = scanArity(a, ctx.inputs.length, ctx.opset)
  const input = (k: number): ValueType => ctx.inputs[first + k] ?? fail(`input ${first + k} is required`)
  const batched = ctx.opset < 9
  // what the body sees: states (per batch entry in opset 8) and one slice of each scan input
  const drop = (t: ValueType, axis: number): ValueType => ({ dtype: t.dtype, shape: [...t.shape.slice(0, axis), ...t.shape.slice(axis + 1)] })
  const stateIn = Array.from({ length: N }, (_, k) => (batched ? drop(input(k), 0) : input(k)))
  const inAxes = batched ? Array.from({ length: M }, () => 1) : perInput(a.scan_input_axes, M, "scan_input_axes")
  const scanIn = Array.from({ length: M }, (_, j) => {
    const t = input(N + j)
    return { t, axis: normAxis(inAxes[j], t.shape.length, "scan_input_axes entry") }
  })
  const slices = scanIn.map(({ t, axis }) => (batched ? drop(drop(t, axis), 0) : drop(t, axis)))
  const length: Dim = scanIn[0].t.shape[scanIn[0].axis]
  const outs = subgraphOutputTypes(ctx, a.body, [...stateIn, ...slices])
  const batch: Dim[] = batched ? [input(0).shape[0] ?? fail("opset-8 Scan inputs need a batch axis")] : []
  const states = stateIn.map((t, k): ValueType => {
    const merged = mergeTypes(t, outs[k], `${ctx.node}.out${k}`, `state ${k}`)
    return { dtype: merged.dtype, shape: [...batch, ...merged.shape] }
  })
  const outAxes = batched ? Array.from({ length: K }, () => 0) : perInput(a.scan_output_axes, K, "scan_output_axes")
  const scans = Array.from({ length: K }, (_, k): ValueType => {
    const t = outs[N + k] ?? unsupported(`scan output ${k} of the body has no declared type, and its type cannot be inferred here`)
    const dims = ownDims(t.shape, `${ctx.node}.out${N + k}`)
    const axis = normAxis(outAxes[k], dims.length + 1, "scan_output_axes entry")
    return { dtype: t.dtype, shape: [...batch, ...dims.slice(0, axis), length, ...dims.slice(axis)] }
  })
  return [...states, ...scans]
}

// ---------------------------------------------------------------------------------------------
// Kernel

interface ScanPlan {
  readonly body: Graph
  readonly N: number
  readonly K: number
  readonly inAxes: readonly number[]
  readonly inReverse: readonly boolean[]
  readonly outAxes: readonly number[]
  readonly outReverse: readonly boolean[]
}

/** One scan: the final states and the stacked scan outputs. */
const runScan = (plan: ScanPlan, states0: readonly Tensor[], scanInputs: readonly Tensor[], run: KernelCtx<unknown>["runSubgraph"]): Tensor[] => {
  const { body, N, K } = plan
  const axes = scanInputs.map((t, j) => normAxis(plan.inAxes[j], t.shape.length, "scan_input_axes entry"))
  const L = scanInputs[0].shape[axes[0]]
  scanInputs.forEach((t, j) => check(t.shape[axes[j]] === L, () => `scan input ${j} has length ${t.shape[axes[j]]} along its scan axis, scan input 0 has ${L}`))
  let states = [...states0]
  const parts: Tensor[][] = Array.from({ length: K }, () => [])
  for (let t = 0; t < L; t++) {
    const slices = scanInputs.map((x, j) => sliceAxis(x, axes[j], plan.inReverse[j] ? L - 1 - t : t))
    const outs = run(body, feedsOf(body.inputs, [...states, ...slices], "the Scan body"))
    states = outs.slice(0, N)
    for (let k = 0; k < K; k++) parts[k].push(outs[N + k])
  }
  const scans = parts.map((p, k) => {
    const ordered = plan.outReverse[k] ? [...p].reverse() : p
    const empty = declaredType(body.outputs[N + k])
    const rank = (p[0]?.shape.length ?? empty?.shape.length ?? 0) + 1
    return stackAxis(ordered, normAxis(plan.outAxes[k], rank, "scan_output_axes entry"), `scan output ${k}`, empty)
  })
  return [...states, ...scans]
}

const scanKernel = (ctx: KernelCtx<ScanAttrs>): Tensor[] => {
  const a = ctx.attrs
  const { first, N, M, K } = scanArity(a, ctx.inputs.length, ctx.opset)
  const inputs = ctx.inputs.slice(first).map((t, k) => t ?? fail(`input ${first + k} is required`))
  const states = inputs.slice(0, N)
  const scanInputs = inputs.slice(N)
  if (ctx.opset >= 9) {
    const plan: ScanPlan = {
      body: a.body,
      N,
      K,
      inAxes: perInput(a.scan_input_axes, M, "scan_input_axes"),
      inReverse: directionsOf(a.scan_input_directions, M, "scan_input_directions"),
      outAxes: perInput(a.scan_output_axes, K, "scan_output_axes"),
      outReverse: directionsOf(a.scan_output_directions, K, "scan_output_directions"),
    }
    return runScan(plan, states, scanInputs, ctx.runSubgraph)
  }
  // opset 8: every input has a leading batch axis; each batch entry is scanned along axis 0 of its slice
  const plan: ScanPlan = {
    body: a.body,
    N,
    K,
    inAxes: Array.from({ length: M }, () => 0),
    inReverse: directionsOf(a.directions, M, "directions"),
    outAxes: Array.from({ length: K }, () => 0),
    outReverse: Array.from({ length: K }, () => false),
  }
  const batch = inputs[0].shape[0]
  inputs.forEach((t, k) => check(t.shape.length >= 1 && t.shape[0] === batch, () => `input ${first + k} has shape [${t.shape.join(", ")}], expected batch size ${batch} first`))
  const lens = ctx.inputs[0]
  if (lens) {
    const L = scanInputs[0].shape[1]
    if (Array.from(lens.data as ArrayLike<number>).some((n) => n !== L))
      return unsupported("sequence_lens shorter than the scan inputs' sequence axis is not supported")
  }
  const perBatch = Array.from({ length: batch }, (_, b) =>
    runScan(plan, states.map((t) => sliceAxis(t, 0, b)), scanInputs.map((t) => sliceAxis(t, 0, b)), ctx.runSubgraph),
  )
  return Array.from({ length: N + K }, (_, k) => stackAxis(perBatch.map((outs) => outs[k]), 0, k < N ? `state ${k}` : `scan output ${k - N}`))
}

const Scan = defineOp({
  attrs: scanAttrs,
  inputs: [1, Infinity],
  outputs: [1, Infinity],
  kind: "opaque",
  infer: inferScan,
  kernel: scanKernel,
})

export const scanOps = { Scan }
