// Miscellaneous ops: Resize / Upsample (misc-resize.ts) and the rest, each family in its own file.
import type { AnyOpDef } from "../op.js"
import { miscResizeOps } from "./misc-resize.js"

export const miscOps = {
  ...miscResizeOps,
} satisfies Record<string, AnyOpDef>
