// Bundles the CLI and the scripts into dist/ with esbuild (dependencies stay external, except the
// command line's ES-module packages: see CLI_BUNDLED).
import { build } from "esbuild"

// --outdir DIR builds elsewhere
const i = process.argv.indexOf("--outdir")
const outdir = i >= 0 ? process.argv[i + 1] : "dist"

// The command line carries the ES-module packages it loads at start inside its bundle: Node resolves
// and reads every file of an external package on each start, and Effect's barrel alone is ~280 files.
// `tessera run` on a small model starts in 1.2 s CPU instead of 1.8 (Zen 5, 2026-11-26), which the
// test suite's few hundred CLI runs feel. Every other package stays external: CommonJS ones (their
// dynamic require() fails in an ES-module bundle), native ones, heavy optional ones; and the library's
// entries (index, esbuild, browser) keep all of them external, so an app shares one Effect with them.
const CLI_BUNDLED = /^(effect|@effect\/platform-node|@bufbuild\/protobuf|onnx-buf|fast-check)(\/|$)/
const cliPackages = {
  name: "cli-packages",
  setup(b) {
    // our sources' imports of packages: external unless CLI_BUNDLED (whose own imports esbuild follows)
    b.onResolve({ filter: /^[^./]/ }, (a) =>
      a.path.startsWith("node:") || a.importer.includes("/node_modules/") || CLI_BUNDLED.test(a.path) ? undefined : { path: a.path, external: true },
    )
  },
}

await build({
  entryPoints: { "cli/main": "src/cli/main.ts", "cli/commands": "src/cli/commands.ts" },
  outdir,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  plugins: [cliPackages],
  sourcemap: "linked",
  logLevel: "warning",
})

await build({
  entryPoints: {
    "index": "src/index.ts",
    "esbuild": "src/esbuild/plugin.ts",
    "scripts/conformance": "scripts/conformance.ts",
    "scripts/optimizer-report": "scripts/optimizer-report.ts",
    "scripts/bench": "scripts/bench.ts",
    "scripts/cores-ab": "scripts/cores-ab.ts",
    "scripts/threads-ab": "scripts/threads-ab.ts",
    "scripts/parallel-balance": "scripts/parallel-balance.ts",
    "scripts/build-ab": "scripts/build-ab.ts",
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
    "scripts/parallel-ab": "scripts/parallel-ab.ts",
    "scripts/plan-ab": "scripts/plan-ab.ts",
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
    "scripts/search-time": "scripts/search-time.ts",
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
