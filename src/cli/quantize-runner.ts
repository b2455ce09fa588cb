// Where `tessera quantize` runs the graphs it observes (--calibrate-on): a compiled target — the
// graph compiled once with every observed value made a graph output, each calibration input run
// through the loaded kernels — or the reference evaluator (interp). The default (auto) is wasm:
// it compiles in process in seconds and needs no toolchain. Measured on a shared 2-core Zen 4
// (MobileNetV2, 8 inputs, the machine loaded ~15): wasm compiled each graph in 5.4 s and ran the
// fp32 graph in ~0.17 s an input; c took 31–36 s a graph to build with gcc on a cold cache and its
// runs were no faster (the observed outputs leave 169 kernels, each with its layout copies), and
// the evaluator ~1.5 s an input. So c is there to be asked for, not the default.
//
// What differs from the evaluator: a compiled kernel sums in its own order (vector lanes, tiles,
// Winograd), so a calibrated range may differ from the evaluator's in its last bits, and so may a
// scale. Where the float values agree (ops that do not reassociate), the model written is the same
// bytes; `--calibrate-on interp` gives the evaluator's, the ONNX meaning, exactly.
import { Effect } from "effect"
import type { Interrupt } from "../ast/graph/errors.js"
import { checkInterrupt } from "../ast/graph/errors.js"
import type { Graph } from "../ast/graph/graph.js"
import { bind } from "../ast/graph/infer.js"
import type { TargetKind } from "../ast/target.js"
import { evaluatorRunner, observingInputs, withObservedOutputs, type GraphRunner } from "../rewrite/quantize/index.js"
import { UsageError } from "./errors.js"
import { prepare, targetMissing, targetSettings } from "./targets.js"

/** What --calibrate-on takes: a target, or auto (the first of AUTO_ORDER this host can build). */
export const CALIBRATE_ON = ["auto", "c", "wasm", "js", "interp"] as const
export type CalibrateOn = (typeof CALIBRATE_ON)[number]

/** The compiled targets auto tries, in order: the fastest to compile and run (see the header). */
const AUTO_ORDER: readonly TargetKind[] = ["wasm", "c", "js"]

const isCalibrateOn = (s: string): s is CalibrateOn => (CALIBRATE_ON as readonly string[]).includes(s)

/** The target --calibrate-on names here (auto resolved on this host), or a usage error. */
export const calibrationTarget = (on: string): Effect.Effect<TargetKind, UsageError> => {
  if (!isCalibrateOn(on)) return Effect.fail(new UsageError({ flag: "--calibrate-on", reason: `'${on}' is not one of ${CALIBRATE_ON.join(", ")}` }))
  if (on === "auto") return Effect.succeed(AUTO_ORDER.find((k) => targetMissing(k) === undefined) ?? "interp")
  const missing = on === "interp" ? undefined : targetMissing(on)
  return missing ? Effect.fail(new UsageError({ flag: "--calibrate-on", reason: `the ${on} target is not available here: ${missing}` })) : Effect.succeed(on)
}

/** The QDQ graph's meaning is the float graph with its Q/DQ: compiled as it is, not rewritten to integer ops. */
const QDQ_MEANING: ReadonlySet<string> = new Set(["rewrite.QdqToInteger"])

/**
 * The runner for `kind`: the evaluator for interp; else each graph compiled for the target (opt
 * level 3, this host's record for `threads` cores, as compile and bench take --threads) with its
 * observed values as outputs, loaded once and run per input.
 * `onCompile` is told before each compile (the CLI says so on a terminal).
 */
export const quantizeRunner = (kind: TargetKind, threads: number, interrupt: Interrupt | undefined, onCompile: (which: string) => void = () => {}) => {
  if (kind === "interp") return evaluatorRunner(interrupt)
  const runner = (graph: Graph, observe: ReadonlySet<string>, which: "fp32" | "qdq") =>
    Effect.gen(function* () {
      onCompile(which)
      const shapes = new Map(graph.inputs.map((i) => [i.name, i.type.shape as number[]] as const))
      // (the QDQ graph comes unbound: its new values' types are inferred here)
      const bound = yield* bind(graph, shapes, { requireStatic: true, ...(interrupt ? { interrupt } : {}) })
      const model = yield* prepare(withObservedOutputs(bound, observe), {
        settings: targetSettings(kind, threads),
        optLevel: 3,
        shapes,
        trace: false,
        ...(interrupt ? { interrupt } : {}),
        ...(which === "qdq" ? { disabled: QDQ_MEANING } : {}),
      })
      return observingInputs(graph, observe, (feeds) => {
        checkInterrupt(interrupt, () => "the next calibration input")
        return model.run(feeds)
      })
    })
  return runner satisfies GraphRunner<unknown>
}
