// The browser entry (src/browser.ts, package.json's "browser" condition) bundles for the browser
// platform with no Node builtin reachable from it; and, as a check that the check can fail, the
// Node entry does reach some (worker_threads, the c device's child_process).
import { describe, expect, it } from "vitest"
import { bundleForBrowser } from "../scripts/browser-bundle.js"
import * as pkg from "../package.json" with { type: "json" }

describe("the browser entry", () => {
  it("bundles for the browser with no Node builtin import reachable", async () => {
    const { bytes, nodeImports } = await bundleForBrowser("src/browser.ts")
    expect(nodeImports.map((i) => `${i.importer} imports ${i.path}`)).toEqual([])
    expect(bytes).toBeGreaterThan(100_000)
  }, 60_000)

  it("finds the Node imports of the Node entry (the check can fail)", async () => {
    const { nodeImports } = await bundleForBrowser("src/index.ts")
    const paths = new Set(nodeImports.map((i) => i.path))
    expect(paths.has("node:worker_threads")).toBe(true)
    expect(paths.has("node:child_process")).toBe(true)
  }, 60_000)

  it("is the package's browser export", () => {
    const exports = (pkg as unknown as { default: { exports: Record<string, unknown> } }).default.exports["."] as Record<string, string>
    expect(exports.browser).toBe("./dist/browser.js")
  })
})
