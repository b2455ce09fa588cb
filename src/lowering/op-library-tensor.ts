// Injective computes that move data: Reshape / Flatten / Squeeze / Unsqueeze, Transpose, Concat,
// LayoutTransform (NCHW ↔ NCHW{c}c), Pad (constant / edge / reflect / wrap with constant pads),
// Slice (constant starts/ends/axes/steps, negative steps too), Gather / GatherElements (their
// indices read in the index expression), Expand, Tile, DepthToSpace and SpaceToDepth. Each
// matches its reference kernel in src/ast/graph/ops/tensor-*.ts.
import { add, c, cast, eq, floordiv, floormod, ge, and, le, lt, max, min, mul, select, sub, type Expr } from "../ast/te/expr.js"
import { at, compute, type TeTensor } from "../ast/te/tensor.js"
import { bread, constInts, inp, ints, none, normAxis, num, shapeOf, type OpCompute, type OpComputeCtx } from "./op-library-common.js"
import { castExpr } from "./op-library-math.js"

const axesOf = (axes: readonly number[] | undefined, n: number, rank: number): number[] =>
  (axes ?? Array.from({ length: n }, (_, i) => i)).map((a) => normAxis(a, rank))

const pad: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const rank = x.shape.length
  const mode = (ctx.attrs.mode as string | undefined) ?? "constant"
  const attr = ints(ctx.attrs.pads) ?? ints(ctx.attrs.paddings)
  const padsList = attr ?? constInts(ctx, 1, "pads") ?? none("no pads")
  const axes = axesOf(attr ? undefined : constInts(ctx, 3, "axes"), padsList.length / 2, rank)
  const begin = new Array<number>(rank).fill(0)
  axes.forEach((a, k) => (begin[a] = padsList[k]))
  const out = shapeOf(ctx.outputs[0])
  const cv = ctx.inputs[2]
  const fill: Expr = cv
    ? cv.shape.length === 0 ? at(cv) : at(cv, ...cv.shape.map(() => c(0)))
    : castExpr(c(attr ? num(ctx.attrs.value, 0) : 0, "float64"), x.dtype)
  return [
    compute(ctx.name(), out, (...o) => {
      const idx: Expr[] = []
      let inside: Expr = c(1, "bool")
      for (let k = 0; k < rank; k++) {
        const dim = x.shape[k]
        const i = sub(o[k], c(begin[k]))
        if (begin[k] === 0 && out[k] === dim) {
          idx.push(o[k])
          continue
        }
        switch (mode) {
          case "constant":
            idx.push(i)
            inside = and(inside, and(ge(i, c(0)), lt(i, c(dim))))
            break
          case "edge":
            idx.push(min(max(i, c(0)), c(dim - 1)))
            break
          case "wrap":
            idx.push(floormod(i, c(dim)))
            break
          case "reflect": {
            if (dim === 1) {
              idx.push(c(0))
              break
            }
            const p = 2 * (dim - 1)
            const m = floormod(i, c(p))
            idx.push(select(lt(m, c(dim)), m, sub(c(p), m)))
            break
          }
          default:
            return none(`Pad mode '${mode}'`)
        }
      }
      return mode === "constant" ? select(inside, at(x, ...idx), cast(x.dtype, fill)) : at(x, ...idx)
    }, x.dtype),
  ]
}

/** The first index of a slice of a `dim`-long axis, clamped as the reference's sliceRange (the output type gives the length). */
const sliceFirst = (dim: number, start: number, step: number): number => {
  const s = start < 0 ? start + dim : start
  return step > 0 ? Math.min(Math.max(s, 0), dim) : Math.min(Math.max(s, 0), dim - 1)
}

const slice: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const rank = x.shape.length
  const attrStarts = ints(ctx.attrs.starts)
  const starts = attrStarts ?? constInts(ctx, 1, "starts") ?? none("no starts")
  // ends only shape the output, whose type is known
  if (!(attrStarts ? ints(ctx.attrs.ends) : constInts(ctx, 2, "ends"))) return none("no ends")
  const axes = axesOf(attrStarts ? ints(ctx.attrs.axes) : constInts(ctx, 3, "axes"), starts.length, rank)
  const steps = (attrStarts ? undefined : constInts(ctx, 4, "steps")) ?? new Array<number>(starts.length).fill(1)
  const first = new Array<number>(rank).fill(0)
  const step = new Array<number>(rank).fill(1)
  axes.forEach((a, k) => {
    if (steps[k] === 0) none("slice step 0")
    first[a] = sliceFirst(x.shape[a], starts[k], steps[k])
    step[a] = steps[k]
  })
  return [compute(ctx.name(), shapeOf(ctx.outputs[0]), (...o) => at(x, ...o.map((v, k) => add(mul(v, c(step[k])), c(first[k])))), x.dtype)]
}

/**
 * Split: one compute per output, each a run of the input along `axis` (default 0). The runs'
 * lengths are the outputs' inferred extents along the axis (from `split`, `num_outputs` or equal
 * parts, as type inference read them), laid end to end. A multi-output op (MULTI_OUTPUT): the
 * computes are the outputs in order.
 */
const split: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const axis = normAxis(num(ctx.attrs.axis, 0), x.shape.length)
  let offset = 0
  return ctx.outputs.map((o, k) => {
    const shape = shapeOf(o)
    const first = offset
    offset += shape[axis]
    return compute(ctx.name(`part${k}`), shape, (...i) => at(x, ...i.map((v, d) => (d === axis && first !== 0 ? add(v, c(first)) : v))), x.dtype)
  })
}

/**
 * An index read from a tensor of indices, negative values counting from the end of a `dim`-long
 * axis, clamped into [0, dim): the executor refuses an index out of range before the kernel runs
 * (src/lowering/index-checks.ts); the clamp keeps the kernel inside its buffers where nothing
 * checked (the standalone library called directly).
 */
export const indexAt = (t: TeTensor, idx: readonly Expr[], dim: number): Expr => {
  const v = cast("int32", at(t, ...idx))
  return min(max(select(lt(v, c(0)), add(v, c(dim)), v), c(0)), c(dim - 1))
}

const gather: OpCompute = (ctx) => {
  const data = inp(ctx, 0)
  const indices = inp(ctx, 1)
  const r = data.shape.length
  const axis = normAxis(num(ctx.attrs.axis, 0), r)
  const q = indices.shape.length
  return [
    compute(ctx.name(), shapeOf(ctx.outputs[0]), (...o) => {
      const j = o.slice(axis, axis + q)
      return at(data, ...o.slice(0, axis), indexAt(indices, j, data.shape[axis]), ...o.slice(axis + q))
    }, data.dtype),
  ]
}

const gatherElements: OpCompute = (ctx) => {
  const data = inp(ctx, 0)
  const indices = inp(ctx, 1)
  const axis = normAxis(num(ctx.attrs.axis, 0), data.shape.length)
  return [
    compute(ctx.name(), shapeOf(ctx.outputs[0]), (...o) =>
      at(data, ...o.map((v, k) => (k === axis ? indexAt(indices, o, data.shape[axis]) : v))), data.dtype),
  ]
}

const expand: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  return [compute(ctx.name(), shapeOf(ctx.outputs[0]), (...o) => bread(x, o), x.dtype)]
}

const tile: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  return [compute(ctx.name(), shapeOf(ctx.outputs[0]), (...o) => at(x, ...o.map((v, k) => (x.shape[k] === 1 ? c(0) : floormod(v, c(x.shape[k]))))), x.dtype)]
}

const depthToSpace: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  if (x.shape.length !== 4) return none(`DepthToSpace of rank ${x.shape.length}`)
  const bs = num(ctx.attrs.blocksize, 0)
  const cc = x.shape[1] / (bs * bs)
  const dcr = (ctx.attrs.mode as string | undefined) !== "CRD"
  return [
    compute(ctx.name(), shapeOf(ctx.outputs[0]), (n, ch, y, xx) => {
      const b1 = floormod(y, c(bs))
      const b2 = floormod(xx, c(bs))
      const ic = dcr ? add(mul(add(mul(b1, c(bs)), b2), c(cc)), ch) : add(mul(ch, c(bs * bs)), add(mul(b1, c(bs)), b2))
      return at(x, n, ic, floordiv(y, c(bs)), floordiv(xx, c(bs)))
    }, x.dtype),
  ]
}

const spaceToDepth: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  if (x.shape.length !== 4) return none(`SpaceToDepth of rank ${x.shape.length}`)
  const bs = num(ctx.attrs.blocksize, 0)
  const C = x.shape[1]
  return [
    compute(ctx.name(), shapeOf(ctx.outputs[0]), (n, oc, y, xx) => {
      const b = floordiv(oc, c(C))
      return at(x, n, floormod(oc, c(C)), add(mul(y, c(bs)), floordiv(b, c(bs))), add(mul(xx, c(bs)), floormod(b, c(bs))))
    }, x.dtype),
  ]
}

/** Trilu: the upper (j − i ≥ k) or lower (j − i ≤ k) triangle of the last two dims, zeros elsewhere. */
const trilu: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const rank = x.shape.length
  if (rank < 2) return none(`Trilu of rank ${rank}`)
  const kt = ctx.inputs[1]
  const kc = ctx.node.inputs[1] ? ctx.constants[1] : undefined
  const known = kc && kc.length ? [Number(kc[0])] : undefined
  const upper = num(ctx.attrs.upper, 1) !== 0
  return [
    compute(ctx.name(), x.shape, (...i) => {
      const k = known ? c(known[0]) : kt ? cast("int32", kt.shape.length ? at(kt, ...kt.shape.map(() => c(0))) : at(kt)) : c(0)
      const d = sub(i[rank - 1], i[rank - 2])
      return select(upper ? ge(d, k) : le(d, k), at(x, ...i), cast(x.dtype, c(0)))
    }, x.dtype),
  ]
}

/** ConstantOfShape: the `value` attribute's one element (float32 0 by default) everywhere. */
const constantOfShape: OpCompute = (ctx) => {
  const value = ctx.attrs.value as { data: ArrayLike<number>; exact?: unknown } | undefined
  const dtype = ctx.outputs[0].dtype
  // an int64 / uint64 value a double does not hold (its `exact`): a literal would be its double
  if (value?.exact) return none("ConstantOfShape of an int64 value past 2^53 that a double does not hold (exact on the reference kernel)")
  const v = value ? Number(value.data[0]) : 0
  return [compute(ctx.name(), shapeOf(ctx.outputs[0]), () => c(v, dtype), dtype)]
}

/** EyeLike: ones on the k-th diagonal. */
const eyeLike: OpCompute = (ctx) => {
  const dtype = ctx.outputs[0].dtype
  const k = num(ctx.attrs.k, 0)
  return [compute(ctx.name(), shapeOf(ctx.outputs[0]), (i, j) => select(eq(sub(j, i), c(k)), c(1, dtype), c(0, dtype)), dtype)]
}

/** OneHot: `on` where the (truncated, from opset 11 wrapped) index equals the position on `axis`, else `off`. */
const oneHot: OpCompute = (ctx) => {
  const ind = inp(ctx, 0)
  const values = inp(ctx, 2)
  const out = shapeOf(ctx.outputs[0])
  const rank = ind.shape.length
  const a0 = num(ctx.attrs.axis, -1)
  const axis = a0 < 0 ? a0 + rank + 1 : a0
  const depth = out[axis]
  const dtype = ctx.outputs[0].dtype
  const vAt = (k: number) => at(values, ...(values.shape.length ? [c(k)] : []))
  return [
    compute(ctx.name(), out, (...o) => {
      const raw = cast("int32", at(ind, ...o.filter((_, q) => q !== axis)))
      const k = ctx.opset >= 11 ? select(lt(raw, c(0)), add(raw, c(depth)), raw) : raw
      return select(eq(k, o[axis]), vAt(1), vAt(0))
    }, dtype),
  ]
}

/** GatherND: the last dim of `indices` addresses data's dims after the batch_dims shared ones. */
const gatherND: OpCompute = (ctx) => {
  const data = inp(ctx, 0)
  const indices = inp(ctx, 1)
  const b = num(ctx.attrs.batch_dims, 0)
  const q = indices.shape.length
  const m = indices.shape[q - 1]
  return [
    compute(ctx.name(), shapeOf(ctx.outputs[0]), (...o) => {
      const lead = o.slice(0, q - 1)
      const picked = Array.from({ length: m }, (_, k) => indexAt(indices, [...lead, c(k)], data.shape[b + k]))
      return at(data, ...o.slice(0, b), ...picked, ...o.slice(q - 1))
    }, data.dtype),
  ]
}

/** Reshape-like ops: the output's flat index read back in the input's shape. */
const reshapeLike: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const out = shapeOf(ctx.outputs[0])
  return [
    compute(ctx.name(), out, (...i) => {
      let flat: Expr = c(0)
      out.forEach((d, k) => (flat = add(mul(flat, c(d)), i[k])))
      const idx: Expr[] = new Array(x.shape.length)
      let rest = flat
      for (let k = x.shape.length - 1; k >= 0; k--) {
        idx[k] = k === 0 ? rest : floormod(rest, c(x.shape[k]))
        rest = floordiv(rest, c(x.shape[k]))
      }
      return at(x, ...idx)
    }, x.dtype),
  ]
}

const transpose: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const rank = x.shape.length
  const perm = (ctx.attrs.perm as number[] | undefined) ?? Array.from({ length: rank }, (_, k) => rank - 1 - k)
  return [
    compute(ctx.name(), shapeOf(ctx.outputs[0]), (...i) => {
      const idx: Expr[] = new Array(rank)
      perm.forEach((p, k) => (idx[p] = i[k]))
      return at(x, ...idx)
    }, x.dtype),
  ]
}

const concat: OpCompute = (ctx) => {
  const xs = ctx.inputs.map((t, k) => t ?? none(`input ${k} is missing`))
  const out = shapeOf(ctx.outputs[0])
  const axis0 = num(ctx.attrs.axis, 0)
  const axis = axis0 < 0 ? axis0 + out.length : axis0
  return [
    compute(ctx.name(), out, (...i) => {
      let e: Expr | undefined
      let offset = 0
      const parts = xs.map((t) => {
        const start = offset
        offset += t.shape[axis]
        return { t, start }
      })
      // later parts take over from their start: select(i ≥ start, later, earlier)
      for (const { t, start } of parts) {
        const idx = i.map((v, k) => (k === axis ? sub(v, c(start)) : v))
        const read = at(t, ...idx)
        e = e ? select(ge(i[axis], c(start)), read, e) : read
      }
      return e!
    }, xs[0].dtype),
  ]
}

const layoutTransform: OpCompute = (ctx) => {
  const x = inp(ctx, 0)
  const out = shapeOf(ctx.outputs[0])
  if (out.length === 5 && x.shape.length === 5) {
    // one block to another: channel cb·b + ci of the output is channel (cb·b + ci) of the input;
    // where one block divides the other, the lane stays a sum of the output's lane (contiguous)
    const [a, b] = [x.shape[4], out[4]]
    // (padded: channel ch of the output is the input's below `channels`, zero past them)
    const C = num(ctx.attrs.channels, 0)
    if (C > 0 && (C % a !== 0 || C % b !== 0))
      return [compute(ctx.name(), out, (n, cb, y, xx, ci) => {
        const ch = add(mul(cb, c(b)), ci)
        return select(lt(ch, c(C)), at(x, n, floordiv(ch, c(a)), y, xx, floormod(ch, c(a))), castExpr(c(0, "float64"), x.dtype))
      }, x.dtype)]
    if (a % b === 0) return [compute(ctx.name(), out, (n, cb, y, xx, ci) => at(x, n, floordiv(cb, c(a / b)), y, xx, add(mul(floormod(cb, c(a / b)), c(b)), ci)), x.dtype)]
    if (b % a === 0) return [compute(ctx.name(), out, (n, cb, y, xx, ci) => at(x, n, add(mul(cb, c(b / a)), floordiv(ci, c(a))), y, xx, floormod(ci, c(a))), x.dtype)]
    return [compute(ctx.name(), out, (n, cb, y, xx, ci) => {
      const ch = add(mul(cb, c(b)), ci)
      return at(x, n, floordiv(ch, c(a)), y, xx, floormod(ch, c(a)))
    }, x.dtype)]
  }
  if (out.length === 5) {
    const b = out[4]
    const C = x.shape[1]
    // (the last block's lanes past C, where b does not divide C, are zero)
    return [compute(ctx.name(), out, (n, cb, y, xx, ci) => {
      const ch = add(mul(cb, c(b)), ci)
      return C % b === 0 ? at(x, n, ch, y, xx) : select(lt(ch, c(C)), at(x, n, ch, y, xx), castExpr(c(0, "float64"), x.dtype))
    }, x.dtype)]
  }
  const b = x.shape[4]
  return [compute(ctx.name(), out, (n, ch, y, xx) => at(x, n, floordiv(ch, c(b)), y, xx, floormod(ch, c(b))), x.dtype)]
}

export const TENSOR_MOVES: Record<string, OpCompute> = {
  Reshape: reshapeLike,
  Flatten: reshapeLike,
  Squeeze: reshapeLike,
  Unsqueeze: reshapeLike,
  Transpose: transpose,
  Concat: concat,
  LayoutTransform: layoutTransform,
  Pad: pad,
  Slice: slice,
  Split: split,
  Gather: gather,
  GatherElements: gatherElements,
  Expand: expand,
  Tile: tile,
  DepthToSpace: depthToSpace,
  SpaceToDepth: spaceToDepth,
  Trilu: trilu,
  ConstantOfShape: constantOfShape,
  EyeLike: eyeLike,
  OneHot: oneHot,
  GatherND: gatherND,
}

export type { OpComputeCtx }
