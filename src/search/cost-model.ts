// The cost model: predicts a candidate's relative speed from its features. A service, so a better
// booster can replace XGBoost later. The XGBoost implementation (ml-xgboost, WebAssembly) regresses
// normalised throughput; its limits are handled here: training rows are capped so rows × features
// × 4 bytes stays under its fixed wasm stack, its numeric throws become typed errors, boosters are
// freed, and its load-time notice is kept off the user's screen.
import { Context, Data, Effect, Layer } from "effect"
import { createRequire } from "node:module"

export class CostModelError extends Data.TaggedError("CostModelError")<{ readonly operation: string; readonly reason: string }> {
  override get message(): string {
    return `cost model ${this.operation}: ${this.reason}`
  }
}

export interface CostModelShape {
  /** Trains on feature rows and their normalised throughput (higher is better). */
  readonly fit: (xs: readonly (readonly number[])[], ys: readonly number[]) => Effect.Effect<void, CostModelError>
  /** Predicted normalised throughput per row (0 when untrained). */
  readonly predict: (xs: readonly (readonly number[])[]) => Effect.Effect<number[], CostModelError>
  readonly save: () => Effect.Effect<unknown, CostModelError>
  readonly load: (model: unknown) => Effect.Effect<void, CostModelError>
  readonly trained: () => boolean
}

export class CostModel extends Context.Service<CostModel, CostModelShape>()("tessera/search/CostModel") {}

/** The wasm stack holds the training matrix: rows × features × 4 bytes must stay under ~5 MB. */
export const MAX_TRAIN_BYTES = 4_500_000

interface Booster {
  train(xs: number[][], ys: number[]): void
  predict(xs: number[][]): number[]
  toJSON(): unknown
  free(): void
}
interface XGBoostCtor {
  new (options: Record<string, unknown>): Booster
  load(model: unknown): Booster
}

let xgboostModule: Promise<XGBoostCtor> | undefined
/** Loads ml-xgboost once, with its "wasm streaming compile failed" notice silenced. */
const loadXGBoost = (): Promise<XGBoostCtor> => {
  xgboostModule ??= (async () => {
    const saved = { log: console.log, warn: console.warn, error: console.error }
    const quiet = (...args: unknown[]) => {
      const text = args.map(String).join(" ")
      if (/wasm streaming compile failed|falling back to ArrayBuffer/.test(text)) return
      saved.warn(...args)
    }
    console.log = quiet
    console.warn = quiet
    console.error = quiet
    try {
      // its CommonJS entry (the "module" field points at a file mixing import and module.exports)
      const require = createRequire(import.meta.url)
      return await (require("ml-xgboost") as Promise<XGBoostCtor>)
    } finally {
      Object.assign(console, saved)
    }
  })()
  return xgboostModule
}

const wrap = <A>(operation: string, f: () => A): Effect.Effect<A, CostModelError> =>
  Effect.try({
    try: f,
    // ml-xgboost throws numbers (wasm exceptions), not Errors
    catch: (e) => new CostModelError({ operation, reason: e instanceof Error ? e.message : `xgboost failed (code ${String(e)})` }),
  })

/** Keeps the newest rows that fit the wasm stack (and a deterministic subsample of older ones). */
export const capRows = <T>(rows: readonly T[], features: number): T[] => {
  const max = Math.max(1, Math.floor(MAX_TRAIN_BYTES / (4 * Math.max(features, 1))))
  if (rows.length <= max) return [...rows]
  const keepNew = Math.floor(max / 2)
  const older = rows.slice(0, rows.length - keepNew)
  const step = older.length / (max - keepNew)
  const sampled = Array.from({ length: max - keepNew }, (_, k) => older[Math.floor(k * step)])
  return [...sampled, ...rows.slice(rows.length - keepNew)]
}

export const XGBOOST_PARAMS = {
  booster: "gbtree",
  objective: "reg:linear",
  max_depth: 6,
  eta: 0.3,
  min_child_weight: 1,
  subsample: 1,
  colsample_bytree: 1,
  silent: 1,
  iterations: 60,
} as const

export const makeXGBoostModel = Effect.fn("tessera.search.makeXGBoostModel")(function* () {
  const X = yield* Effect.tryPromise({
    try: loadXGBoost,
    catch: (e) => new CostModelError({ operation: "load", reason: e instanceof Error ? e.message : String(e) }),
  })
  let booster: Booster | undefined
  const replace = (b: Booster | undefined) => {
    booster?.free()
    booster = b
  }
  const shape: CostModelShape = {
    fit: (xs, ys) =>
      wrap("fit", () => {
        if (xs.length < 2) return
        const idx = capRows(xs.map((_, k) => k), xs[0].length)
        const b = new X(XGBOOST_PARAMS)
        b.train(
          idx.map((k) => [...xs[k]]),
          idx.map((k) => ys[k]),
        )
        replace(b)
      }),
    predict: (xs) => wrap("predict", () => (booster && xs.length ? booster.predict(xs.map((r) => [...r])) : xs.map(() => 0))),
    save: () => wrap("save", () => (booster ? JSON.parse(JSON.stringify(booster.toJSON())) : null)),
    load: (model) => wrap("load", () => replace(model ? X.load(model) : undefined)),
    trained: () => booster !== undefined,
  }
  return shape
})

/** The XGBoost cost model as a layer (a fresh model per use). */
export const XGBoostCostModel = Layer.effect(CostModel, makeXGBoostModel())
