// The direction of imports in src/ (DESIGN.md §1, STYLE.md "Our shape"):
//
//   ast ← rewrite ← lowering ← emit
//                      ↑        ↑
//                    device   backend (emit + device)
//   zoo → ast
//   search on top of all of them; cli, pipeline.ts and index.ts over everything.
//   pipeline-core.ts (the pipeline over a backend table handed in), web (the ahead-of-time runtime
//   and the staged compile), library.ts and browser.ts: the browser's composition, never Node's.
//
// One rule per layer, each saying what that layer may import from src/; packages (node_modules,
// node:*) are not the business of these rules. test/architecture.test.ts runs this config through
// dependency-cruiser's API and expects zero violations; `npm run deps` prints them for humans.

/** The layers a rule lets a module import, as one path pattern. */
const within = (...layers) => `^src/(${layers.join("|")})/`

/** A rule: modules matching `from` may import nothing in src/ outside `allowed`. */
const layer = (name, comment, from, allowed) => ({
  name,
  comment,
  severity: "error",
  from: { path: from },
  to: { path: "^src/", pathNot: allowed },
})

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    layer(
      "ast-imports-only-ast",
      "src/ast holds the languages (graph IR, TE, schedule, TIR, ONNX decoding, targets as data) and their evaluators; it is the bottom layer and imports nothing else in src/.",
      "^src/ast/",
      within("ast"),
    ),
    layer(
      "zoo-imports-only-ast",
      "src/zoo builds standard networks as graphs: it needs the graph IR and nothing else.",
      "^src/zoo/",
      within("ast", "zoo"),
    ),
    layer(
      "rewrite-imports-only-ast",
      "src/rewrite holds the graph passes (Graph → Graph) and the rule engine; it sees only the languages.",
      "^src/rewrite/",
      within("ast", "rewrite"),
    ),
    layer(
      "lowering-imports-only-rewrite-and-ast",
      "src/lowering turns fused groups into TE, schedules and TIR; it may read rewrite's results (groups, memory plan) and the languages, never emit, device or search.",
      "^src/lowering/",
      within("ast", "rewrite", "lowering"),
    ),
    layer(
      "emit-imports-only-lowering-and-below",
      "src/emit renders lowered programs as text or bytes (pure); it never builds, runs or tunes them.",
      "^src/emit/",
      within("ast", "rewrite", "lowering", "emit"),
    ),
    layer(
      "device-never-imports-emit-or-search",
      "src/device builds, loads, runs and times artifacts beside emit: it takes an artifact as data and never imports emit or search.",
      "^src/device/",
      within("ast", "rewrite", "lowering", "device"),
    ),
    layer(
      "backend-imports-only-emit-device-and-below",
      "src/backend is the table of Backend records per target (rules, TIR pipeline, emit, device): it joins emit and device, and nothing above it.",
      "^src/backend/",
      within("ast", "rewrite", "lowering", "emit", "device", "backend"),
    ),
    {
      name: "search-stays-under-pipeline-and-cli",
      comment:
        "src/search drives lowering, emit and device to tune schedules; it sits under the composition root (src/pipeline.ts, src/index.ts) and the CLI, never imports them.",
      severity: "error",
      from: { path: "^src/search/" },
      to: { path: "^src/(cli/|pipeline\\.ts$|index\\.ts$)" },
    },
    {
      name: "only-cli-imports-cli",
      comment: "src/cli is the command line, the top of the stack: nothing in src/ outside it imports it (bin/ loads its bundle).",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/cli/" },
      to: { path: "^src/cli/" },
    },
    {
      name: "only-cli-and-index-import-pipeline",
      comment: "src/pipeline.ts is the one place that composes every stage: only the CLI, the esbuild plugin (a build-time CLI) and the package's entry point (src/index.ts) import it.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/(cli/|esbuild/|index\\.ts$)" },
      to: { path: "^src/pipeline\\.ts$" },
    },
    {
      name: "only-composition-imports-pipeline-core",
      comment: "src/pipeline-core.ts is the pipeline over a backend table: Node's (src/pipeline.ts), a browser's (src/browser.ts) and src/web bind it.",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/(web/|(pipeline|browser)\\.ts$)" },
      to: { path: "^src/pipeline-core\\.ts$" },
    },
    {
      name: "browser-side-never-imports-node-side",
      comment:
        "src/web, src/library.ts, src/browser.ts and src/pipeline-core.ts run in a browser: they never import Node's pipeline, entry, CLI, tuner, backend table or the devices' Node wiring (test/browser-entry.test.ts checks the bundle too).",
      severity: "error",
      from: { path: "^src/(web/|(library|browser|pipeline-core)\\.ts$)" },
      to: { path: "^src/(cli/|search/(tune|tuners|cost-model)\\.ts$|backend/index\\.ts$|device/(c|cuda)/|device/[a-z]+/node\\.ts$|(pipeline|index)\\.ts$)" },
    },
    {
      name: "nothing-imports-index",
      comment: "src/index.ts is the package's entry point, re-exporting the stages: no module in src/ imports it.",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "^src/(index|browser)\\.ts$" },
    },
    {
      name: "every-module-in-a-layer",
      comment:
        "Every module in src/ lives in a layer named here (a folder, or pipeline.ts / index.ts); a new folder gets its own rule before it gets code.",
      severity: "error",
      from: {
        path: "^src/",
        pathNot: "^src/((ast|zoo|rewrite|lowering|emit|device|backend|search|cli|web|esbuild)/|(pipeline|pipeline-core|index|library|browser)\\.ts$)",
      },
      to: {},
    },
    {
      name: "no-circular",
      comment: "No import cycles, type-only imports included: every import goes one way.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    // Count `import type` too: a type-only cycle is still a cycle in the design.
    tsPreCompilationDeps: true,
    // TypeScript 7 has no compiler API for dependency-cruiser to parse with; swc reads the .ts files.
    parser: "swc",
    // Resolves our `./x.js` specifiers to `x.ts` the way tsc does.
    tsConfig: { fileName: "tsconfig.json" },
    doNotFollow: { path: "node_modules" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      mainFields: ["module", "main", "types", "typings"],
    },
  },
}
