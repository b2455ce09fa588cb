import type { AnyOpDef } from "../op.js"

export const controlOps = {} satisfies Record<string, AnyOpDef>
