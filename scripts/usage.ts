// `--help` / `-h` for the scripts that take options: print the usage and stop before any work
// (conformance without it would run every case and rewrite docs/conformance.*).

/** Prints `usage` and exits 0 when `args` asks for help; otherwise returns. */
export const helpRequested = (args: readonly string[], usage: string): void => {
  if (!args.includes("--help") && !args.includes("-h")) return
  console.log(usage.trim())
  process.exit(0)
}
