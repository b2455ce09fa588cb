import type { AnyOpDef } from "../op.js"

export const reduceOps = {} satisfies Record<string, AnyOpDef>
