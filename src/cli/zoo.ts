// `tessera zoo NAME --out FILE.onnx`: writes a standard network with seeded weights; without a
// name, lists the zoo.
import { Effect } from "effect"
import * as path from "node:path"
import { ensureFolderSync, writeFileAtomic } from "../device/files.js"
import { isZooName, ZOO, ZOO_NAMES, zooModel } from "../zoo/index.js"
import { attempt, UsageError } from "./errors.js"

export interface ZooOptions {
  readonly name?: string
  readonly out?: string
  readonly seed: number
}

/** The zoo's names and descriptions, one per line. */
export const zooList = (): string => {
  const width = Math.max(...ZOO_NAMES.map((n) => n.length))
  return ZOO_NAMES.map((n) => `${n.padEnd(width)}  ${ZOO[n].description}`).join("\n")
}

/** Writes the model; returns the one-line JSON summary (or the list when no name is given). */
export const zooCommand = Effect.fn("cli.zoo")(function* (o: ZooOptions) {
  if (o.name === undefined) return zooList()
  const name = o.name
  if (!isZooName(name)) return yield* new UsageError({ flag: "NAME", reason: `no zoo model '${name}' (the zoo has: ${ZOO_NAMES.join(", ")})` })
  if (o.out === undefined) return yield* new UsageError({ flag: "--out", reason: "say where to write the model: --out FILE.onnx" })
  const out = o.out
  const bytes = yield* attempt(() => zooModel(name, o.seed))
  yield* attempt(() => ensureFolderSync(path.dirname(path.resolve(out))))
  yield* writeFileAtomic(out, bytes)
  return JSON.stringify({ model: name, seed: o.seed, file: out, bytes: bytes.length })
})
