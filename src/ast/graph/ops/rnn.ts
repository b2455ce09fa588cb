import type { AnyOpDef } from "../op.js"

export const rnnOps = {} satisfies Record<string, AnyOpDef>
