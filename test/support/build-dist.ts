// vitest's globalSetup (vitest.config.ts): `node scripts/build.mjs` into dist/ once, before any test
// file starts (and before each rerun in watch mode), for the files that run the built command line
// or scripts — one build where nine files each ran their own (11 s of CPU apiece on Zen 5). A failed
// build fails the run here, with esbuild's message. The build is skipped when dist/ was built by
// this setup from the same inputs (a hash of src/, scripts/ and the package and lock files, kept in
// dist/.inputs-sha256), so a run of a file or two after no change starts at once.
import { spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import type { TestProject } from "vitest/node"
import { CLI, DIST, ROOT } from "./dist.js"

const STAMP = path.join(DIST, ".inputs-sha256")

/** The files esbuild reads for dist/, in a fixed order: src/ and scripts/ whole, the package, lock and tsconfig files. */
const inputs = (): string[] => {
  const under = (dir: string): string[] =>
    readdirSync(path.join(ROOT, dir), { recursive: true, encoding: "utf8" })
      .map((f) => path.join(ROOT, dir, f))
      .filter((f) => statSync(f).isFile())
  return [...under("src"), ...under("scripts"), ...["package.json", "package-lock.json", "tsconfig.json"].map((f) => path.join(ROOT, f))].sort()
}

const inputsHash = (): string => {
  const h = createHash("sha256")
  for (const f of inputs()) h.update(path.relative(ROOT, f)).update("\0").update(readFileSync(f)).update("\0")
  return h.digest("hex")
}

const build = (): void => {
  const hash = inputsHash()
  if (existsSync(CLI) && existsSync(STAMP) && readFileSync(STAMP, "utf8") === hash) return
  const b = spawnSync(process.execPath, ["scripts/build.mjs"], { cwd: ROOT, encoding: "utf8" })
  if (b.status !== 0) throw new Error(`npm run build failed (exit ${b.status}): ${b.stderr}${b.error ? ` ${b.error.message}` : ""}`)
  writeFileSync(STAMP, hash)
}

export default function setup(project: TestProject): void {
  build()
  project.onTestsRerun(() => build())
}
