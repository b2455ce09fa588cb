import { availableParallelism } from "node:os"
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "laws/**/*.law.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    // the command line and the scripts built once into dist/ for the files that run them (test/support/dist.ts)
    globalSetup: ["test/support/build-dist.ts"],
    // vitest leaves one core idle by default (cpus - 1): on CI's 2-core machine that ran the files one
    // at a time. Most of the slow files wait on gcc or a child process, so every core runs a file.
    maxWorkers: availableParallelism(),
    reporters: ["default"],
  },
})
