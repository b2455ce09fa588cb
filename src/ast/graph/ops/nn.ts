import type { AnyOpDef } from "../op.js"

export const nnOps = {} satisfies Record<string, AnyOpDef>
