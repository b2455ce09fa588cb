// Which template a group gets: the one its anchor's tag names (the op library tags the computes
// schedules are built around), and the default schedule of a target: each group's template at its
// defaults, or at a tuned config.
import type { FusedGroup } from "../../rewrite/fuse-ops.js"
import type * as S from "../../ast/schedule/schedule.js"
import type { ComputeTag, ComputeTensor } from "../../ast/te/tensor.js"
import type { ScheduleFn } from "../lower-group.js"
import { anchorStage, innerReduction, tileStages } from "./common.js"
import { convTemplate } from "./conv2d-nchwc.js"
import { injectiveTemplate } from "./injective.js"
import { int8DepthwiseTemplate } from "./int8-depthwise.js"
import { int8DotPxTemplate, int8DotTemplate } from "./int8-dot.js"
import { matmulTemplate } from "./matmul.js"
import { innerReductionTemplate, reductionTemplate } from "./reduction.js"
import { searchable } from "./sketch.js"
import type { Config, Knob, ScheduleTarget, Template } from "./template.js"
import { winogradTemplate } from "./winograd.js"

/** The template of each tag an anchor may carry (an anchor without a tag: the reduction template). */
const TEMPLATE_OF_TAG: { readonly [T in ComputeTag]: Template } = {
  conv2d_nchwc: convTemplate,
  conv2d_winograd_product: winogradTemplate,
  conv2d_nchw: reductionTemplate,
  conv_nd: reductionTemplate,
  conv_transpose: reductionTemplate,
  dense: matmulTemplate,
  dense_pack: reductionTemplate,
  matmul: matmulTemplate,
  matmul_packed: matmulTemplate,
  pool: reductionTemplate,
  global_pool: reductionTemplate,
  int8_dot: int8DotTemplate,
  int8_dot_px: int8DotPxTemplate,
  int8_depthwise: int8DepthwiseTemplate,
}

/**
 * A group's template: the injective one without a reduction anchor, else the one its anchor's tag
 * names. The conv template tiles the anchor's epilogue (or a copy of the anchor): where the anchor
 * has another pattern of readers (tileStages), the reduction template.
 */
export const templateFor = (base: S.Schedule): Template => {
  const anchor = anchorStage(base)
  if (!anchor) return injectiveTemplate
  if (!anchor.op.tag && innerReduction(anchor)) return innerReductionTemplate
  const t = anchor.op.tag ? TEMPLATE_OF_TAG[anchor.op.tag] : reductionTemplate
  return t === convTemplate && !tileStages(base, anchor) ? reductionTemplate : t
}

/**
 * The template a group is tuned and compiled with: its template, with the generated space
 * (sketch.ts) beside the template's own knobs where the group has a reduction anchor. Its
 * defaults give the template's default schedule.
 */
export const searchTemplateFor = (base: S.Schedule): Template => {
  const t = templateFor(base)
  return anchorStage(base) ? searchable(t) : t
}

/** The untuned schedule for a target: each group's template at its defaults. */
export const defaultSchedule =
  (
    target: ScheduleTarget,
    tuned?: (group: FusedGroup, template: Template, knobs: readonly Knob[], outputs: readonly ComputeTensor[]) => Config | undefined,
  ): ScheduleFn =>
  (outputs, base, group) => {
    const t = searchTemplateFor(base)
    const knobs = t.space(outputs, base)
    const config = tuned?.(group, t, knobs, outputs) ?? t.defaults(knobs, target)
    return t.apply(outputs, base, config)
  }
