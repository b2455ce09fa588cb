// The tensor ops: data movement, indexing and tensor creation. Each part lives in its own file
// (tensor-shape, tensor-move, tensor-slice, tensor-index, tensor-create); this table merges them.
import type { AnyOpDef } from "../op.js"
import { tensorCreateOps } from "./tensor-create.js"
import { tensorIndexOps } from "./tensor-index.js"
import { tensorMoveOps } from "./tensor-move.js"
import { tensorShapeOps } from "./tensor-shape.js"
import { tensorSliceOps } from "./tensor-slice.js"

export const tensorOps = {
  ...tensorShapeOps,
  ...tensorMoveOps,
  ...tensorSliceOps,
  ...tensorIndexOps,
  ...tensorCreateOps,
} satisfies Record<string, AnyOpDef>
