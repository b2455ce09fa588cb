// ResNet-18's conv groups with their `cuda` spaces (the template, its knobs, its defaults and
// AutoTVM's config at them): what the sweep and launch-bounds tests walk.
import { Effect } from "effect"
import type { CudaAttrs } from "../../src/ast/target.js"
import type { ComputeTensor } from "../../src/ast/te/tensor.js"
import type * as S from "../../src/ast/schedule/schedule.js"
import { baseSchedule, buildGroupTE } from "../../src/lowering/lower-group.js"
import { autotvmConfig, gpuTemplate } from "../../src/lowering/templates/gpu/index.js"
import type { Config, Knob, Template } from "../../src/lowering/templates/template.js"
import { defaultPasses, fuseOpsSync } from "../../src/rewrite/index.js"
import type { FusedGroup } from "../../src/rewrite/fuse-ops.js"
import { zooGraph } from "../../src/zoo/index.js"

export interface ConvSpace {
  readonly group: FusedGroup
  readonly outputs: readonly ComputeTensor[]
  readonly base: S.Schedule
  readonly template: Template
  readonly knobs: readonly Knob[]
  readonly defaults: Config
  readonly autotvm: Config
}

/** Every group of ResNet-18 (seed 0) whose `cuda` space has AutoTVM's conv2d template. */
export const resnet18ConvSpaces = (attrs: CudaAttrs): ConvSpace[] => {
  const fused = fuseOpsSync(Effect.runSync(defaultPasses.run(zooGraph("resnet18", 0))))
  return fused.groups.flatMap((group) => {
    const te = buildGroupTE(fused, group)
    const base = baseSchedule(te.outputs)
    const template = gpuTemplate(attrs, base)
    const knobs = template.space(te.outputs, base)
    const defaults = template.defaults(knobs, { vectorLanes: 1, cores: 1 })
    const autotvm = autotvmConfig(knobs, defaults)
    return autotvm ? [{ group, outputs: te.outputs, base, template, knobs, defaults, autotvm }] : []
  })
}
