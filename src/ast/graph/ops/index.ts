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
import { contribQuantOps } from "./contrib-quant.js"
import { MICROSOFT_DOMAIN } from "./contrib-quant-common.js"

export { MICROSOFT_DOMAIN }

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

/**
 * onnxruntime's contrib ops Tessera implements (domain "com.microsoft"): the quantized ops of its
 * QOperator format. Every other op of that domain has no entry, so it is an UnsupportedOpError.
 */
export const MICROSOFT_OPS = { ...contribQuantOps } satisfies Record<string, AnyOpDef>

/** Op tables by domain ("ai.onnx" is the default domain's other name). */
const TABLES: Readonly<Record<string, Record<string, AnyOpDef>>> = {
  "": OPS,
  "ai.onnx": OPS,
  [TESSERA_DOMAIN]: TESSERA_OPS,
  [MICROSOFT_DOMAIN]: MICROSOFT_OPS,
}

/** The domains whose ops Tessera looks up (others are an UnsupportedOpError naming the domain). */
export const KNOWN_DOMAINS: ReadonlySet<string> = new Set(Object.keys(TABLES))

/** The op of `op` in `domain` (default: the ONNX domain), or undefined where the domain has none. */
export const lookupOp = (op: string, domain = ""): AnyOpDef | undefined => {
  const table = Object.prototype.hasOwnProperty.call(TABLES, domain) ? TABLES[domain] : undefined
  return table && Object.prototype.hasOwnProperty.call(table, op) ? table[op] : undefined
}
