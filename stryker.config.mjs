// Mutation testing (StrykerJS 9, vitest runner): do the laws and tests notice when a transform is
// changed? Run by hand, never by CI: `npm run mutation -- <files>` (scripts/mutation.mjs) scores the
// given source files alone; `npx stryker run` scores every module below (hours on 2 cores).
// docs/laws.md has the scores, the equivalent mutants and the open gaps.
/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  // The transform modules: graph passes and rules, TIR passes, schedule primitives, the TE
  // simplifier, the emitters' expression printers. Not the pass plumbing (rewrite/pass.ts,
  // verify.ts, report.ts, index.ts): they transform nothing.
  mutate: [
    "src/rewrite/*.ts",
    "!src/rewrite/index.ts",
    "!src/rewrite/pass.ts",
    "!src/rewrite/report.ts",
    "!src/rewrite/verify.ts",
    "src/lowering/tir/*.ts",
    "src/ast/schedule/*.ts",
    "src/ast/te/simplify.ts",
    "src/emit/c/expr.ts",
    "src/emit/js/expr.ts",
  ],

  testRunner: "vitest",
  vitest: {
    // The laws and the transforms' own tests (or, with --all-tests, every test that runs in this
    // process): the file says which and why.
    configFile: "vitest.mutation.config.ts",
    // Only the test files that import the mutated module (through any chain) run at all.
    related: true,
  },
  // No checker: @stryker-mutator/typescript-checker needs the TypeScript compiler API, which
  // TypeScript 7 no longer has. Mutants that would not type-check run anyway (mostly killed).
  checkers: [],
  // and so no `// @ts-nocheck` atop the sandbox's files either: by default Stryker writes it into
  // every .js/.ts file it copies, golden/js/*.js included, and the js goldens then differ by that
  // line. Nothing type-checks a mutation run (vitest strips the types), so nothing needs it.
  disableTypeChecks: false,
  // Each mutant runs only the tests that executed its code in the initial run: minutes per module
  // instead of hours.
  coverageAnalysis: "perTest",
  // Stryker rewrites the sandbox's tsconfig.json (its `extends` and `references`) with the
  // TypeScript compiler API, which TypeScript 7 does not have (ts.parseConfigFileTextToJson is
  // gone): it fails before the first test. Our tsconfig.json has neither, so there is nothing to
  // rewrite; naming a file that does not exist turns the rewrite off.
  tsconfigFile: "tsconfig.stryker-has-nothing-to-rewrite.json",

  // Two cores: one vitest worker per core. Lower it (--concurrency 1) on a busy machine.
  concurrency: 2,
  // A law runs a few hundred generated cases; a mutant that slows it (a loop bound off by one) is
  // not a hang, so allow three times the initial run's time plus 20 s before calling it one.
  timeoutFactor: 3,
  timeoutMS: 20_000,
  // The initial run of every related test, instrumented, on a loaded machine.
  dryRunTimeoutMinutes: 30,

  reporters: ["clear-text", "progress", "json", "html"],
  // the survivors, with their place and replacement; not the list of every test
  clearTextReporter: { allowColor: false, logTests: false, reportTests: false, reportMutants: true },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  htmlReporter: { fileName: "reports/mutation/mutation.html" },

  // The sandbox copies the working tree; leave out what no test reads.
  ignorePatterns: ["dist", ".cache", "*.log"],
  tempDirName: ".stryker-tmp",
  cleanTempDir: true,
}
