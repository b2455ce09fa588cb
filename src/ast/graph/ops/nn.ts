// The neural-network ops: convolutions (plain, transposed, integer, quantized, deformable), pooling,
// matrix products, Einsum and Col2Im.
import type { AnyOpDef } from "../op.js"
import { col2imOps } from "./nn-col2im.js"
import { convOps } from "./nn-conv.js"
import { convTransposeOps } from "./nn-conv-transpose.js"
import { deformConvOps } from "./nn-deform-conv.js"
import { einsumOps } from "./nn-einsum.js"
import { matmulOps } from "./nn-matmul.js"
import { poolOps } from "./nn-pool.js"

export const nnOps = {
  ...convOps,
  ...convTransposeOps,
  ...poolOps,
  ...matmulOps,
  ...einsumOps,
  ...col2imOps,
  ...deformConvOps,
} satisfies Record<string, AnyOpDef>
