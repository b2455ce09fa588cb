import type { AnyOpDef } from "../op.js"

export const activationOps = {} satisfies Record<string, AnyOpDef>
