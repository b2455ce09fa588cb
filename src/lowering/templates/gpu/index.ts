// The cuda target's schedules: GPU rules as data, each a pure function of the group's compute and
// the target's CudaAttrs. Every root stage of a group is one kernel launch (grid and block from its
// blockIdx / threadIdx loops) and takes one rule:
//   - multi-level tiling (multi-level-tiling.ts): the group's anchor, where it has data reuse and
//     enough outputs to fill the GPU (conv2d NCHW incl. grouped and depthwise, dense, matmul,
//     batch matmul), with its elementwise epilogue fused;
//   - cross-thread reduction (cross-thread-reduction.ts): a reduction with fewer outputs than the
//     GPU has SMs × warps and a reduction at least a warp long (softmax's and norms' statistics,
//     global pools, a batch-1 dense);
//   - auto-bind (auto-bind.ts): every other root stage (injective stages, reductions with enough
//     outputs: one thread an output).
// The knobs of all of a group's rules form one Template (its defaults from the attrs), so the
// tuner searches them as it does the CPU templates'.
import type { CudaAttrs } from "../../../ast/target.js"
import type { ComputeTensor } from "../../../ast/te/tensor.js"
import type { FusedGroup } from "../../../rewrite/fuse-ops.js"
import * as S from "../../../ast/schedule/schedule.js"
import type { ScheduleFn } from "../../lower-group.js"
import type { Config, Knob, Template } from "../template.js"
import { autoBind, bindThreads, elementsOf } from "./auto-bind.js"
import { crossThreadDefaults, crossThreadKnobs, crossThreadReduce, wantsCrossThread } from "./cross-thread-reduction.js"
import { gpuLimits, threadCandidates, type GpuLimits } from "./limits.js"
import { applyConv2dDirect, AUTOTVM, conv2dDirectKnobs, isConv2d } from "./conv2d-direct.js"
import { vthreadsOf } from "./verify.js"
import { blockFootprint, footprintRefusal } from "./footprint.js"

const GENERATED = { knob: "cuda_sketch", value: "generated" } as const
import { applyTiling, epilogueOf, hasReuse, tilingAnchor, tilingDefaults, tilingKnobs } from "./multi-level-tiling.js"

/**
 * The tiled kernel's `__launch_bounds__`, either sketch: 0 where the emitter's rule wants one
 * (needsLaunchBounds: only where a block could need more registers than it may hold), 1 always
 * (the block's threads): ptxas then fits the kernel to the block, which on an H100 spilled some
 * kernels of 3, 5 or 7 warps and sped others (the stem, 0.0661 → 0.0648 ms; docs/cuda.md,
 * "Launch bounds") — a choice per kernel, measured, not a rule.
 */
export const LAUNCH_BOUNDS_KNOB: Knob = { kind: "choice", name: "launch_bounds", candidates: [0, 1], absent: 0 }

/** The pragma the knob puts on the kernel's outermost loop (the cuda emitter's askedLaunchBounds reads it). */
export const LAUNCH_BOUNDS_PRAGMA = "launch_bounds"

/** The rule each root stage of a group takes (the tiled anchor's epilogue and cache stages go with it). */
export type GpuRule = { readonly rule: "tile"; readonly stage: string } | { readonly rule: "cross-thread"; readonly stage: string; readonly prefix: string } | { readonly rule: "bind"; readonly stage: string; readonly prefix: string }

/** The rules of a group's base schedule, in stage order. */
export const gpuRules = (base: S.Schedule, l: GpuLimits): GpuRule[] => {
  const anchor = tilingAnchor(base)
  const ast = anchor ? base.stages.get(anchor) : undefined
  const tiled = ast && hasReuse(ast) && !wantsCrossThread(ast, l) ? ast.name : undefined
  // the stage the tiled anchor's tile is made of (its one elementwise epilogue) goes with it
  const epilogue = tiled ? epilogueOf(base, tiled) : undefined
  const out: GpuRule[] = []
  base.order.forEach((name, k) => {
    const st = base.stages.get(name)!
    if (st.attach.kind !== "root") return
    if (name === tiled) out.push({ rule: "tile", stage: name })
    else if (name === epilogue) return
    else if (wantsCrossThread(st, l)) out.push({ rule: "cross-thread", stage: name, prefix: `xt${k}` })
    else out.push({ rule: "bind", stage: name, prefix: `ab${k}` })
  })
  return out
}

/** The GPU template of a group (its base schedule): every root stage's rule, its knobs under one space, their defaults from the attrs. */
export const gpuTemplate = (attrs: CudaAttrs, group: S.Schedule): Template => {
  const l = gpuLimits(attrs)
  return {
    name: "cuda",
    tunable: true,
    space: (_outputs, base) =>
      gpuRules(base, l).flatMap((r): Knob[] => {
        if (r.rule === "tile") {
          const own = tilingKnobs(base, r.stage, l)
          if (!isConv2d(base.stages.get(r.stage)!)) return [...own, LAUNCH_BOUNDS_KNOB]
          // a conv2d: AutoTVM's template beside the generated tiling, a `cuda_sketch` knob choosing
          return [{ kind: "choice", name: "cuda_sketch", candidates: ["generated", "autotvm"], absent: "generated" }, ...own.map((k) => ({ ...k, when: GENERATED })), ...conv2dDirectKnobs(base, r.stage, l), LAUNCH_BOUNDS_KNOB]
        }
        if (r.rule === "cross-thread") return crossThreadKnobs(r.prefix, base.stages.get(r.stage)!, l)
        return [{ kind: "choice", name: `${r.prefix}_threads`, candidates: threadCandidates(l), extent: elementsOf(base.stages.get(r.stage)!) }]
      }),
    defaults: (knobs) => gpuDefaults(group, knobs, l),
    apply: (_outputs, base, config) => applyGpuRules(base, config, l),
    // (TVM's VerifyGPUCode refuses the same before its builder runs: each virtual thread is a
    // section of the thread's register tile and a copy of its updates in the source nvcc compiles;
    // the knobs' vthreadCaps keep every draw of the space within it)
    // and a block's threads and shared tiles past the record's per-block limits, from the knobs
    // alone (footprint.ts: products over several knobs, which no one knob's candidates can bound)
    refuse: (_outputs, base, config) => {
      for (const r of gpuRules(base, l)) {
        const why = r.rule === "tile" ? footprintRefusal(blockFootprint(base, r.stage, config), l) : undefined
        if (why !== undefined) return why
      }
      const v = vthreadsOf(applyGpuRules(base, config, l))
      return v > l.maxVthreads ? `maxVthreads: ${v} virtual threads a thread, over the ${l.maxVthreads} of a quarter warp (each a register tile and a copy of its updates for nvcc)` : undefined
    },
  }
}

/** A group's default config: each rule's defaults from the limits. */
export const gpuDefaults = (base: S.Schedule, knobs: readonly Knob[], l: GpuLimits): Config =>
  gpuRules(base, l).reduce<Config>((c, r) => {
    if (r.rule === "tile") {
      // (the template's knobs, inactive, at their first candidates: one config, one schedule)
      const inactive = Object.fromEntries(knobs.filter((k) => k.when === AUTOTVM || k.when?.value === "autotvm").map((k) => [k.name, k.candidates[0]]))
      return { ...c, ...inactive, ...(knobs.some((k) => k.name === "cuda_sketch") ? { cuda_sketch: "generated" } : {}), ...tilingDefaults(base, r.stage, knobs, l), launch_bounds: 0 }
    }
    if (r.rule === "cross-thread") return { ...c, ...crossThreadDefaults(r.prefix, knobs, l) }
    return { ...c, [`${r.prefix}_threads`]: bindThreads(elementsOf(base.stages.get(r.stage)!), l) }
  }, {})

/** The schedule of a config: the tiled anchor first (its cache stages are made before anything is split), then the other rules. */
export const applyGpuRules = (base: S.Schedule, config: Config, l: GpuLimits): S.Schedule => {
  const rules = gpuRules(base, l)
  let s = base
  for (const r of rules) {
    if (r.rule !== "tile") continue
    s = config.cuda_sketch === "autotvm" ? applyConv2dDirect(s, r.stage, config) : applyTiling(s, r.stage, config)
    // (the pragma on the kernel's outermost loop: the stage its tiles are made of, at root)
    if (Number(config.launch_bounds ?? 0) === 1) {
      const out = epilogueOf(base, r.stage) ?? r.stage
      s = S.pragma(s, out, s.stages.get(out)!.leaf[0], LAUNCH_BOUNDS_PRAGMA, "1")
    }
  }
  for (const r of rules) {
    if (r.rule === "cross-thread") s = crossThreadReduce(s, r.stage, Number(config[`${r.prefix}_threads`] ?? l.warp), Number(config[`${r.prefix}_rows`] ?? 1), Number(config[`${r.prefix}_shuffle`] ?? 1) === 1)
    if (r.rule === "bind") s = autoBind(s, r.stage, Number(config[`${r.prefix}_threads`] ?? l.warp))
  }
  return s
}

/**
 * AutoTVM's template at the generated defaults' tiles, for a conv2d group's default config (one
 * with a `cuda_sketch` knob): v.t.i of channels, rows and columns (mt_s1..3 → tile_f, tile_y,
 * tile_x), the inner reduction factors (mt_r0..2 → tile_rc, tile_ry, tile_rx), AutoTVM's
 * auto_unroll_max_step 512 and unroll_explicit 0 — the baseline the issue names, as
 * gpu-schedule-report derives it. Undefined for a group without the template.
 */
export const autotvmConfig = (knobs: readonly Knob[], defaults: Config): Config | undefined =>
  knobs.some((k) => k.name === "cuda_sketch")
    ? { ...defaults, cuda_sketch: "autotvm", tile_f: defaults.mt_s1, tile_y: defaults.mt_s2, tile_x: defaults.mt_s3, tile_rc: defaults.mt_r0, tile_ry: defaults.mt_r1, tile_rx: defaults.mt_r2, auto_unroll_max_step: 512, unroll_explicit: 0 }
    : undefined

/**
 * The tuned config of a group's template, if a tuning log has one (the shape of src/backend's
 * TunedLookup, which lowering may not import).
 */
export type GpuTunedLookup = (group: FusedGroup, template: Template, knobs: readonly Knob[], outputs: readonly ComputeTensor[]) => Config | undefined

/** Each group's GPU schedule: its rules at their defaults from `attrs`, or at the config `tuned` finds. */
export const cudaSchedules =
  (attrs: CudaAttrs, tuned?: GpuTunedLookup): ScheduleFn =>
  (outputs, base, group) => {
    const t = gpuTemplate(attrs, base)
    const knobs = t.space(outputs, base)
    const config = tuned?.(group, t, knobs, outputs) ?? t.defaults(knobs, { vectorLanes: 1, cores: 1 })
    return t.apply(outputs, base, config)
  }

export { gpuLimits, type GpuLimits } from "./limits.js"
export { verifyGpuFunc, vthreadsOf, type GpuKernelStats, type GpuVerifyResult } from "./verify.js"
