// The `tessera` commands (effect/cli on the Node runtime), loaded by main.ts. Each subcommand is an
// Effect whose failures are the stages' typed errors; here they become one line on stderr and a
// non-zero exit: 1 for a failure of the work, 2 for a command line that does not parse. Loading
// this module runs the command line (on the main thread, or on the worker of a supervised command).
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Cause, Console, Data, Effect, Exit, Layer, Option } from "effect"
import { Argument, CliOutput, Command, Flag } from "effect/cli"
import { errorLine, tagOf, UsageError } from "./errors.js"
import { INSPECT_FORMATS, inspectModel } from "./inspect.js"
import { DEMO_TARGET, demo, demoOutcome, demoTable } from "./demo.js"
import { runModel } from "./run.js"
import { COMPILE_TARGETS, compileCommand } from "./compile.js"
import { BENCH_FORMATS, benchCommand, benchText } from "./bench.js"
import { TARGETS } from "./targets.js"
import { zooCommand } from "./zoo.js"
import { compileVtaCommand, inspectVta, parseVtaFlags, runVtaCommand } from "./vta.js"
import { DEFAULT_SEEDED_INPUTS, QUANTIZE_FORMATS, quantizeCommand } from "./quantize.js"
import { CALIBRATE_ON } from "./quantize-runner.js"
import * as tty from "node:tty"
import { tuneCommandLine } from "./tune.js"
import { ZOO_NAMES, zooModel } from "../zoo/index.js"
import { announceFinished, announceStarted, commandInterrupt, isSupervisedWorker, parseDeadline, writeStdioDirectly } from "./supervise.js"

const VERSION = "0.1.0"

/** A command's typed failure, already rendered as its one stderr line. */
class CommandFailed extends Data.TaggedError("CommandFailed")<{ readonly line: string; readonly exitCode: number }> {}

/** Renders a command's typed failures with the command's name and model file. */
const reported =
  (command: string, model?: string) =>
  <A, E>(eff: Effect.Effect<A, E>): Effect.Effect<A, CommandFailed> =>
    Effect.catch(eff, (e) => Effect.fail(new CommandFailed({ line: errorLine(command, e, { model }), exitCode: tagOf(e) === "UsageError" || tagOf(e) === "NoGpuError" ? 2 : 1 })))

const model = Argument.String("model").pipe(Argument.withDescription("an ONNX model file (.onnx)"))
const seedFlag = (what: string) => Flag.Int("seed").pipe(Flag.withDefault(0), Flag.withDescription(`seed for ${what}`))
const shape = Flag.String("shape").pipe(
  Flag.atLeast(0),
  Flag.withDescription("NAME=1x3x224x224: bind an input's dims without giving data (repeatable)"),
)

const deadline = Flag.String("deadline").pipe(
  Flag.optional,
  Flag.withDescription("stop with an error when compiling and running take longer than this: 30s, 500ms, 2m (SIGINT and SIGTERM stop the work too)"),
)

/** Checks --deadline (the supervisor only arms a valid one; an invalid one is a usage error here). */
const checkDeadline = (d: Option.Option<string>): Effect.Effect<void, UsageError> =>
  Option.isSome(d) && parseDeadline(d.value) === undefined
    ? Effect.fail(new UsageError({ flag: "--deadline", reason: `'${d.value}' is not a duration like 30s, 500ms or 2m` }))
    : Effect.void

const optLevel = Flag.Int("opt-level").pipe(Flag.withDefault(3), Flag.withDescription("graph passes to run: 0 (none) to 3 (all, with fusion and layout)"))
const stderrLine = (line: string) => Console.error(line)

const run = Command.make(
  "run",
  {
    model,
    target: Flag.String("target").pipe(Flag.withDefault("interp"), Flag.withDescription(`where to run: ${TARGETS.join(", ")} (interp: the reference interpreter on the optimized graph), or vta (a quantized model's convolutions and residual adds on the simulated VTA accelerator, the rest on c)`)),
    optLevel,
    dumpIr: Flag.String("dump-ir").pipe(Flag.optional, Flag.withDescription("folder for the IR after each pass and each kernel's TIR (NN-pass-name.txt)")),
    report: Flag.Boolean("report").pipe(Flag.withDefault(false), Flag.withDescription("print the passes run, their time and node counts (stderr; also in the summary)")),
    input: Flag.String("input").pipe(
      Flag.atLeast(0),
      Flag.withDescription("NAME=FILE.npy: an input's data (split at the last '='; repeatable); inputs not given are seeded random"),
    ),
    shape,
    out: Flag.String("out").pipe(Flag.optional, Flag.withDescription("folder for the outputs, written as DIR/NAME.npy")),
    tuned: Flag.String("tuned").pipe(Flag.optional, Flag.withDescription("vta: a tuning log from 'tessera tune --target vta': its best schedules are applied (report on stderr)")),
    seed: seedFlag("the random inputs"),
    deadline,
  },
  (c) =>
    Effect.gen(function* () {
      yield* reported("run", c.model)(checkDeadline(c.deadline))
      const interrupt = commandInterrupt()
      if (c.target === "vta") {
        const flags = yield* reported("run", c.model)(parseVtaFlags(c.input, c.shape))
        const summary = yield* reported("run", c.model)(
          runVtaCommand({
            model: c.model,
            ...flags,
            seed: c.seed,
            optLevel: c.optLevel,
            report: c.report,
            log: stderrLine,
            ...(Option.isSome(c.out) ? { out: c.out.value } : {}),
            ...(Option.isSome(c.dumpIr) ? { dumpIr: c.dumpIr.value } : {}),
            ...(Option.isSome(c.tuned) ? { tuned: c.tuned.value } : {}),
            ...(interrupt ? { interrupt } : {}),
          }),
        )
        yield* Console.log(JSON.stringify(summary))
        return
      }
      if (Option.isSome(c.tuned)) return yield* reported("run", c.model)(Effect.fail(new UsageError({ flag: "--tuned", reason: "run applies tuning records only with --target vta (compile and bench apply them on the other targets)" })))
      const summary = yield* reported("run", c.model)(runModel({
        ...(interrupt ? { interrupt } : {}),
        model: c.model,
        target: c.target,
        inputs: c.input,
        shapes: c.shape,
        out: Option.getOrUndefined(c.out),
        seed: c.seed,
        optLevel: c.optLevel,
        dumpIr: Option.getOrUndefined(c.dumpIr),
        report: c.report,
        log: stderrLine,
      }))
      yield* Console.log(JSON.stringify(summary))
    }),
).pipe(Command.withDescription("Compile and run a model; print one JSON line summary"))

const inspect = Command.make(
  "inspect",
  {
    model,
    format: Flag.Literals("format", INSPECT_FORMATS).pipe(Flag.withDefault("text" as const), Flag.withDescription("text, json (one object on the last line), dot or svg (Graphviz, rendered in process)")),
    fused: Flag.Boolean("fused").pipe(Flag.withDefault(false), Flag.withDescription("show the fused groups and the memory plan after the graph passes")),
    target: Flag.String("target").pipe(Flag.optional, Flag.withDescription("vta: per offloaded layer its instructions, cycles, bytes and utilization with and without virtual threads, the CPU/VTA copies and the whole network's time")),
    tuned: Flag.String("tuned").pipe(Flag.optional, Flag.withDescription("with --target vta: a log from 'tessera tune --target vta', applied; per conv layer the cycles and utilization tuned vs default")),
    shape,
    deadline,
  },
  (c) =>
    Effect.gen(function* () {
      yield* reported("inspect", c.model)(checkDeadline(c.deadline))
      const interrupt = commandInterrupt()
      if (Option.isSome(c.target)) {
        if (c.target.value !== "vta") return yield* reported("inspect", c.model)(Effect.fail(new UsageError({ flag: "--target", reason: `inspect knows only vta, not '${c.target.value}'` })))
        if (c.fused) return yield* reported("inspect", c.model)(Effect.fail(new UsageError({ flag: "--fused", reason: "--target vta shows the partition and the VTA layers, not the c graph's fused groups (inspect the model without --target for those)" })))
        if (c.format !== "text") return yield* reported("inspect", c.model)(Effect.fail(new UsageError({ flag: "--format", reason: `--target vta prints text only, not ${c.format}` })))
        const flags = yield* reported("inspect", c.model)(parseVtaFlags([], c.shape))
        yield* Console.log(
          yield* reported("inspect", c.model)(
            inspectVta({ model: c.model, shapes: flags.shapes, seed: 0, log: stderrLine, ...(Option.isSome(c.tuned) ? { tuned: c.tuned.value } : {}), ...(interrupt ? { interrupt } : {}) }),
          ),
        )
        return
      }
      if (Option.isSome(c.tuned)) return yield* reported("inspect", c.model)(Effect.fail(new UsageError({ flag: "--tuned", reason: "inspect applies tuning records only with --target vta" })))
      yield* Console.log(yield* reported("inspect", c.model)(inspectModel({ model: c.model, format: c.format, shapes: c.shape, fused: c.fused, ...(interrupt ? { interrupt } : {}) })))
    }),
).pipe(Command.withDescription("Show a model's inputs, outputs, operators, parameters and FLOPs"))

const zoo = Command.make(
  "zoo",
  {
    name: Argument.String("name").pipe(Argument.optional, Argument.withDescription(`a zoo network: ${ZOO_NAMES.join(", ")} (none: list them)`)),
    out: Flag.String("out").pipe(Flag.optional, Flag.withDescription("the .onnx file to write")),
    seed: seedFlag("the weights"),
  },
  (c) =>
    Effect.gen(function* () {
      yield* Console.log(yield* reported("zoo")(zooCommand({ name: Option.getOrUndefined(c.name), out: Option.getOrUndefined(c.out), seed: c.seed })))
    }),
).pipe(Command.withDescription("Write a standard network (seeded weights) as ONNX, or list the zoo"))

const compile = Command.make(
  "compile",
  {
    model,
    target: Flag.String("target").pipe(Flag.withDefault("js"), Flag.withDescription(`${COMPILE_TARGETS.join(", ")}, vta (VTA instruction streams, micro-ops, packed weights, the c segments and a manifest)`)),
    out: Flag.String("out").pipe(Flag.withDescription("folder for the artifact (code, constants.bin, manifest.json)")),
    tuned: Flag.String("tuned").pipe(Flag.optional, Flag.withDescription("a tuning log from 'tessera tune': its best records are applied (report on stderr)")),
    threads: Flag.Int("threads").pipe(Flag.withDefault(1), Flag.withDescription("cores the parallel loops may use (c; tuning records are per thread count)")),
    cudaArch: Flag.String("cuda-arch").pipe(Flag.optional, Flag.withDescription("the GPU architecture of --target cuda: sm_90 (H100, H200; the default), sm_80 (A100), …")),
    precision: Flag.String("precision").pipe(Flag.optional, Flag.withDescription("the storage precision of --target cuda: fp32 (the default) or fp16 (__half tensors and weights in the arena, float32 arithmetic and accumulation, float32 inputs and outputs)")),
    optLevel,
    shape,
    deadline,
  },
  (c) =>
    Effect.gen(function* () {
      yield* reported("compile", c.model)(checkDeadline(c.deadline))
      const interrupt = commandInterrupt()
      if (c.target === "vta") {
        const flags = yield* reported("compile", c.model)(parseVtaFlags([], c.shape))
        if (c.threads !== 1) return yield* reported("compile", c.model)(Effect.fail(new UsageError({ flag: "--threads", reason: "--target vta compiles its c segments for one thread (the executor runs them on one)" })))
        if (Option.isSome(c.cudaArch)) return yield* reported("compile", c.model)(Effect.fail(new UsageError({ flag: "--cuda-arch", reason: "is for --target cuda, not vta" })))
        if (Option.isSome(c.precision)) return yield* reported("compile", c.model)(Effect.fail(new UsageError({ flag: "--precision", reason: "is for --target cuda, not vta" })))
        const summary = yield* reported("compile", c.model)(
          compileVtaCommand({ model: c.model, out: c.out, shapes: flags.shapes, optLevel: c.optLevel, log: stderrLine, ...(Option.isSome(c.tuned) ? { tuned: c.tuned.value } : {}), ...(interrupt ? { interrupt } : {}) }),
        )
        yield* Console.log(JSON.stringify(summary))
        return
      }
      const summary = yield* reported("compile", c.model)(
        compileCommand({ ...(interrupt ? { interrupt } : {}), model: c.model, target: c.target, out: c.out, tuned: Option.getOrUndefined(c.tuned), threads: c.threads, cudaArch: Option.getOrUndefined(c.cudaArch), precision: Option.getOrUndefined(c.precision), optLevel: c.optLevel, shapes: c.shape, log: stderrLine }),
      )
      yield* Console.log(JSON.stringify(summary))
    }),
).pipe(Command.withDescription("Compile a model and write the artifact (deterministic bytes); print one JSON line"))

const bench = Command.make(
  "bench",
  {
    model,
    target: Flag.String("target").pipe(Flag.withDefault("js"), Flag.withDescription(TARGETS.join(", "))),
    tuned: Flag.String("tuned").pipe(Flag.optional, Flag.withDescription("a tuning log from 'tessera tune' (report on stderr)")),
    threads: Flag.Int("threads").pipe(Flag.withDefault(1), Flag.withDescription("threads on both sides (c: its thread pool; onnxruntime: intraOpNumThreads)")),
    runs: Flag.Int("runs").pipe(Flag.withDefault(10), Flag.withDescription("timed runs per side after the warm-up (median reported)")),
    format: Flag.Literals("format", BENCH_FORMATS).pipe(Flag.withDefault("text" as const), Flag.withDescription("text, or json (one object on the last line)")),
    optLevel,
    shape,
    seed: seedFlag("the random inputs"),
    deadline,
  },
  (c) =>
    Effect.gen(function* () {
      yield* reported("bench", c.model)(checkDeadline(c.deadline))
      const interrupt = commandInterrupt()
      const r = yield* reported("bench", c.model)(
        benchCommand({
          ...(interrupt ? { interrupt } : {}),
          model: c.model,
          target: c.target,
          tuned: Option.getOrUndefined(c.tuned),
          threads: c.threads,
          runs: c.runs,
          optLevel: c.optLevel,
          shapes: c.shape,
          seed: c.seed,
          format: c.format,
          log: stderrLine,
        }),
      )
      yield* Console.log(c.format === "json" ? JSON.stringify(r) : benchText(r))
    }),
).pipe(Command.withDescription("Median latency on a target, with onnxruntime-node beside it when installed"))

const quantize = Command.make(
  "quantize",
  {
    model,
    out: Flag.String("out").pipe(Flag.optional, Flag.withDescription("the QDQ model to write (MODEL.int8.onnx)")),
    calibrate: Flag.String("calibrate").pipe(Flag.optional, Flag.withDescription("a folder of .npy calibration inputs (one file per input for a one-input model; else a folder per set holding NAME.npy)")),
    calibrateSeeded: Flag.Int("calibrate-seeded").pipe(Flag.optional, Flag.withDescription(`calibrate on N seeded random inputs (default ${DEFAULT_SEEDED_INPUTS} when no --calibrate)`)),
    perChannel: Flag.Boolean("per-channel").pipe(Flag.withDefault(false), Flag.withDescription("int8 weights with a scale per output channel (axis 0 of Conv)")),
    method: Flag.String("method").pipe(Flag.withDefault("minmax"), Flag.withDescription("calibration: minmax, percentile or entropy (KL divergence, as TensorRT and onnxruntime)")),
    percentile: Flag.Finite("percentile").pipe(Flag.optional, Flag.withDescription("--method percentile: the percentile kept (default 99.99)")),
    skip: Flag.String("skip").pipe(Flag.atLeast(0), Flag.withDescription("a node left float on purpose (repeatable, or comma-separated)")),
    shape,
    seed: seedFlag("the seeded calibration inputs"),
    format: Flag.Literals("format", QUANTIZE_FORMATS).pipe(Flag.withDefault("text" as const), Flag.withDescription("text (a table, then a JSON line), or json (one object with every layer)")),
    calibrateOn: Flag.String("calibrate-on").pipe(
      Flag.withDefault("auto"),
      Flag.withDescription(`where the fp32 model runs to be observed: ${CALIBRATE_ON.join(", ")} (auto: wasm, which compiles in seconds; interp: the reference evaluator, the ONNX meaning exactly, slower)`),
    ),
    threads: Flag.Int("threads").pipe(Flag.withDefault(1), Flag.withDescription("cores the compiled model's parallel loops may use while calibrating (c)")),
    deadline,
  },
  (c) =>
    Effect.gen(function* () {
      yield* reported("quantize", c.model)(checkDeadline(c.deadline))
      const interrupt = commandInterrupt()
      const text = yield* reported("quantize", c.model)(
        quantizeCommand({
          ...(interrupt ? { interrupt } : {}),
          calibrateOn: c.calibrateOn,
          threads: c.threads,
          model: c.model,
          out: Option.getOrUndefined(c.out),
          calibrate: Option.getOrUndefined(c.calibrate),
          calibrateSeeded: Option.getOrUndefined(c.calibrateSeeded),
          perChannel: c.perChannel,
          method: c.method,
          percentile: Option.getOrUndefined(c.percentile),
          skip: c.skip,
          shapes: c.shape,
          seed: c.seed,
          format: c.format,
          progress: tty.isatty(2),
        }),
      )
      yield* Console.log(text)
    }),
).pipe(Command.withDescription("Quantize a fp32 model to int8 (QDQ, as onnxruntime's quantize_static writes), calibrated on real or seeded inputs; print the per-layer report"))

/**
 * The demo's timed runs of the compiled target and of onnxruntime without --bench: a median of
 * 10 after a warm-up (a single run of ResNet-18 read 18.5 ms where the median of 30 was 11.4); the
 * interpreter, whose run takes most of a second, runs once.
 */
const DEMO_COMPILED_RUNS = 10

const runDemo = Effect.fn("cli.demoCommand")(function* (models: readonly string[], seed: number, runs: number, compiledRuns: number) {
  for (const m of models)
    if (!ZOO_NAMES.includes(m as never)) return yield* new UsageError({ flag: "--model", reason: `no zoo model '${m}' (the zoo has: ${ZOO_NAMES.join(", ")})` })
  yield* Console.log(`Tessera demo: ${models.join(", ")} with seeded weights (seed ${seed}) and a seeded random input, compiled for Tessera's ${DEMO_TARGET} target, through its interpreter, and through onnxruntime-node`)
  const rows = yield* demo({ models, seed, runs, compiledRuns, build: zooModel }, (line) => Console.log(line))
  yield* Console.log(demoTable(rows))
  yield* demoOutcome(rows)
})

const demoCommand = Command.make(
  "demo",
  {
    model: Flag.String("model").pipe(Flag.atLeast(0), Flag.withDescription("zoo networks to run (repeatable; default resnet18)")),
    seed: seedFlag("the weights and the input"),
    bench: Flag.Boolean("bench").pipe(Flag.withDefault(false), Flag.withDescription(`time --runs runs per side after a warm-up, the interpreter's too (median; without it: ${DEMO_COMPILED_RUNS} compiled and onnxruntime runs, one interpreter run)`)),
    runs: Flag.Int("runs").pipe(Flag.withDefault(5), Flag.withDescription("timed runs per side with --bench")),
  },
  (c) =>
    reported("demo")(
      runDemo(c.model.length ? c.model : ["resnet18"], c.seed, c.bench ? Math.max(c.runs, 1) : 1, c.bench ? Math.max(c.runs, 1) : DEMO_COMPILED_RUNS),
    ),
).pipe(Command.withDescription("Run zoo networks through Tessera and onnxruntime-node, and compare"))

const tessera = Command.make("tessera").pipe(
  Command.withDescription("Tessera: an end-to-end optimizing deep-learning compiler"),
  Command.withSubcommands([run, compile, bench, inspect, zoo, quantize, demoCommand, tuneCommandLine(reported, { deadline, checkDeadline })]),
)

/** Command-line mistakes as one stderr line (the help stays one `--help` away). */
const presenter = CliOutput.layerPresenter({
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Console.error(
          `tessera${event.commandPath.length > 1 ? ` ${event.commandPath.slice(1).join(" ")}` : ""}: ${event.errors
            .map((e) => e.message.replace(/\s*\n\s*/g, " "))
            .join("; ")} (see '${event.commandPath.join(" ")} --help')`,
        )
      : CliOutput.defaultPresenter.present(event),
})

/** Exit code for how the command ended; failures are reported here, once. */
const report = (exit: Exit.Exit<void, unknown>): Effect.Effect<number> => {
  if (Exit.isSuccess(exit)) return Effect.succeed(0)
  const cause = exit.cause
  if (Cause.hasInterruptsOnly(cause)) return Effect.succeed(130)
  const failure = Cause.findErrorOption(cause)
  const err = Option.isSome(failure) ? failure.value : Cause.squash(cause)
  if (err instanceof CommandFailed) return Effect.as(Console.error(err.line), err.exitCode)
  if (tagOf(err) === "ShowHelp") {
    // already presented; exit 2 when it carried parse errors, 0 for a plain --help
    const errors = (err as { errors?: readonly unknown[] }).errors ?? []
    return Effect.succeed(errors.length ? 2 : 0)
  }
  // a defect (or a failure no command rendered): one line still, named an internal error
  const command = process.argv[2] && !process.argv[2].startsWith("-") ? process.argv[2] : ""
  return Effect.as(Console.error(errorLine(command, err instanceof Error && tagOf(err) ? err : Cause.squash(cause))), 1)
}

const main = Command.run(tessera, { version: VERSION }).pipe(
  Effect.provide(Layer.merge(NodeServices.layer, presenter)),
  Effect.exit,
  Effect.flatMap(report),
  // (supervised: the work is over and reported; the main thread starts no grace period now)
  Effect.tap((code) => Effect.sync(() => announceFinished(code))),
)

if (isSupervisedWorker()) {
  writeStdioDirectly()
  announceStarted()
}
// `tessera inspect MODEL | head`: a reader that stops early is not an error
else
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(0)
    throw e
  })

NodeRuntime.runMain(main, {
  disableErrorReporting: true,
  teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) ? (exit.value as number) : 1),
})
