// Elementwise and broadcasting ops: unary math, binary/variadic arithmetic, comparison, logic and
// bitwise ops, Where, Cast/CastLike, Clip, Identity and Dropout. The kernels they share live in
// elementwise-kernels.ts; activations (built on the same kernels) in activation.ts.
import type { AnyOpDef } from "../op.js"
import { binaryOps } from "./elementwise-binary.js"
import { convertOps } from "./elementwise-convert.js"
import { unaryMathOps } from "./elementwise-math.js"

export const elementwiseOps = {
  ...unaryMathOps,
  ...binaryOps,
  ...convertOps,
} satisfies Record<string, AnyOpDef>
