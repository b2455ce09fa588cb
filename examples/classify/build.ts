// Builds the example with tessera's esbuild plugin: node.js (run it with node) and page.js (serve
// the folder with index.html), each beside its model's assets. The model is the zoo's seeded MLP,
// written here as mlp.onnx when absent. `npm run example` builds it into examples/classify/out.
import { writeFileSync, existsSync } from "node:fs"
import * as path from "node:path"
import { build, type BuildResult, type Plugin } from "esbuild"

export const EXAMPLE_DIR = path.dirname(new URL(import.meta.url).pathname)

/** The example's model (the zoo's MLP, seeded) as mlp.onnx beside the app. */
export const writeExampleModel = (model: Uint8Array): string => {
  const file = path.join(EXAMPLE_DIR, "mlp.onnx")
  if (!existsSync(file)) writeFileSync(file, model)
  return file
}

/** The example bundled for `platform` into `outdir` with the plugin given. */
export const buildExample = (plugin: Plugin, platform: "node" | "browser", outdir: string): Promise<BuildResult> =>
  build({
    entryPoints: { [platform === "node" ? "node" : "page"]: path.join(EXAMPLE_DIR, platform === "node" ? "node.ts" : "page.ts") },
    outdir,
    bundle: true,
    platform,
    format: "esm",
    target: "es2022",
    logLevel: "silent",
    plugins: [plugin],
  })
