// The vitest configuration of a mutation run (stryker.config.mjs), not of `npm test`.
//
// It is vitest.config.ts less the four test files that drive the built command line in child
// processes (cli, bad-input, tune-cli, tune-kill): Stryker activates a mutant in the test runner's
// own process, so a child process always runs the unmutated program and those files can never
// kill a mutant; they would only add their esbuild builds and a minute of spawned compiles to every
// initial run. Stryker's runner overrides the pool (worker threads, one worker per Stryker process)
// whatever this file says, so the forks pool of vitest.config.ts does not matter here.
import { defineConfig, mergeConfig } from "vitest/config"
import base from "./vitest.config.ts"

export default mergeConfig(
  base,
  defineConfig({
    test: {
      exclude: ["test/cli.test.ts", "test/bad-input.test.ts", "test/tune-cli.test.ts", "test/tune-kill.test.ts", "**/node_modules/**"],
    },
  }),
)
