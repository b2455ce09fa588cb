// The `tessera` command line's entry. It loads almost nothing itself, so that a supervised command
// (run, compile) has its SIGINT / SIGTERM handlers in place a moment after the process starts: the
// commands (commands.ts, with Effect and every stage) load on a worker for those, or here for the
// rest. commands.js is bundled on its own (scripts/build.mjs), beside this file.
import { isMainThread } from "node:worker_threads"
import { supervise, SUPERVISED_COMMANDS } from "./supervise.js"

const commands = new URL("./commands.js", import.meta.url)

if (isMainThread && SUPERVISED_COMMANDS.has(process.argv[2] ?? "")) supervise(commands, process.argv.slice(2))
else await import(commands.href)
