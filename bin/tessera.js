#!/usr/bin/env node
// The `tessera` command: the bundled CLI (`npm run build` writes dist/cli/main.js).
import("../dist/cli/main.js").catch((e) => {
  if (e && e.code === "ERR_MODULE_NOT_FOUND" && String(e.message).includes("dist/cli/main.js")) {
    console.error("tessera: the CLI is not built. Run `npm run build` in the tessera folder first")
    process.exit(1)
  }
  throw e
})
