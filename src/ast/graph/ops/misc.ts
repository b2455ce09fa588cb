// Miscellaneous ops, each family in its own file: Resize / Upsample (misc-resize.ts), windows,
// DFT, STFT and MelWeightMatrix (misc-signal.ts), GridSample and AffineGrid (misc-grid.ts),
// NonMaxSuppression, RoiAlign and Det (misc-vision.ts).
import type { AnyOpDef } from "../op.js"
import { miscResizeOps } from "./misc-resize.js"
import { miscSignalOps } from "./misc-signal.js"
import { miscGridOps } from "./misc-grid.js"
import { miscVisionOps } from "./misc-vision.js"

export const miscOps = {
  ...miscResizeOps,
  ...miscSignalOps,
  ...miscGridOps,
  ...miscVisionOps,
} satisfies Record<string, AnyOpDef>
