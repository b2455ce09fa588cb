// `--dump-ir DIR` and `--report`: the IR after each step of the pipeline, as numbered text files
// (`NN-pass-name.txt`: the graph after each graph pass, the fused groups, the memory plan, then
// each kernel's TIR), and the pass report (passes run, time, node counts before and after).
import { Effect } from "effect"
import * as path from "node:path"
import type { Graph } from "../ast/graph/graph.js"
import { printGraph } from "../ast/graph/graph.js"
import { printPrimFunc } from "../ast/tir/tir.js"
import { ensureFolderSync, safeFileName, writeFilesAtomicSync } from "../device/files.js"
import type { Program } from "../lowering/program.js"
import { fusionReport, fusionText } from "../rewrite/index.js"
import { attempt } from "./errors.js"
import type { Prepared } from "./targets.js"

/** The memory plan as text: blocks, then each value's block and live range. */
export const memoryText = (program: Program): string => {
  const m = program.memory
  const lines = [`memory plan: ${m.plannedBytes} bytes in ${m.storages.length} blocks (one buffer per tensor: ${m.naiveBytes} bytes)`]
  for (const s of m.storages) lines.push(`  block ${s.id}: ${s.bytes} bytes`)
  for (const v of m.values)
    lines.push(`  %${v.value}: block ${v.storage}, ${v.bytes} bytes, groups ${v.def}..${v.lastUse}${v.inPlaceOf !== undefined ? `, in place of %${v.inPlaceOf}` : ""}`)
  return lines.join("\n")
}

/** The kernel of each group as text: its TIR, or why it runs through the reference kernels. */
const kernelTexts = (program: Program): { name: string; text: string }[] =>
  program.kernels.map((k) =>
    k.kind === "compiled"
      ? { name: `lowering.${k.name}`, text: `# group ${k.group}: args ${k.args.map((a) => `%${a}`).join(", ")}\n${printPrimFunc(k.func)}` }
      : {
          name: `fallback.${k.name}`,
          text: `# group ${k.group} runs through the reference kernels: ${k.reason}\n${k.nodes.map((n) => `${n.op}(${n.inputs.map((i) => `%${i}`).join(", ")}) -> ${n.outputs.map((o) => `%${o}`).join(", ")}  # ${n.name}`).join("\n")}`,
        },
  )

/** The dump's files in order: [name, text]. */
export const irFiles = (input: Graph, model: Pick<Prepared, "passes" | "program">): { name: string; text: string }[] => {
  const steps: { name: string; text: string }[] = [{ name: "input", text: printGraph(input) }]
  for (const e of model.passes) if (e.leaf) steps.push({ name: e.pass, text: printGraph(e.graph) })
  if (model.program) {
    const p = model.program
    steps.push({ name: "rewrite.FuseOps", text: fusionText(fusionReport(p.fused, p.memory)) })
    steps.push({ name: "rewrite.PlanMemory", text: memoryText(p) })
    steps.push(...kernelTexts(p))
  }
  const width = Math.max(2, String(steps.length - 1).length)
  return steps.map((s, k) => ({ name: `${String(k).padStart(width, "0")}-${safeFileName(s.name)}.txt`, text: s.text.endsWith("\n") ? s.text : `${s.text}\n` }))
}

/** Writes the dump into `dir` (all files or none); the number of files. */
export const dumpIr = (dir: string, input: Graph, model: Pick<Prepared, "passes" | "program">): Effect.Effect<number, Error & { readonly _tag: string }> =>
  attempt(() => {
    const files = irFiles(input, model)
    ensureFolderSync(dir)
    writeFilesAtomicSync(files.map((f) => ({ path: path.join(dir, f.name), bytes: new TextEncoder().encode(f.text) })))
    return files.length
  })

export interface PassReportRow {
  readonly pass: string
  readonly depth: number
  readonly ms: number
  readonly nodesBefore: number
  readonly nodesAfter: number
}

export const passReport = (model: Pick<Prepared, "passes">): PassReportRow[] =>
  model.passes.map((e) => ({ pass: e.pass, depth: e.depth, ms: Math.round(e.ms * 1000) / 1000, nodesBefore: e.nodesBefore, nodesAfter: e.nodesAfter }))

/** The report as a table (pass, ms, nodes before → after), nested passes indented. */
export const reportLines = (rows: readonly PassReportRow[]): string[] => {
  if (rows.length === 0) return ["passes: none ran at this opt level"]
  const names = rows.map((r) => `${"  ".repeat(r.depth)}${r.pass}`)
  const w = Math.max(4, ...names.map((n) => n.length))
  return [
    `${"pass".padEnd(w)}  ${"ms".padStart(9)}  nodes`,
    ...rows.map((r, k) => `${names[k].padEnd(w)}  ${r.ms.toFixed(3).padStart(9)}  ${r.nodesBefore} → ${r.nodesAfter}`),
  ]
}
