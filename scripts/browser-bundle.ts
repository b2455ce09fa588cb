// The browser build of the library: src/browser.ts bundled by esbuild for the browser platform,
// with the Node builtins any bundled file imports (there must be none) recorded instead of failing
// the build, so a check can name each one and its importer. Used by test/browser-entry.test.ts
// and the playground's build.
import { builtinModules } from "node:module"
import { build, type BuildOptions, type Plugin } from "esbuild"

const BUILTINS = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]))

/** A Node builtin a bundled file imports. */
export interface NodeImport {
  readonly importer: string
  readonly path: string
}

/** Records each Node builtin import (and keeps it external, so the build finishes and reports them all). */
export const nodeImportsPlugin = (found: NodeImport[]): Plugin => ({
  name: "tessera-node-imports",
  setup(b) {
    b.onResolve({ filter: /.*/ }, (a) => {
      const bare = a.path.split("/")[0]
      if (!a.path.startsWith("node:") && !BUILTINS.has(a.path) && !BUILTINS.has(bare)) return undefined
      found.push({ importer: a.importer, path: a.path })
      return { path: a.path, external: true }
    })
  },
})

/** Bundles `entry` for the browser; the bundle's bytes and the Node builtins reachable from it. */
export const bundleForBrowser = async (entry: string, options: BuildOptions = {}): Promise<{ readonly bytes: number; readonly nodeImports: readonly NodeImport[] }> => {
  const found: NodeImport[] = []
  const r = await build({
    entryPoints: [entry],
    bundle: true,
    platform: "browser",
    format: "esm",
    target: "es2022",
    write: false,
    logLevel: "silent",
    ...options,
    plugins: [nodeImportsPlugin(found), ...(options.plugins ?? [])],
  })
  return { bytes: r.outputFiles?.reduce((s, f) => s + f.contents.length, 0) ?? 0, nodeImports: found }
}
