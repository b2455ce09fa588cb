// The operator registry: every op group's table merged into one record. Op names are the keys;
// `OpName` is their union.
import type { AnyOpDef } from "../op.js"
import { activationOps } from "./activation.js"
import { elementwiseOps } from "./elementwise.js"
import { nnOps } from "./nn.js"
import { tensorOps } from "./tensor-ops.js"
import { reduceOps } from "./reduce.js"
import { miscOps } from "./misc.js"
import { normOps } from "./norm.js"
import { rnnOps } from "./rnn.js"
import { controlOps } from "./control.js"
import { layoutOps } from "./layout.js"
import { winogradOps } from "./winograd.js"

export const OPS = {
  ...elementwiseOps,
  ...activationOps,
  ...nnOps,
  ...tensorOps,
  ...reduceOps,
  ...miscOps,
  ...normOps,
  ...rnnOps,
  ...controlOps,
} satisfies Record<string, AnyOpDef>

export type OpName = Extract<keyof typeof OPS, string>

export const isOpName = (op: string): op is OpName => Object.prototype.hasOwnProperty.call(OPS, op)

/** Tessera's own ops (domain "tessera"), made by passes: layout transforms, blocked and Winograd convolution. */
export const TESSERA_OPS = { ...layoutOps, ...winogradOps } satisfies Record<string, AnyOpDef>
export const TESSERA_DOMAIN = "tessera"

/** The op of a default-domain name, or of the "tessera" domain when `domain` says so. */
export const lookupOp = (op: string, domain = ""): AnyOpDef | undefined => {
  const table: Record<string, AnyOpDef> = domain === TESSERA_DOMAIN ? TESSERA_OPS : OPS
  return Object.prototype.hasOwnProperty.call(table, op) ? table[op] : undefined
}
