import type { AnyOpDef } from "../op.js"

export const tensorOps = {} satisfies Record<string, AnyOpDef>
