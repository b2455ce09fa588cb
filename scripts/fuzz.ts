// npm run fuzz — a fuzzer past the decoder (issue 19). Each case is a seeded, valid-looking graph
// with structure-aware mutations (src/ast/graph/arbitrary-fuzz.ts), encoded to ONNX bytes and
// decoded again, run on the interpreter, then compiled and run on js and wasm (and c every
// --c-every cases). Every target must either succeed and agree with the interpreter within
// tolerance, or fail with a typed error: an untyped throw, a crash (the process dies: the c
// target's kernels run in it), a hang (past --case-ms) or a wrong answer is a finding.
//   --cases N       cases (default 1000)
//   --seed S        the run's seed: case k has seed S * 1_000_003 + k (default 1)
//   --targets LIST  compiled targets (default js,wasm; c is added every --c-every cases)
//   --c-every K     also c on every K-th case (default 50; 0: never; needs gcc)
//   --case-ms MS    a case's deadline (default 60000)
//   --jobs J        cases at once, each in a child process of its own (default 1)
//   --json          the summary as one JSON line (the test suite reads it)
//   --only SEED     one case by its seed, in this process, with its graph and each outcome
//   --seeds LIST    the cases of these seeds (comma-separated) instead of --cases / --seed: a
//                   replay of earlier findings (test/fuzz-graphs.test.ts keeps one)
// Exit status 1 when there is any finding.
import { fork, type ChildProcess } from "node:child_process"
import * as os from "node:os"

const args = process.argv.slice(2)
const opt = (k: string) => {
  const i = args.indexOf(k)
  return i >= 0 ? args[i + 1] : undefined
}
const num = (k: string, dflt: number) => {
  const v = opt(k)
  if (v === undefined) return dflt
  const n = Number(v)
  if (!Number.isSafeInteger(n) || n < 0) {
    console.error(`fuzz: ${k}: '${v}' is not a whole number`)
    process.exit(2)
  }
  return n
}

/** What one target did with one case. */
type Outcome =
  | { readonly kind: "ok" }
  | { readonly kind: "typed"; readonly tag: string; readonly message: string }
  | { readonly kind: "untyped"; readonly message: string }
  | { readonly kind: "wrong"; readonly message: string }
  /** Values that differ only by overflow or NaN where the case put edge floats in (see fuzz-judge.ts). */
  | { readonly kind: "edge-float"; readonly message: string }
  /** An output that depends on a float → integer Cast out of the type's range (undefined in ONNX; see fuzz-judge.ts). */
  | { readonly kind: "undefined-cast"; readonly message: string }
  /** Off by more than the tolerance but within the spread the interpreter itself shows under a rounding-sized perturbation (fuzz-judge.ts). */
  | { readonly kind: "ill-conditioned"; readonly message: string }
  /** The interpreter refused the case with a typed error, the target ran it: a check the target lacks. */
  | { readonly kind: "lenient"; readonly message: string }

interface CaseResult {
  readonly seed: number
  readonly mutations: readonly string[]
  readonly ms: number
  /** interp, then each target run. */
  readonly outcomes: Readonly<Record<string, Outcome>>
}

type Finding = { readonly seed: number; readonly target: string; readonly kind: "crash" | "hang" | "untyped" | "wrong" | "lenient"; readonly message: string; readonly mutations: readonly string[] }

// ---------------------------------------------------------------- the child: runs cases

const runOne = async (seed: number, targets: readonly string[]): Promise<CaseResult> => {
  const { Cause, Effect, Exit } = await import("effect")
  const { buildFuzzCase } = await import("../src/ast/graph/arbitrary-fuzz.js")
  const { encodeOnnx } = await import("../src/ast/onnx/encode.js")
  const { decodeModelSync } = await import("../src/ast/onnx/decode.js")
  const { runGraph } = await import("../src/ast/graph/evaluate.js")
  const { compileGraph, loadProgram } = await import("../src/pipeline.js")
  const { targetSettings } = await import("../src/cli/targets.js")
  const { isCommandError, tagOf } = await import("../src/cli/errors.js")
  const t0 = performance.now()
  const fz = buildFuzzCase(seed)
  const outcomes: Record<string, Outcome> = {}
  const classify = (e: unknown): Outcome => {
    const tag = tagOf(e)
    const message = (e instanceof Error ? e.message : String(e)).slice(0, 300)
    return tag && isCommandError(e) ? { kind: "typed", tag, message } : { kind: "untyped", message: `${tag ? `${tag}: ` : ""}${message}${e instanceof Error && e.stack ? ` @ ${e.stack.split("\n").slice(1, 4).join(" ").replace(/\s+/g, " ")}` : ""}` }
  }
  const done = () => ({ seed, mutations: fz.mutations, ms: Math.round(performance.now() - t0), outcomes })
  let graph
  try {
    graph = decodeModelSync(encodeOnnx(fz.graph))
  } catch (e) {
    outcomes.decode = classify(e)
    return done()
  }
  const { computesWith, downstreamOf, judge, perturbedFeeds, perturbOutputs, undefinedCast } = await import("./fuzz-judge.js")
  let ref: ReadonlyMap<string, import("../src/ast/graph/tensor.js").Tensor> | undefined
  /** The casts the interpreter ran out of range, by their output. */
  const casts = new Map<string, string>()
  /** The outputs of nodes that computed with a value past 2^64 or not finite, with which (fuzz-judge.ts `computesWith`). */
  const huge = new Map<string, string>()
  try {
    const outs = runGraph(graph, fz.inputs, undefined, (node, ins, outs) => {
      const why = undefinedCast(node, ins, outs)
      if (why !== undefined) casts.set(node.outputs[0], why)
      if (computesWith(node, ins, outs)) for (const o of node.outputs) if (o !== "") huge.set(o, `${node.op} '${node.name}'`)
    })
    ref = new Map(graph.outputs.map((o, k) => [o.name, outs[k]] as const))
    outcomes.interp = { kind: "ok" }
  } catch (e) {
    outcomes.interp = classify(e)
  }
  const undefinedBy = new Map<string, string>()
  for (const [root, why] of casts) for (const v of downstreamOf(graph, [root])) if (!undefinedBy.has(v)) undefinedBy.set(v, why)
  const hugeBy = new Map<string, string>()
  for (const [root, where] of huge) for (const v of downstreamOf(graph, [root])) if (!hugeBy.has(v)) hugeBy.set(v, `${where}, which computed with a value past 2^64 or not finite`)
  /** The interpreter's outputs under two seeded perturbations of its float inputs, computed once when first asked. */
  let perturbed: ReadonlyMap<string, import("../src/ast/graph/tensor.js").Tensor>[] | undefined
  const perturb = () =>
    (perturbed ??= [1, 2].flatMap((k) => {
      try {
        const p = perturbedFeeds(graph, fz.inputs, seed * 31 + k)
        const outs = runGraph(p.graph, p.feeds, undefined, perturbOutputs(seed * 31 + k + 7))
        return [new Map(graph.outputs.map((o, j) => [o.name, outs[j]] as const))]
      } catch {
        return []
      }
    }))
  for (const kind of targets) {
    const settings = targetSettings(kind as "js" | "wasm" | "c")
    const exit = await Effect.runPromiseExit(Effect.flatMap(compileGraph(graph, settings.target, { optLevel: 3 }), (p) => loadProgram(p, settings.target)))
    let got: ReadonlyMap<string, import("../src/ast/graph/tensor.js").Tensor> | undefined
    if (Exit.isFailure(exit)) {
      const reason = exit.cause.reasons[0]
      outcomes[kind] = reason && Cause.isFailReason(reason) ? classify(reason.error) : reason && Cause.isDieReason(reason) ? classify(reason.defect) : { kind: "untyped", message: `interrupted: ${String(exit.cause)}` }
      // a typed error that was thrown as a defect is still a typed error, but say so
      if (reason && Cause.isDieReason(reason) && outcomes[kind].kind === "typed") outcomes[kind] = { ...outcomes[kind], message: `(as a defect) ${(outcomes[kind] as { message: string }).message}` }
      continue
    }
    try {
      got = exit.value.run(fz.inputs)
    } catch (e) {
      outcomes[kind] = classify(e)
      continue
    }
    if (!ref) {
      outcomes[kind] = outcomes.interp.kind === "typed" ? { kind: "lenient", message: `interp: ${outcomes.interp.tag}: ${outcomes.interp.message}` } : { kind: "ok" }
      continue
    }
    outcomes[kind] = judge(ref, got, { edgeFloats: fz.mutations.some((m) => /^initializer float|\(float\)$/.test(m)), undefinedBy, hugeBy, perturbed: perturb })
  }
  return done()
}

if (args.includes("--child")) {
  // cases arrive one at a time; each answer goes back before the next is taken
  process.on("message", (m: { seed: number; targets: string[] }) => {
    void runOne(m.seed, m.targets).then(
      (r) => process.send!(r),
      (e) => process.send!({ seed: m.seed, mutations: [], ms: 0, outcomes: { harness: { kind: "untyped", message: `harness: ${e instanceof Error ? e.stack : String(e)}` } } } satisfies CaseResult),
    )
  })
} else if (opt("--only") !== undefined) {
  const seed = num("--only", 0)
  const targets = (opt("--targets") ?? "js,wasm,c").split(",").filter(Boolean)
  const { buildFuzzCase } = await import("../src/ast/graph/arbitrary-fuzz.js")
  const { printGraph } = await import("../src/ast/graph/graph.js")
  const fz = buildFuzzCase(seed)
  console.log(`seed ${seed}: ${fz.mutations.join("; ") || "no mutation"}`)
  console.log(printGraph(fz.graph))
  const r = await runOne(seed, targets)
  for (const [t, o] of Object.entries(r.outcomes)) console.log(`${t}: ${o.kind}${"tag" in o ? ` ${o.tag}` : ""}${"message" in o ? `: ${o.message}` : ""}`)
} else {
  const listed = opt("--seeds")?.split(",").filter(Boolean).map(Number)
  if (listed?.some((x) => !Number.isSafeInteger(x) || x < 0)) {
    console.error(`fuzz: --seeds: '${opt("--seeds")}' is not a list of whole numbers`)
    process.exit(2)
  }
  const cases = listed ? listed.length : num("--cases", 1000)
  const runSeed = num("--seed", 1)
  const cEvery = num("--c-every", 50)
  const caseMs = num("--case-ms", 60_000)
  const jobs = Math.max(1, num("--jobs", 1))
  const base = (opt("--targets") ?? "js,wasm").split(",").filter(Boolean)
  const json = args.includes("--json")
  const { compilerAvailable } = await import("../src/device/c/build.js")
  const { buildFuzzCase } = await import("../src/ast/graph/arbitrary-fuzz.js")
  /** A case's mutations, for a crash or hang (whose child could not say). */
  const mutationsOf = (seed: number) => buildFuzzCase(seed).mutations
  const withC = cEvery > 0 && compilerAvailable() && !base.includes("c")
  const seedOf = (k: number) => (listed ? listed[k] : (runSeed * 1_000_003 + k) >>> 0)

  const findings: Finding[] = []
  const counts = new Map<string, number>()
  const count = (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1)
  let slowest = { seed: 0, ms: 0 }
  let cCases = 0
  const t0 = performance.now()

  /** Findings go to stderr as they come (a long run can be watched), with progress every 500 cases. */
  const found = (f: Finding) => {
    findings.push(f)
    process.stderr.write(`fuzz: ${f.kind} on ${f.target}, seed ${f.seed} (${f.mutations.join("; ") || "-"}): ${f.message}\n`)
  }
  let finished = 0
  const uncompared: { seed: number; target: string; kind: string; message: string }[] = []
  const record = (r: CaseResult) => {
    if (r.ms > slowest.ms) slowest = { seed: r.seed, ms: r.ms }
    for (const [target, o] of Object.entries(r.outcomes)) {
      count(`${target} ${o.kind}`)
      if (o.kind === "untyped" || o.kind === "wrong" || o.kind === "lenient") found({ seed: r.seed, target, kind: o.kind, message: o.message, mutations: r.mutations })
      // (not findings, but each listed, so that a run can be looked at: the judging is narrow, not blind)
      if (o.kind === "ill-conditioned" || o.kind === "undefined-cast") uncompared.push({ seed: r.seed, target, kind: o.kind, message: o.message })
    }
    if (++finished % 500 === 0) process.stderr.write(`fuzz: ${finished}/${cases} cases, ${findings.length} findings, ${((performance.now() - t0) / 1000).toFixed(0)} s\n`)
  }

  let next = 0
  const work = (): Promise<void> =>
    new Promise((resolve) => {
      let child: ChildProcess | undefined
      let current: { seed: number; timer: NodeJS.Timeout; started: number; targets: string[] } | undefined
      const spawnChild = () => {
        const c = fork(process.argv[1], ["--child"], { stdio: ["ignore", "ignore", "pipe", "ipc"], execArgv: ["--stack-size=4000"] })
        let stderr = ""
        c.stderr?.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)))
        c.on("message", (r: CaseResult) => {
          if (!current || r.seed !== current.seed) return
          clearTimeout(current.timer)
          current = undefined
          record(r)
          take()
        })
        c.on("exit", (code, signal) => {
          if (child !== c) return
          child = undefined
          if (current) {
            clearTimeout(current.timer)
            const { seed } = current
            finished++
            found({ seed, target: current.targets.join(","), kind: "crash", message: `the process died (${signal ?? `exit ${code}`}): ${stderr.trim().split("\n").slice(-3).join(" | ")}`, mutations: mutationsOf(seed) })
            count("crash")
            current = undefined
            take()
          }
        })
        child = c
        return c
      }
      const take = () => {
        if (next >= cases) {
          child?.kill("SIGKILL")
          child = undefined
          resolve()
          return
        }
        const k = next++
        const seed = seedOf(k)
        const targets = withC && k % cEvery === cEvery - 1 ? [...base, "c"] : base
        if (targets.includes("c")) cCases++
        const c = child ?? spawnChild()
        const timer = setTimeout(() => {
          finished++
          found({ seed, target: targets.join(","), kind: "hang", message: `no answer in ${caseMs} ms`, mutations: mutationsOf(seed) })
          count("hang")
          current = undefined
          const dead = child
          child = undefined
          dead?.kill("SIGKILL")
          take()
        }, caseMs)
        current = { seed, timer, started: performance.now(), targets }
        c.send({ seed, targets })
      }
      take()
    })

  await Promise.all(Array.from({ length: Math.min(jobs, Math.max(1, cases)) }, work))
  const seconds = (performance.now() - t0) / 1000
  const kinds = (k: Finding["kind"]) => findings.filter((f) => f.kind === k).length
  const summary = {
    cases,
    seed: runSeed,
    targets: [...base, ...(withC ? [`c (every ${cEvery}th: ${cCases} cases)`] : [])],
    seconds: Math.round(seconds * 10) / 10,
    crashes: kinds("crash"),
    hangs: kinds("hang"),
    untyped: kinds("untyped"),
    wrong: kinds("wrong"),
    lenient: kinds("lenient"),
    /** Target runs not compared as wrong, and why (fuzz-judge.ts): counted so that a run shows how many. */
    illConditioned: [...counts].filter(([k]) => k.endsWith(" ill-conditioned")).reduce((a, [, n]) => a + n, 0),
    undefinedCasts: [...counts].filter(([k]) => k.endsWith(" undefined-cast")).reduce((a, [, n]) => a + n, 0),
    slowest,
    outcomes: Object.fromEntries([...counts].sort()),
    findings: findings.slice(0, 50),
    uncompared: uncompared.slice(0, 50),
    cpu: os.cpus()[0]?.model ?? "?",
  }
  if (json) console.log(JSON.stringify(summary))
  else {
    console.log(`fuzz: ${cases} cases (seed ${runSeed}) on interp, ${summary.targets.join(", ")} in ${summary.seconds} s (${summary.cpu}, ${jobs} job${jobs > 1 ? "s" : ""})`)
    console.log(`  crashes ${summary.crashes}, hangs ${summary.hangs}, untyped errors ${summary.untyped}, wrong answers ${summary.wrong}, lenient targets ${summary.lenient} (not compared: ill-conditioned ${summary.illConditioned}, after an undefined cast ${summary.undefinedCasts}); slowest case ${slowest.ms} ms (seed ${slowest.seed})`)
    for (const [k, n] of Object.entries(summary.outcomes)) console.log(`  ${k}: ${n}`)
    for (const u of uncompared.slice(0, 20)) console.log(`  not compared (${u.kind}) on ${u.target}, seed ${u.seed}: ${u.message.slice(0, 200)}  [npm run fuzz -- --only ${u.seed}]`)
    for (const f of findings.slice(0, 30)) console.log(`  ${f.kind} on ${f.target}, seed ${f.seed} (${f.mutations.join("; ") || "-"}): ${f.message}  [npm run fuzz -- --only ${f.seed}]`)
  }
  process.exitCode = findings.length > 0 ? 1 : 0
}
