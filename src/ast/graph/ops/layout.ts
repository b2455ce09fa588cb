// Tessera's own ops (domain "tessera"), introduced by graph passes rather than read from ONNX:
// layout transforms between NCHW and the blocked NCHW{c}c layout (and from one block to another), and convolution in blocked
// layout (TVM's conv2d_NCHWc: data NCHW[i]c, kernel OIHW[i]i[o]o, output NCHW[o]c), and pooling in
// blocked layout (PoolNCHWc: MaxPool or AveragePool over the spatial dims of NCHW[c]c), and a
// dense layer over a column-panel packed weight (DensePack: TVM's dense_pack, weight [N/b, K, b]),
// and a matrix product of many rows over one (MatMulPacked: the panels its register tile's width).
import { A, attr, attrs, type AttrValue } from "../attrs.js"
import { allocate } from "../dtype.js"
import { deferred, elementOf, kernelSource, packBlockInto, pendingRecipe } from "../deferred.js"
import { check, defineOp, fail, type AnyOpDef, type Dim } from "../op.js"
import { tensor, type Tensor } from "../tensor.js"
import { convOps } from "./nn-conv.js"
import { matmulOps } from "./nn-matmul.js"
import { poolOps } from "./nn-pool.js"
import { req } from "./util.js"

/** The plain Conv and Gemm the blocked ops compute with (the registry's entries, from their own tables). */
const plainConv: AnyOpDef = convOps.Conv
const plainGemm: AnyOpDef = matmulOps.Gemm
const plainMatMul: AnyOpDef = matmulOps.MatMul

/** "NCHW" → 0, "NCHW16c" → 16. */
export const blockOf = (layout: string): number => {
  if (layout === "NCHW") return 0
  const m = /^NCHW(\d+)c$/.exec(layout)
  if (!m) return fail(`layout '${layout}' is not NCHW or NCHW{n}c`)
  return Number(m[1])
}

/**
 * [N, C, H, W] → [N, ⌈C/b⌉, H, W, b]. Where b does not divide C the last block's lanes past C are
 * `fill` (0 unless asked: the padded lanes a blocked op computes on stay zero).
 */
export const packNCHWc = (t: Tensor, b: number, fill = 0): Tensor => {
  const [N, C, H, W] = t.shape
  const CB = Math.ceil(C / b)
  const out = allocate(t.dtype, N * CB * H * W * b)
  if (fill !== 0) out.fill(fill as never)
  const HW = H * W
  for (let n = 0; n < N; n++)
    for (let c = 0; c < C; c++) {
      const cb = Math.floor(c / b)
      const ci = c % b
      const src = (n * C + c) * HW
      const dst = ((n * CB + cb) * HW) * b + ci
      for (let s = 0; s < HW; s++) out[dst + s * b] = t.data[src + s]
    }
  return tensor(t.dtype, [N, CB, H, W, b], out)
}

/** [N, C/b, H, W, b] → [N, C, H, W], the lanes past `channels` (⌈channels/b⌉ = C/b) dropped. */
export const unpackNCHWc = (t: Tensor, channels?: number): Tensor => {
  const [N, CB, H, W, b] = t.shape
  const C = channels ?? CB * b
  check(Math.ceil(C / b) === CB, `${C} channels do not fill ${CB} blocks of ${b}`)
  const out = allocate(t.dtype, N * C * H * W)
  const HW = H * W
  for (let n = 0; n < N; n++)
    for (let c = 0; c < C; c++) {
      const src = ((n * CB + Math.floor(c / b)) * HW) * b + (c % b)
      const dst = (n * C + c) * HW
      for (let s = 0; s < HW; s++) out[dst + s] = t.data[src + s * b]
    }
  return tensor(t.dtype, [N, C, H, W], out)
}

/**
 * OIHW → OIHW[ib]i[ob]o: [⌈O/ob⌉, ⌈I/ib⌉, KH, KW, ib, ob], the filters and input channels past O
 * and I zero (a padded output channel computes 0; a padded input channel adds nothing). Deferred
 * (deferred.ts): computed when first read, or read through block by block by the Winograd
 * transform; a pending BatchNorm fold of `w` is read through in turn, so the chain writes one array.
 */
export const packKernel = (w: Tensor, ib: number, ob: number): Tensor => {
  const [O, I, KH, KW] = w.shape
  const [OB, IB] = [Math.ceil(O / ob), Math.ceil(I / ib)]
  const block = KH * KW * ib * ob
  return deferred(w.dtype, [OB, IB, KH, KW, ib, ob], { kind: "packed-kernel", source: w, ib, ob }, {
    // blocks (oo, ii) start / block onwards, each `block` values
    fillRange: (start, out) => {
      const { src, scale } = kernelSource(w)
      for (let b = start / block, at = 0; at < out.length; b++, at += block) packBlockInto(src, scale, w.shape, ib, ob, Math.floor(b / IB), b % IB, out, at)
    },
    unit: block,
    // j = ((((oo·IB + ii)·KH + kh)·KW + kw)·ib + i)·ob + o
    element: (j) => {
      const [o, i, kw, kh] = [j % ob, Math.floor(j / ob) % ib, Math.floor(j / (ob * ib)) % KW, Math.floor(j / (ob * ib * KW)) % KH]
      const [ii, oo] = [Math.floor(j / (ob * ib * KW * KH)) % IB, Math.floor(j / (ob * ib * KW * KH * IB))]
      const [oc, ic] = [oo * ob + o, ii * ib + i]
      return oc < O && ic < I ? elementOf(w, ((oc * I + ic) * KH + kh) * KW + kw) : 0
    },
  })
}

export const unpackKernel = (w: Tensor): Tensor => {
  const [OB, IB, KH, KW, ib, ob] = w.shape
  const O = OB * ob
  const I = IB * ib
  const out = allocate(w.dtype, w.data.length)
  let k = 0
  for (let oo = 0; oo < OB; oo++)
    for (let ii = 0; ii < IB; ii++)
      for (let kh = 0; kh < KH; kh++)
        for (let kw = 0; kw < KW; kw++)
          for (let i = 0; i < ib; i++)
            for (let o = 0; o < ob; o++) out[(((oo * ob + o) * I + ii * ib + i) * KH + kh) * KW + kw] = w.data[k++]
  return tensor(w.dtype, [O, I, KH, KW], out)
}

/**
 * A dense weight [K, N] → column panels [ceil(N/b), K, b]: panel p holds columns p·b … p·b+b-1 of
 * every row in order (the last panel zero-padded), so a tile of panels reads the weights as a few
 * sequential streams instead of a short stretch of every row. Deferred (deferred.ts): computed when
 * read, or by the artifact straight into its constants, a panel at a time; a pending Gemm fold of
 * `w` (scaledMatrix: alpha, a transpose) is read through, so the chain writes one array.
 */
export const packDense = (w: Tensor, b: number): Tensor => {
  check(w.shape.length === 2 && b >= 1, `a dense weight must be 2-D, got [${w.shape.join(", ")}]`)
  const [K, N] = w.shape
  const P = Math.ceil(N / b)
  return deferred(w.dtype, [P, K, b], { kind: "dense-panels", source: w, b }, {
    // panels start / (K·b) onwards, each row a run of up to b columns (the padding zero)
    fillRange: (start, out) => {
      const fold = pendingRecipe(w)
      const through = fold?.kind === "scaled-matrix" ? fold : undefined
      const src = through ? through.source.data : w.data
      out.fill(0)
      for (let p = start / (K * b), at = 0; at < out.length; p++, at += K * b) {
        const [n0, width] = [p * b, Math.min(b, N - p * b)]
        if (!through) for (let k = 0; k < K; k++) for (let j = 0, from = k * N + n0; j < width; j++) out[at + k * b + j] = src[from + j]
        // column n of the folded weight: row n of a transposed source (contiguous in k), else column n
        else if (through.transpose) for (let j = 0; j < width; j++) for (let k = 0, from = (n0 + j) * K; k < K; k++) out[at + k * b + j] = src[from + k] * through.alpha
        else for (let k = 0; k < K; k++) for (let j = 0, from = k * N + n0; j < width; j++) out[at + k * b + j] = src[from + j] * through.alpha
      }
    },
    unit: K * b,
    element: (q) => {
      const [j, k, p] = [q % b, Math.floor(q / b) % K, Math.floor(q / (b * K))]
      return p * b + j < N ? elementOf(w, k * N + p * b + j) : 0
    },
  })
}

/** Whether n columns fill P panels of b: all but the last whole, the last at least one column. */
const fillsPanels = (n: number, P: number, b: number): boolean => n <= P * b && n > (P - 1) * b

/** Column panels [P, K, b] → the dense weight [K, n] (n ≤ P·b: the padding dropped). */
export const unpackDense = (w: Tensor, n: number): Tensor => {
  const [P, K, b] = w.shape
  check(fillsPanels(n, P, b), `${n} columns do not fill ${P} panels of ${b}`)
  const out = allocate(w.dtype, K * n)
  for (let k = 0; k < K; k++)
    for (let j = 0; j < n; j++) out[k * n + j] = w.data[(Math.floor(j / b) * K + k) * b + (j % b)]
  return tensor(w.dtype, [K, n], out)
}

/** `channels`: an NCHW value's channel count where the block does not divide it (0: blocks × block). */
const layoutAttrs = attrs({ src_layout: A.str(), dst_layout: A.str(), channels: A.int(0) })

const convAttrs = attrs({
  in_block: A.int(),
  out_block: A.int(),
  group: A.int(1),
  strides: A.optInts(),
  pads: A.optInts(),
  dilations: A.optInts(),
  kernel_shape: A.optInts(),
  auto_pad: A.str("NOTSET"),
})

const poolAttrs = attrs({
  /** The plain pooling op: MaxPool or AveragePool. */
  pool: A.oneOf(["MaxPool", "AveragePool"] as const, "MaxPool"),
  auto_pad: A.str("NOTSET"),
  kernel_shape: A.optInts(),
  strides: A.optInts(),
  pads: A.optInts(),
  dilations: A.optInts(),
  ceil_mode: A.int(0),
  count_include_pad: A.int(0),
})
const plainPool = (name: "MaxPool" | "AveragePool"): AnyOpDef => poolOps[name]

/** The plain MaxPool / AveragePool attributes (with their codec's defaults) of a blocked pool. */
const poolAttrsFor = (a: { pool: "MaxPool" | "AveragePool"; auto_pad: string; kernel_shape?: readonly number[]; strides?: readonly number[]; pads?: readonly number[]; dilations?: readonly number[]; ceil_mode: number; count_include_pad: number }) =>
  plainAttrs(plainPool(a.pool), a.pool, {
    auto_pad: a.auto_pad,
    ceil_mode: a.ceil_mode,
    ...(a.pool === "AveragePool" ? { count_include_pad: a.count_include_pad } : {}),
    kernel_shape: a.kernel_shape,
    strides: a.strides,
    pads: a.pads,
    dilations: a.dilations,
  })

/**
 * A blocked op's attributes decoded by the plain op's codec (with its defaults): numbers become
 * ints, strings strings, arrays ints; undefined ones are left out.
 */
const plainAttrs = (def: AnyOpDef, name: string, a: Readonly<Record<string, string | number | readonly number[] | undefined>>): unknown => {
  const raw: Record<string, AttrValue> = {}
  for (const [k, v] of Object.entries(a)) {
    if (v === undefined) continue
    raw[k] = typeof v === "string" ? attr.str(v) : typeof v === "number" ? attr.int(v) : attr.ints(v)
  }
  const decoded = def.attrs.decode(raw)
  if (decoded._tag === "Left") return fail(`blocked ${name} attributes do not decode as ${name} attributes`)
  return decoded.right as unknown
}

const blockedDims = (shape: readonly Dim[], b: number): Dim[] => {
  const [N, C, H, W] = shape
  return [N, typeof C === "number" ? Math.ceil(C / b) : C, H, W, b]
}

export const layoutOps = {
  LayoutTransform: defineOp({
    attrs: layoutAttrs,
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "injective",
    infer: (ctx) => {
      const x = ctx.inputs[0]
      if (!x) return fail("input 0 is required")
      const src = blockOf(ctx.attrs.src_layout)
      const dst = blockOf(ctx.attrs.dst_layout)
      if (src === 0 && dst > 0) return [{ dtype: x.dtype, shape: blockedDims(x.shape, dst) }]
      if (src > 0 && dst === 0) {
        const [N, CB, H, W, b] = x.shape
        const C = ctx.attrs.channels
        if (C > 0 && typeof CB === "number" && Math.ceil(C / src) !== CB) return fail(`${C} channels do not fill ${CB} blocks of ${src}`)
        return [{ dtype: x.dtype, shape: [N, C > 0 ? C : typeof CB === "number" && typeof b === "number" ? CB * b : `${ctx.node}.C`, H, W] }]
      }
      // one block to another (a conv of blocks of 16 feeding a grouped conv of blocks of 8); with
      // `channels`, the lanes past them dropped from the source and zero in the destination
      if (src > 0 && dst > 0 && src !== dst) {
        const [N, CB, H, W] = x.shape
        if (typeof CB !== "number") return fail(`the channel blocks ${CB} are not static`)
        const C = ctx.attrs.channels > 0 ? ctx.attrs.channels : CB * src
        if (Math.ceil(C / src) !== CB) return fail(`${C} channels do not fill ${CB} blocks of ${src}`)
        if (ctx.attrs.channels === 0 && C % dst !== 0) return fail(`${C} channels do not split into blocks of ${dst}`)
        return [{ dtype: x.dtype, shape: [N, Math.ceil(C / dst), H, W, dst] }]
      }
      return fail(`transform ${ctx.attrs.src_layout} → ${ctx.attrs.dst_layout} is not supported`)
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const src = blockOf(ctx.attrs.src_layout)
      const dst = blockOf(ctx.attrs.dst_layout)
      if (src === 0 && dst > 0) return [packNCHWc(x, dst)]
      if (src > 0 && dst === 0) return [unpackNCHWc(x, ctx.attrs.channels > 0 ? ctx.attrs.channels : undefined)]
      if (src > 0 && dst > 0 && src !== dst) return [packNCHWc(unpackNCHWc(x, ctx.attrs.channels > 0 ? ctx.attrs.channels : undefined), dst)]
      return fail(`transform ${ctx.attrs.src_layout} → ${ctx.attrs.dst_layout} is not supported`)
    },
  }),
  ConvNCHWc: defineOp({
    attrs: convAttrs,
    inputs: [2, 3],
    outputs: [1, 1],
    kind: "out-elementwise-fusable",
    infer: (ctx) => {
      const x = ctx.inputs[0]
      const w = ctx.inputs[1]
      if (!x || !w) return fail("inputs 0 and 1 are required")
      if (w.shape.length !== 6) return fail(`input 1 must be a blocked kernel [O/ob, I/ib, KH, KW, ib, ob] (rank 6), got rank ${w.shape.length}`)
      const plain = plainConv.infer({
        ...ctx,
        attrs: convAttrsFor(ctx.attrs),
        inputs: [
          { dtype: x.dtype, shape: [x.shape[0], Number(x.shape[1]) * ctx.attrs.in_block, x.shape[2], x.shape[3]] },
          { dtype: w.dtype, shape: [Number(w.shape[0]) * ctx.attrs.out_block, Number(w.shape[1]) * Number(w.shape[4]), w.shape[2], w.shape[3]] },
          ctx.inputs[2],
        ],
        values: [],
      })[0]
      return [{ dtype: plain.dtype, shape: blockedDims(plain.shape, ctx.attrs.out_block) }]
    },
    kernel: (ctx) => {
      const x = unpackNCHWc(req(ctx.inputs, 0))
      const w = unpackKernel(req(ctx.inputs, 1))
      const [y] = plainConv.kernel({ ...ctx, attrs: convAttrsFor(ctx.attrs), inputs: [x, w, ctx.inputs[2]] })
      return [packNCHWc(y, ctx.attrs.out_block)]
    },
  }),
  PoolNCHWc: defineOp({
    attrs: poolAttrs,
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "out-elementwise-fusable",
    infer: (ctx) => {
      const x = ctx.inputs[0]
      if (!x) return fail("input 0 is required")
      if (x.shape.length !== 5 || typeof x.shape[4] !== "number") return fail(`input 0 must be NCHW{c}c (rank 5), got rank ${x.shape.length}`)
      const b = x.shape[4]
      const C = typeof x.shape[1] === "number" ? x.shape[1] * b : x.shape[1]
      const plain = plainPool(ctx.attrs.pool).infer({ ...ctx, attrs: poolAttrsFor(ctx.attrs), inputs: [{ dtype: x.dtype, shape: [x.shape[0], C, x.shape[2], x.shape[3]] }], outputs: 1, values: [] })[0]
      return [{ dtype: plain.dtype, shape: blockedDims(plain.shape, b) }]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const [y] = plainPool(ctx.attrs.pool).kernel({ ...ctx, attrs: poolAttrsFor(ctx.attrs), inputs: [unpackNCHWc(x)], outputs: 1 })
      return [packNCHWc(y, x.shape[4])]
    },
  }),
  /** Y = A · unpack(B) + C: A [M, K], B column panels [P, K, b], C (optional) broadcast to [M, n]. */
  DensePack: defineOp({
    attrs: attrs({ n: A.int() }),
    inputs: [2, 3],
    outputs: [1, 1],
    kind: "out-elementwise-fusable",
    infer: (ctx) => {
      const a = ctx.inputs[0]
      const w = ctx.inputs[1]
      if (!a || !w) return fail("inputs 0 and 1 are required")
      if (w.shape.length !== 3 || !w.shape.every((d) => typeof d === "number")) return fail(`input 1 must be static column panels [P, K, b], got rank ${w.shape.length}`)
      const [P, K, b] = w.shape as number[]
      const n = ctx.attrs.n
      if (!fillsPanels(n, P, b)) return fail(`n = ${n} does not fill ${P} panels of ${b} columns`)
      return plainGemm.infer({ ...ctx, attrs: plainGemmAttrs(), inputs: [a, { dtype: w.dtype, shape: [K, n] }, ctx.inputs[2]], values: [] })
    },
    kernel: (ctx) => {
      const w = unpackDense(req(ctx.inputs, 1), ctx.attrs.n)
      return plainGemm.kernel({ ...ctx, attrs: plainGemmAttrs(), inputs: [ctx.inputs[0], w, ctx.inputs[2]] })
    },
  }),
  /**
   * Y = A · unpack(B): A [..., M, K] (batched: its leading dims are Y's), B column panels [P, K, w]
   * (the constant weight [K, n] re-laid by the layout rewrite, w its register tile's columns).
   */
  MatMulPacked: defineOp({
    attrs: attrs({ n: A.int() }),
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "out-elementwise-fusable",
    infer: (ctx) => {
      const a = ctx.inputs[0]
      const w = ctx.inputs[1]
      if (!a || !w) return fail("inputs 0 and 1 are required")
      if (a.shape.length < 2) return fail(`input 0 must be [..., M, K] (rank 2 or more), got rank ${a.shape.length}`)
      if (w.shape.length !== 3 || !w.shape.every((d) => typeof d === "number")) return fail(`input 1 must be static column panels [P, K, w], got rank ${w.shape.length}`)
      const [P, K, b] = w.shape as number[]
      const n = ctx.attrs.n
      if (!fillsPanels(n, P, b)) return fail(`n = ${n} does not fill ${P} panels of ${b} columns`)
      return plainMatMul.infer({ ...ctx, attrs: plainAttrs(plainMatMul, "MatMul", {}), inputs: [a, { dtype: w.dtype, shape: [K, n] }], values: [] })
    },
    kernel: (ctx) => {
      const w = unpackDense(req(ctx.inputs, 1), ctx.attrs.n)
      return plainMatMul.kernel({ ...ctx, attrs: plainAttrs(plainMatMul, "MatMul", {}), inputs: [ctx.inputs[0], w] })
    },
  }),
} satisfies Record<string, AnyOpDef>

/** The plain Gemm attributes of a packed dense layer: no transposes, alpha and beta 1 (the codec's defaults). */
const plainGemmAttrs = () => plainAttrs(plainGemm, "Gemm", {})

/** The plain Conv attributes (with the Conv codec's defaults) of a blocked conv. */
const convAttrsFor = (a: { group: number; strides?: readonly number[]; pads?: readonly number[]; dilations?: readonly number[]; kernel_shape?: readonly number[]; auto_pad: string }) =>
  plainAttrs(plainConv, "Conv", { group: a.group, auto_pad: a.auto_pad, strides: a.strides, pads: a.pads, dilations: a.dilations, kernel_shape: a.kernel_shape })
