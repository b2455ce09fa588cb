// Bundles the CLI and the scripts into dist/ with esbuild (dependencies stay external).
import { build } from "esbuild"

// --outdir DIR builds elsewhere (parallel workers must not share dist/)
const i = process.argv.indexOf("--outdir")
const outdir = i >= 0 ? process.argv[i + 1] : "dist"

await build({
  entryPoints: {
    "cli/main": "src/cli/main.ts",
    "cli/commands": "src/cli/commands.ts",
    "index": "src/index.ts",
    "esbuild": "src/esbuild/plugin.ts",
    "scripts/conformance": "scripts/conformance.ts",
    "scripts/optimizer-report": "scripts/optimizer-report.ts",
    "scripts/bench": "scripts/bench.ts",
    "scripts/int8-accuracy": "scripts/int8-accuracy.ts",
    "scripts/tuning-report": "scripts/tuning-report.ts",
    "scripts/search-curves": "scripts/search-curves.ts",
    "scripts/compile-time": "scripts/compile-time.ts",
    "scripts/layer-compare": "scripts/layer-compare.ts",
    "scripts/op-bench": "scripts/op-bench.ts",
    "scripts/int8-check": "scripts/int8-check.ts",
    "scripts/int8-wasm-bench": "scripts/int8-wasm-bench.ts",
    "scripts/run-profile": "scripts/run-profile.ts",
    "scripts/wasm-kernel-text": "scripts/wasm-kernel-text.ts",
    "scripts/wasm-ab": "scripts/wasm-ab.ts",
    "scripts/gpu-schedule-report": "scripts/gpu-schedule-report.ts",
    "scripts/gpu-prepare": "scripts/gpu-prepare.ts",
    "scripts/fuzz": "scripts/fuzz.ts",
    "scripts/qdq-agreement": "scripts/qdq-agreement.ts",
    "scripts/gpu-tune-apply": "scripts/gpu-tune-apply.ts",
    "scripts/gpu-node-ref": "scripts/gpu-node-ref.ts",
    "scripts/nvcc-conformance": "scripts/nvcc-conformance.ts",
    "scripts/nvcc-round": "scripts/nvcc-round.ts",
    "scripts/vta-report": "scripts/vta-report.ts",
    "scripts/vta-tir-report": "scripts/vta-tir-report.ts",
    "scripts/vta-accuracy": "scripts/vta-accuracy.ts",
    "scripts/qop-compare": "scripts/qop-compare.ts",
    "scripts/playground": "scripts/playground.ts",
    "scripts/browser-bench": "scripts/browser-bench.ts",
  },
  outdir,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  packages: "external",
  sourcemap: "linked",
  logLevel: "warning",
})

// the browser entry: the same stages on a page's devices (dependencies stay external, for the app's bundler)
await build({
  entryPoints: { browser: "src/browser.ts" },
  outdir,
  bundle: true,
  platform: "browser",
  format: "esm",
  target: "es2022",
  packages: "external",
  sourcemap: "linked",
  logLevel: "warning",
})
