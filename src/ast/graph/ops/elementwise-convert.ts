// Ops that convert or pass values through: Cast / CastLike (every dtype of ours; string, float8,
// int4 and the other narrow types are unsupported), Clip (attribute bounds before opset 11, input
// bounds after), Identity and Dropout (inference: the input, with an all-true mask).
import * as t from "io-ts"
import { A, attrs } from "../attrs.js"
import {
  allocate,
  bf16BitsToNumber,
  f16BitsToNumber,
  numberToBF16Bits,
  numberToF16Bits,
  ONNX_DTYPE,
  ONNX_DTYPE_NAME,
  roundBF16,
  roundF16,
  type DType,
  type TypedArray,
} from "../dtype.js"
import { check, defineOp, fail, unsupported, type AnyOpDef } from "../op.js"
import { tensor, type Tensor } from "../tensor.js"
import { fast1, is64, mapUnary, storeOf, type Scalar1 } from "./elementwise-kernels.js"
import { inputType, req } from "./util.js"

// --- Cast --------------------------------------------------------------------------------------

/** Cast-1 names the target type as a string; from Cast-6 on it is a TensorProto.DataType code. */
const TYPE_CODES: Readonly<Record<string, number>> = {
  FLOAT: 1, UINT8: 2, INT8: 3, UINT16: 4, INT16: 5, INT32: 6, INT64: 7, STRING: 8, BOOL: 9,
  FLOAT16: 10, DOUBLE: 11, UINT32: 12, UINT64: 13, COMPLEX64: 14, COMPLEX128: 15, BFLOAT16: 16,
}

export const castTarget = (to: number | string): DType => {
  const code = typeof to === "string" ? (TYPE_CODES[to.toUpperCase()] ?? fail(`'to' = '${to}' names no ONNX element type`)) : to
  const dtype = ONNX_DTYPE[code]
  if (dtype) return dtype
  const name = ONNX_DTYPE_NAME[code]
  if (name === undefined || code === 0) return fail(`'to' = ${code} is not an ONNX element type`)
  return unsupported(`casting to ${name}: Tessera has no ${name} tensors`)
}

/**
 * Rounds a number to float16 / bfloat16 once. The dtype helpers round through float32, which can
 * round twice (a double just above a narrow halfway point lands on it, then ties to even): here the
 * neighbour on x's other side is checked, and values past the largest finite one overflow only at
 * its half-ulp.
 */
const roundNarrowOnce =
  (round: Scalar1, toBits: (x: number) => number, fromBits: (h: number) => number, maxFinite: number, overflowAt: number): Scalar1 =>
  (x) => {
    const r = round(x)
    if (r === x || x !== x || Math.fround(x) === x) return r
    if (!Number.isFinite(r)) return Math.abs(x) >= overflowAt ? r : Math.sign(x) * maxFinite
    const bits = toBits(r)
    const up = x > r
    const neg = (bits & 0x8000) !== 0
    const nb = (bits & 0x7fff) === 0 ? (up ? 0x0001 : 0x8001) : up !== neg ? bits + 1 : bits - 1
    const n = fromBits(nb)
    const dr = Math.abs(x - r)
    const dn = Math.abs(x - n)
    return dn < dr || (dn === dr && (nb & 1) === 0) ? n : r
  }

const toF16 = roundNarrowOnce(roundF16, numberToF16Bits, f16BitsToNumber, 65504, 65520)
const toBF16 = roundNarrowOnce(roundBF16, numberToBF16Bits, bf16BitsToNumber, (2 - 2 ** -7) * 2 ** 127, (2 - 2 ** -8) * 2 ** 127)

/** ONNX Cast: floats round to nearest even, integers truncate toward zero and wrap, bool is x ≠ 0 (NaN too). */
export const castTensor = (x: Tensor, to: DType): Tensor => {
  if (x.dtype === to) return x
  // values exact in float32 reach float16/bfloat16 with one rounding (the evaluator's)
  const wide = x.dtype === "float64" || x.dtype === "int32" || x.dtype === "uint32" || is64(x.dtype)
  const narrow: Scalar1 | undefined = !wide ? undefined : to === "float16" ? toF16 : to === "bfloat16" ? toBF16 : undefined
  if (narrow) return mapUnary(x, narrow, to)
  if (storeOf(to)) return mapUnary(x, (v) => v, to) // int64, uint64, bool: see storeOf
  const out = allocate(to, x.data.length)
  out.set(x.data) // converts as element stores do: round to float32, truncate and wrap integers
  return tensor(to, x.shape, out)
}

// `saturate` only concerns float8 targets, which are unsupported
const castAttrs = attrs({ to: t.union([A.int(), A.str()]), saturate: A.int(1) })

// --- Clip --------------------------------------------------------------------------------------

const FLT_MAX = 3.4028234663852886e38

/** Before opset 11 the bounds are attributes (from opset 6 defaulting to ±FLT_MAX); after, optional scalar inputs. */
export const clipBounds = (opset: number, at: { min?: number; max?: number }, inputs: readonly (Tensor | undefined)[]): [number, number] => {
  if (opset < 11) {
    const big = opset >= 6 ? FLT_MAX : Infinity
    return [at.min ?? -big, at.max ?? big]
  }
  const bound = (k: number, none: number) => {
    const b = inputs[k]
    if (!b) return none
    check(b.data.length === 1, () => `${k === 1 ? "min" : "max"} must be a scalar, got shape [${b.shape.join(", ")}]`)
    return b.data[0]
  }
  return [bound(1, -Infinity), bound(2, Infinity)]
}

// --- Dropout -----------------------------------------------------------------------------------

const dropoutAttrs = attrs({ ratio: A.float(0.5), is_test: A.int(0), seed: A.optInt() })

/**
 * Training mode is asked for by the training_mode input (opset 12 on). Opsets up to 6 had an
 * `is_test` attribute defaulting to 0; like other inference runtimes we run those in test mode.
 */
const dropoutTraining = (opset: number, inputs: readonly (Tensor | undefined)[]): { training: boolean; ratio: number } => {
  const mode = opset >= 12 ? inputs[2] : undefined
  const ratio = opset >= 12 && inputs[1] ? inputs[1].data[0] : 0.5
  return { training: mode !== undefined && mode.data[0] !== 0, ratio }
}

export const convertOps = {
  Cast: defineOp({
    attrs: castAttrs,
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "elementwise",
    infer: (ctx) => [{ dtype: castTarget(ctx.attrs.to), shape: inputType(ctx, 0).shape }],
    kernel: (ctx) => [castTensor(req(ctx.inputs, 0), castTarget(ctx.attrs.to))],
  }),
  CastLike: defineOp({
    attrs: attrs({ saturate: A.int(1) }),
    inputs: [2, 2],
    outputs: [1, 1],
    kind: "elementwise",
    infer: (ctx) => [{ dtype: inputType(ctx, 1).dtype, shape: inputType(ctx, 0).shape }],
    kernel: (ctx) => [castTensor(req(ctx.inputs, 0), req(ctx.inputs, 1).dtype)],
  }),
  Clip: defineOp({
    attrs: attrs({ min: A.optFloat(), max: A.optFloat() }),
    inputs: [1, 3],
    outputs: [1, 1],
    kind: "broadcast",
    infer: (ctx) => [inputType(ctx, 0)],
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const [lo, hi] = clipBounds(ctx.opset, ctx.attrs, ctx.inputs)
      // min(max(x, lo), hi): all hi when lo > hi; NaN stays NaN
      const clip = (v: number) => {
        const u = v < lo ? lo : v
        return u > hi ? hi : u
      }
      const run = (out: TypedArray, src: ArrayLike<number>, n: number) => {
        for (let i = 0; i < n; i++) {
          const u = src[i] < lo ? lo : src[i]
          out[i] = u > hi ? hi : u
        }
      }
      return [mapUnary(x, fast1(x.dtype, run, clip))]
    },
  }),
  Identity: defineOp({
    attrs: attrs({}),
    inputs: [1, 1],
    outputs: [1, 1],
    kind: "elementwise",
    infer: (ctx) => [inputType(ctx, 0)],
    kernel: (ctx) => [req(ctx.inputs, 0)],
  }),
  Dropout: defineOp({
    attrs: dropoutAttrs,
    inputs: [1, 3],
    outputs: [1, 2],
    kind: "elementwise",
    // the mask had the data's type before opset 10, bool from then on
    infer: (ctx) => {
      const x = inputType(ctx, 0)
      return ctx.outputs > 1 ? [x, { dtype: ctx.opset < 10 ? x.dtype : "bool", shape: x.shape }] : [x]
    },
    kernel: (ctx) => {
      const x = req(ctx.inputs, 0)
      const { training, ratio } = dropoutTraining(ctx.opset, ctx.inputs)
      if (training && ratio !== 0) unsupported(`Dropout in training mode with ratio ${ratio} drops elements at random`)
      if (ctx.outputs < 2) return [x]
      const maskType: DType = ctx.opset < 10 ? x.dtype : "bool"
      return [x, mapUnary(x, () => 1, maskType)]
    },
  }),
} satisfies Record<string, AnyOpDef>
