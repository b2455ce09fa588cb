// The neural-network ops: convolutions, pooling, matrix products and Einsum, Col2Im and DeformConv.
import type { AnyOpDef } from "../op.js"
import { col2imOps } from "./nn-col2im.js"
import { convOps } from "./nn-conv.js"
import { convTransposeOps } from "./nn-conv-transpose.js"
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
} satisfies Record<string, AnyOpDef>
