import type { AnyOpDef } from "../op.js"

export const normOps = {} satisfies Record<string, AnyOpDef>
