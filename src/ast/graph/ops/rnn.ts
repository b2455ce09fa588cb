// Sequence-model ops: the recurrent layers (rnn-recurrent) and the transformer ops (rnn-attention).
import type { AnyOpDef } from "../op.js"
import { attentionOps } from "./rnn-attention.js"
import { recurrentOps } from "./rnn-recurrent.js"

export const rnnOps = {
  ...recurrentOps,
  ...attentionOps,
} satisfies Record<string, AnyOpDef>
