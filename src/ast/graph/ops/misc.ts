// Miscellaneous ops, each family in its own file: Resize / Upsample (misc-resize.ts), windows,
// DFT, STFT and MelWeightMatrix (misc-signal.ts).
import type { AnyOpDef } from "../op.js"
import { miscResizeOps } from "./misc-resize.js"
import { miscSignalOps } from "./misc-signal.js"

export const miscOps = {
  ...miscResizeOps,
  ...miscSignalOps,
} satisfies Record<string, AnyOpDef>
