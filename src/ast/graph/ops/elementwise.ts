import type { AnyOpDef } from "../op.js"

export const elementwiseOps = {} satisfies Record<string, AnyOpDef>
