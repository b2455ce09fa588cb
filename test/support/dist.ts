// The built command line and scripts (`npm run build` into dist/), as users run them. Built once for
// the whole run, before any test file starts, by test/support/build-dist.ts (vitest's globalSetup):
// the files that drive them in child processes share that build instead of each building its own.
import * as path from "node:path"

export const ROOT = path.resolve(import.meta.dirname, "..", "..")
export const DIST = path.join(ROOT, "dist")
/** `tessera` as installed: bin/tessera.js, which loads dist/cli/main.js. */
export const BIN = path.join(ROOT, "bin", "tessera.js")
/** The command line's entry itself. */
export const CLI = path.join(DIST, "cli", "main.js")
/** A script's bundle: dist/scripts/NAME.js. */
export const script = (name: string): string => path.join(DIST, "scripts", `${name}.js`)
