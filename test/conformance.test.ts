// ONNX conformance through decode + the reference evaluator (+ each node's type relation):
// zero wrong answers, and a pass count per suite no lower than the checked-in floor.
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { listCases, ONNX_TESTS, runCase, SUITES } from "./support/onnx-cases.js"

const floor: Record<string, number> = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, "conformance-floor.json"), "utf8"))
const present = fs.existsSync(ONNX_TESTS)

describe.skipIf(!present)("ONNX conformance (reference evaluator)", () => {
  const cases = present ? listCases() : []
  for (const suite of SUITES) {
    it(`${suite}: no case fails, passes ≥ floor (${floor[suite] ?? 0})`, () => {
      const results = cases.filter((c) => c.suite === suite).map((c) => runCase(c))
      const failed = results.filter((r) => r.status === "fail").map((r) => `${r.name}: ${r.reason}`)
      expect(failed).toEqual([])
      const passed = results.filter((r) => r.status === "pass").length
      expect(passed).toBeGreaterThanOrEqual(floor[suite] ?? 0)
    }, 600_000)
  }
})
