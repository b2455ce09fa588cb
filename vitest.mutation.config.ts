// The vitest configuration of a mutation run (stryker.config.mjs), not of `npm test`.
//
// Which tests a mutant faces: by default the laws and the tests written against the transforms
// themselves (Before / Expected passes, lowering, the TIR pipeline and verifier, templates, the
// emitters, the goldens) — the score says how much of a module the laws pin down, and a module
// scores in minutes. With TESSERA_MUTATION_TESTS=all (`npm run mutation -- --all-tests …`) every
// test of vitest.config.ts that runs in this process: a surviving mutant then runs all of them,
// the operator library's hundreds of end-to-end compiles included (an hour per module on 2 cores).
//
// Never the four test files that drive the built command line in child processes (cli, bad-input,
// tune-cli, tune-kill): Stryker activates a mutant in the test runner's own process, so a child
// process always runs the unmutated program and those files cannot kill a mutant.
// Stryker's runner sets the pool itself (worker threads, one per Stryker worker process), so the
// forks pool of vitest.config.ts does not apply here.
import { defineConfig } from "vitest/config"
import base from "./vitest.config.ts"

const TRANSFORM_TESTS = [
  "laws/**/*.law.ts",
  "test/rewrite.test.ts",
  "test/blocked-layout.test.ts",
  "test/lowering.test.ts",
  "test/lower-group.test.ts",
  "test/template-for.test.ts",
  "test/tir-pipeline.test.ts",
  "test/tir-verify.test.ts",
  "test/emit-c.test.ts",
  "test/emit-js.test.ts",
  "test/golden-js.test.ts",
]
const CHILD_PROCESS_TESTS = ["test/cli.test.ts", "test/bad-input.test.ts", "test/tune-cli.test.ts", "test/tune-kill.test.ts"]

const all = process.env.TESSERA_MUTATION_TESTS === "all"
// TESSERA_MUTATION_INCLUDE=glob,glob (`npm run mutation -- --tests glob,glob …`): only these test files (a quicker run on a loaded machine; its
// score is a lower bound of the default one, since fewer tests can only kill fewer mutants)
const only = process.env.TESSERA_MUTATION_INCLUDE?.split(",").filter((g) => g.length > 0)
// TESSERA_MUTATION_SKIP=regexp (`--skip-tests regexp`): leave out the tests whose names match (a law
// that compiles and runs whole graphs, say): a lower bound again
const skip = process.env.TESSERA_MUTATION_SKIP

// (spread, not mergeConfig: that would append to vitest.config.ts's include instead of replacing it)
export default defineConfig({
  ...base,
  test: {
    ...base.test,
    ...(only?.length ? { include: only } : all ? {} : { include: TRANSFORM_TESTS }),
    exclude: [...CHILD_PROCESS_TESTS, "**/node_modules/**"],
    // the build into dist/ is for the files that run the built command line or scripts: none of the transform tests
    ...(only?.length || all ? {} : { globalSetup: [] }),
    ...(skip ? { testNamePattern: new RegExp(`^(?!.*(${skip})).*$`) } : {}),
  },
})
