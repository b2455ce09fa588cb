// npm run optimizer-report — the graph optimizer on real networks: nodes before/after the passes,
// fused groups vs original ops, planned vs naive peak memory, and the optimizer's time (median of
// 3 runs, decoding excluded). Models: the zoo (if built in) and the light CNNs of the conformance data.
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Graph } from "../src/ast/graph/graph.js"
import { bindSync } from "../src/ast/graph/infer.js"
import { decodeModelSync } from "../src/ast/onnx/decode.js"
import { defaultPasses, fuseOpsSync, planMemory } from "../src/rewrite/index.js"
import { ONNX_TESTS } from "../test/support/onnx-cases.js"

const models: { name: string; graph: () => Graph }[] = []
try {
  const zoo = (await import("../src/zoo/index.js")) as unknown as { ZOO: Record<string, { build: (seed: number) => Graph }> }
  for (const [name, m] of Object.entries(zoo.ZOO)) models.push({ name: `zoo ${name}`, graph: () => m.build(0) })
} catch {
  console.log("(the zoo is not available in this build)")
}
const lightDir = path.join(ONNX_TESTS, "light")
if (fs.existsSync(lightDir))
  for (const f of fs.readdirSync(lightDir).filter((f) => f.endsWith(".onnx")).sort())
    models.push({ name: f.replace(/\.onnx$/, ""), graph: () => decodeModelSync(fs.readFileSync(path.join(lightDir, f))) })

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const mib = (b: number) => (b / (1 << 20)).toFixed(1)
console.log("| model | nodes | after passes | groups | planned MiB | naive MiB | optimizer ms |")
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for (const m of models) {
  try {
    const g = bindSync(m.graph())
    const times: number[] = []
    let result: ReturnType<typeof fuseOpsSync> | undefined
    let optimized: Graph | undefined
    for (let r = 0; r < 3; r++) {
      const t0 = performance.now()
      optimized = Effect.runSync(defaultPasses.run(g))
      result = fuseOpsSync(optimized)
      times.push(performance.now() - t0)
    }
    const plan = planMemory(result!)
    console.log(`| ${m.name} | ${g.nodes.length} | ${optimized!.nodes.length} | ${result!.groups.length} | ${mib(plan.plannedBytes)} | ${mib(plan.naiveBytes)} | ${median(times).toFixed(0)} |`)
  } catch (e) {
    console.log(`| ${m.name} | failed: ${e instanceof Error ? e.message.slice(0, 120) : String(e)} | | | | | |`)
  }
}
