import type { AnyOpDef } from "../op.js"

export const miscOps = {} satisfies Record<string, AnyOpDef>
