// The normalization group: channel norms (BatchNormalization, InstanceNormalization,
// GroupNormalization), layer-style norms (LayerNormalization, RMSNormalization,
// MeanVarianceNormalization, LpNormalization, LRN), linear quantization and the loss ops.
import type { AnyOpDef } from "../op.js"
import { normChannelOps } from "./norm-channel.js"
import { normLayerOps } from "./norm-layer.js"
import { normLossOps } from "./norm-loss.js"
import { normQuantOps } from "./norm-quant.js"

export const normOps = {
  ...normChannelOps,
  ...normLayerOps,
  ...normQuantOps,
  ...normLossOps,
} satisfies Record<string, AnyOpDef>
