// Control flow: If, Loop and Scan. Their bodies are subgraph attributes run through
// `ctx.runSubgraph`, which sees the enclosing graphs' values. Output types come from the types
// the subgraphs declare for their outputs (merged with the input types where a value may come
// from either), so dims that can differ between paths or iterations are symbolic.
import { A, attrs } from "../attrs.js"
import { NodeError } from "../errors.js"
import { LIMITS } from "../limits.js"
import { check, defineOp, fail, OpError, unsupported, type AnyOpDef, type ValueType } from "../op.js"
import { scalar, type Tensor } from "../tensor.js"
import { declaredType, feedsOf, mergeTypes, ownDims, stackAxis, subgraphOutputTypes } from "./control-common.js"
import { scanOps } from "./control-scan.js"

/** A scalar (or one-element) condition or count input as a number. */
const scalarValue = (t: Tensor, what: string): number => {
  check(t.data.length === 1, () => `${what} must have one element, got shape [${t.shape.join(", ")}]`)
  return Number(t.data[0])
}

// ---------------------------------------------------------------------------------------------
// If

const ifAttrs = attrs({ then_branch: A.graph(), else_branch: A.graph() })

const If = defineOp({
  attrs: ifAttrs,
  inputs: [1, 1],
  outputs: [1, Infinity],
  kind: "opaque",
  infer: (ctx) => {
    const { then_branch: t, else_branch: e } = ctx.attrs
    check(t.outputs.length === e.outputs.length, () => `then_branch gives ${t.outputs.length} outputs, else_branch ${e.outputs.length}`)
    check(ctx.outputs <= t.outputs.length, () => `the node declares ${ctx.outputs} outputs, the branches give ${t.outputs.length}`)
    const cond = ctx.values[0]
    if (cond) {
      const taken = subgraphOutputTypes(ctx, scalarValue(cond, "cond") ? t : e, [])
      return taken.map((x, k) => mergeTypes(x, x, `${ctx.node}.out${k}`, `output ${k} of the taken branch`))
    }
    // A branch that is ill-typed on these inputs (e.g. the 3-D path of an op given 2-D data) cannot
    // be the one that runs: the outputs are then the other branch's. A branch whose types are
    // merely unknown (unsupported) still might, so that error stands.
    const errors: unknown[] = []
    const typed = [t, e].flatMap((g) => {
      try {
        return [subgraphOutputTypes(ctx, g, [])]
      } catch (error) {
        if (!(error instanceof OpError || error instanceof NodeError)) throw error
        errors.push(error)
        return []
      }
    })
    if (typed.length === 0) throw errors[0]
    const [x, y = x] = typed
    return t.outputs.map((_, k) => mergeTypes(x[k], y[k], `${ctx.node}.out${k}`, `output ${k} of If`))
  },
  kernel: (ctx) => {
    const cond = ctx.inputs[0] ?? fail("cond is required")
    const branch = scalarValue(cond, "cond") ? ctx.attrs.then_branch : ctx.attrs.else_branch
    return ctx.runSubgraph(branch, new Map())
  },
})

// ---------------------------------------------------------------------------------------------
// Loop: inputs (M, cond, v_initial...); body (iter_num, cond_in, v_in...) → (cond_out, v_out...,
// scan_out...); outputs (v_final..., scan_outputs stacked along a new first axis)

const loopAttrs = attrs({ body: A.graph() })

/** The counts of loop-carried values (N) and scan outputs (K), checked against the body. */
const loopArity = (body: { inputs: readonly unknown[]; outputs: readonly unknown[] }, inputs: number) => {
  const N = inputs - 2
  check(N >= 0, "Loop needs the M and cond inputs (either may be empty)")
  check(body.inputs.length === N + 2, () => `the body declares ${body.inputs.length} inputs, expected ${N + 2} (iteration number, condition, ${N} loop-carried values)`)
  const K = body.outputs.length - 1 - N
  check(K >= 0, () => `the body declares ${body.outputs.length} outputs, expected at least ${N + 1} (condition, ${N} loop-carried values)`)
  return { N, K }
}

const Loop = defineOp({
  attrs: loopAttrs,
  inputs: [2, Infinity],
  outputs: [1, Infinity],
  kind: "opaque",
  infer: (ctx) => {
    const body = ctx.attrs.body
    const { N, K } = loopArity(body, ctx.inputs.length)
    const initial = Array.from({ length: N }, (_, k) => ctx.inputs[2 + k] ?? fail(`loop-carried input ${k} is required`))
    const counters: ValueType[] = [
      { dtype: "int64", shape: [] },
      { dtype: "bool", shape: [] },
    ]
    // loop-carried types to a fixed point: a value is its initial one or any iteration's output
    let carried = initial
    let outs = subgraphOutputTypes(ctx, body, [...counters, ...carried])
    for (let pass = 0; pass < 4; pass++) {
      const next = initial.map((t, k) => mergeTypes(t, outs[1 + k], `${ctx.node}.out${k}`, `loop-carried value ${k}`))
      const same = next.every((t, k) => t.shape.length === carried[k].shape.length && t.shape.every((d, i) => d === carried[k].shape[i]))
      carried = next
      if (same) break
      outs = subgraphOutputTypes(ctx, body, [...counters, ...carried])
    }
    // the trip count is M when it is a constant and no condition can stop the loop early
    const M = ctx.values[0]
    const trips = M && ctx.inputs[1] === undefined ? Math.max(0, scalarValue(M, "M")) : `${ctx.node}.trip_count`
    const scans = Array.from({ length: K }, (_, k): ValueType => {
      const t = outs[1 + N + k] ?? unsupported(`scan output ${k} of the body has no declared type, and its type cannot be inferred here`)
      return { dtype: t.dtype, shape: [trips, ...ownDims(t.shape, `${ctx.node}.out${N + k}`)] }
    })
    return [...carried, ...scans]
  },
  kernel: (ctx) => {
    const body = ctx.attrs.body
    const { N, K } = loopArity(body, ctx.inputs.length)
    const [M, condIn] = ctx.inputs
    check(M !== undefined || condIn !== undefined, "Loop has neither M nor cond, so it never terminates")
    const trips = M ? scalarValue(M, "M") : Infinity
    // a for-loop's whole cost is known before it starts: refuse one past the interpreter's limit
    // at once (a loop with a condition is charged as it runs, by runSubgraph)
    const work = trips * (1 + body.nodes.length)
    check(
      condIn !== undefined || work <= LIMITS.subgraphSteps,
      () => `trip count ${trips} times a body of ${body.nodes.length} nodes is ${work.toLocaleString("en-US")} steps, over the interpreter's limit of ${LIMITS.subgraphSteps.toLocaleString("en-US")}`,
    )
    let cond = condIn ? scalarValue(condIn, "cond") !== 0 : true
    let values = ctx.inputs.slice(2).map((v, k) => v ?? fail(`loop-carried input ${k} is required`))
    const scans: Tensor[][] = Array.from({ length: K }, () => [])
    for (let i = 0; i < trips && cond; i++) {
      const feeds = feedsOf(body.inputs, [scalar("int64", i), scalar("bool", cond ? 1 : 0), ...values], "the Loop body")
      const outs = ctx.runSubgraph(body, feeds)
      // without a cond input the loop is a for-loop: the body's condition is ignored
      if (condIn) cond = scalarValue(outs[0], "the body's condition output") !== 0
      values = outs.slice(1, 1 + N)
      for (let k = 0; k < K; k++) scans[k].push(outs[1 + N + k])
    }
    return [...values, ...scans.map((parts, k) => stackAxis(parts, 0, `scan output ${k}`, declaredType(body.outputs[1 + N + k])))]
  },
})

export const controlOps = { If, Loop, ...scanOps } satisfies Record<string, AnyOpDef>
