// The direction of imports: dependency-cruiser walks src/ with the rules in .dependency-cruiser.cjs
// (one per layer — ast ← rewrite ← lowering ← emit, device beside emit, search on top, cli and
// pipeline.ts over all — plus no-circular, type-only imports included) and finds no violation.
// `npm run deps` prints the same violations from the command line.
import * as fs from "node:fs"
import * as path from "node:path"
import { cruise, type ICruiseResult, type IViolation } from "dependency-cruiser"
import extractDepcruiseOptions from "dependency-cruiser/config-utl/extract-depcruise-options"
import { beforeAll, describe, expect, it } from "vitest"

const ROOT = path.resolve(import.meta.dirname, "..")

/** One line per violation, `rule: from → to`; a cycle is written out whole, back to its start. */
const describeViolation = (v: IViolation): string => {
  const path = v.cycle && v.cycle.length > 0 ? [v.from, ...v.cycle.map((c) => c.name)] : [v.from, v.to]
  return `${v.rule.name}: ${path.join(" → ")}`
}

/** The .ts files under src/, relative to the root, as dependency-cruiser names modules. */
const sourceFiles = (dir: string): ReadonlyArray<string> =>
  fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`
    return e.isDirectory() ? sourceFiles(rel) : e.name.endsWith(".ts") ? [rel] : []
  })

let result: ICruiseResult

beforeAll(async () => {
  const options = await extractDepcruiseOptions(path.join(ROOT, ".dependency-cruiser.cjs"))
  const { output } = await cruise(["src"], {
    ...options,
    baseDir: ROOT,
    tsConfig: { fileName: path.join(ROOT, "tsconfig.json") },
  })
  if (typeof output === "string") throw new Error(`dependency-cruiser returned a report, not a result: ${output.slice(0, 200)}`)
  result = output
})

describe("architecture: the direction of imports in src/", () => {
  it("reads every module under src/ and resolves every import", () => {
    // a check that saw nothing would pass: every file is cruised, every import found on disk
    const cruised = new Set(result.modules.map((m) => m.source))
    expect(sourceFiles("src").filter((f) => !cruised.has(f))).toEqual([])
    const unresolved = result.modules
      .filter((m) => m.source.startsWith("src/"))
      .flatMap((m) => m.dependencies.filter((d) => d.couldNotResolve).map((d) => `${m.source} → ${d.module}`))
    expect(unresolved).toEqual([])
    expect(result.summary.totalDependenciesCruised).toBeGreaterThan(500)
  })

  it("has no wrong-way import and no cycle", () => {
    const violations = result.summary.violations.map(describeViolation)
    // one line each, `rule: from → to`, so the fix is obvious
    const report = `dependency-cruiser found ${violations.length} violation(s):\n${violations.join("\n")}\n`
    expect(violations.length, report).toBe(0)
  })
})
