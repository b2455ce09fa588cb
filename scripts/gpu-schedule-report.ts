// npm run gpu-schedule-report -- [--models resnet18,mobilenetv2] [--sm 132] [--cc 9.0] [--sketch autotvm]
// The cuda target's default GPU schedules on zoo models, without a GPU: per fused group its rules
// and per kernel the launch (blocks × threads), shared bytes, local words a thread, and static
// operation counts of the lowered TIR (every loop's trips multiplied, guards ignored: an upper
// bound) — global and shared element reads and multiply-adds — beside the group's useful
// multiply-adds. `--sketch autotvm`: each conv2d through AutoTVM's template at the generated
// defaults' tiles (v.t.i of channels, rows, columns; the inner reduction factors), for comparing
// the two forms on a GPU once the cuda emitter builds them.
import { Effect } from "effect"
import { cudaAttrs } from "../src/ast/target.js"
import type { Expr } from "../src/ast/te/expr.js"
import type { PrimFunc, Stmt } from "../src/ast/tir/tir.js"
import { baseSchedule, buildGroupTE } from "../src/lowering/lower-group.js"
import { lowerSync } from "../src/lowering/lower.js"
import { autotvmConfig, gpuLimits, gpuRules, gpuTemplate, verifyGpuFunc } from "../src/lowering/templates/gpu/index.js"
import { defaultPasses, fuseOpsSync } from "../src/rewrite/index.js"
import { zooGraph } from "../src/zoo/index.js"

const args = process.argv.slice(2)
const opt = (k: string) => {
  const i = args.indexOf(k)
  return i >= 0 ? args[i + 1] : undefined
}
const models = (opt("--models") ?? "resnet18,mobilenetv2").split(",")
const attrs = cudaAttrs(opt("--cc") ?? "9.0", Number(opt("--sm") ?? 132))
const autotvm = opt("--sketch") === "autotvm"
const l = gpuLimits(attrs)

/** Static counts of a function: element reads by scope and multiply-adds (a store whose value multiplies two reads and adds), every loop's trips multiplied. */
const counts = (f: PrimFunc) => {
  const scope = new Map<string, string>(f.params.map((p) => [p.name, "global"]))
  const out = { global: 0, shared: 0, local: 0, fma: 0 }
  const reads = (e: Expr, m: number): void => {
    if (e.kind === "read") {
      const sc = scope.get(e.source) ?? "global"
      if (sc === "global" || sc === "shared" || sc === "local") out[sc] += m
      e.indices.forEach((i) => reads(i, m))
      return
    }
    for (const x of Object.values(e)) if (x && typeof x === "object" && "kind" in (x as object)) reads(x as Expr, m)
  }
  // (a thread loop inside one of the same tag is that thread's own index: one trip)
  const walk = (s: Stmt, m: number, tags: ReadonlySet<string> = new Set()): void => {
    switch (s.kind) {
      case "for": {
        const own = s.thread !== undefined && s.thread !== "vthread" && tags.has(s.thread)
        return walk(s.body, own ? m : m * (s.extent.kind === "const" ? s.extent.value : 1), s.thread ? new Set([...tags, s.thread]) : tags)
      }
      case "seq":
        return s.body.forEach((b) => walk(b, m, tags))
      case "allocate":
        scope.set(s.buffer.name, s.buffer.scope)
        return walk(s.body, m, tags)
      case "let":
        return walk(s.body, m, tags)
      case "if":
        walk(s.then, m, tags)
        if (s.else) walk(s.else, m, tags)
        return
      case "store": {
        reads(s.value, m)
        const v = s.value
        if (v.kind === "bin" && v.op === "add" && [v.a, v.b].some((x) => x.kind === "bin" && x.op === "mul")) out.fma += m
        return
      }
      default:
        return
    }
  }
  walk(f.body, 1)
  return out
}

const k = (n: number) => (n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(n))
console.log(`cuda schedules, compute capability ${attrs.computeCapability.major}.${attrs.computeCapability.minor}, ${attrs.multiprocessors} SMs${autotvm ? ", conv2d through AutoTVM's template" : ""}`)
for (const name of models) {
  const fused = fuseOpsSync(Effect.runSync(defaultPasses.run(zooGraph(name, 0))))
  console.log(`\n## ${name}\n\n| group | ops | rules | kernels (blocks × threads, shared B, local words) | global reads | shared reads | FMAs | problems |\n| --- | --- | --- | --- | ---: | ---: | ---: | --- |`)
  for (const group of fused.groups) {
    const te = buildGroupTE(fused, group)
    const base = baseSchedule(te.outputs)
    const t = gpuTemplate(attrs, base)
    const knobs = t.space(te.outputs, base)
    let config = t.defaults(knobs, { vectorLanes: 1, cores: 1 })
    // the generated defaults' tiles in the template's knobs (AutoTVM's splits of f, y, x; its rc, ry, rx)
    if (autotvm) config = autotvmConfig(knobs, config) ?? config
    const f = lowerSync(t.apply(te.outputs, base, config))
    const v = verifyGpuFunc(f, l)
    const c = counts(f)
    const launches = v.kernels.map((x) => `${x.blocks}×${x.threads}, ${x.sharedBytes}, ${x.localWords}`).join("; ")
    console.log(`| ${group.id} | ${group.ops.join("+")} | ${gpuRules(base, l).map((r) => r.rule).join(", ")} | ${launches} | ${k(c.global)} | ${k(c.shared)} | ${k(c.fma)} | ${v.problems.length ? v.problems.join("; ") : ""} |`)
  }
}
