// The template of groups without a reduction anchor: parallel outer loops, the innermost vectorized.
import { parallelize } from "./common.js"
import type { Template } from "./template.js"

/** Groups without a reduction anchor (elementwise, injective, layout transforms). */
export const injectiveTemplate: Template = {
  name: "injective",
  tunable: false,
  space: () => [{ kind: "choice", name: "vectorize", candidates: [true, false] }],
  defaults: (_k, target) => ({ vectorize: target.vectorLanes > 1 }),
  apply: (_outputs, base, config) => parallelize(base, !!config.vectorize),
}
