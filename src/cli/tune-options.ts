// The tune command's options and tuner names: their own module, so the per-target tune commands
// (vta-tune.ts) take them without importing tune.ts, which dispatches to them.
import type { MeasureOptions } from "../device/measure.js"
import type { Interrupt } from "../ast/graph/errors.js"

export const TUNERS = ["xgb", "evo", "ga", "random", "grid"] as const
export type TunerName = (typeof TUNERS)[number]

export interface TuneCommandOptions {
  readonly model: string
  readonly target: string
  /** Trials per task, counting the ones already in the log. */
  readonly trials: number
  readonly log: string
  readonly tuner: TunerName
  /** Stop a task after this many trials without improvement. */
  readonly earlyStopping?: number
  /** Candidates the tuner proposes at a time (js: one worker; c: built in chunks, one child). */
  readonly batch: number
  /** c: candidates per gcc run; chunks build ahead while earlier ones are measured. */
  readonly chunk?: number
  /** c: gcc runs at once (default: the cores the measuring threads leave, at least 1). */
  readonly buildJobs?: number
  /** fp32 vector lanes; by default what compile and bench use for the target. */
  readonly vectorLanes?: number
  /** Threads the kernels run on (c: the thread pool's; the records are per thread count, like compile's). */
  readonly threads: number
  readonly seed: number
  /**
   * Whole-model tuning under a time budget (seconds): trials go a round at a time to the task
   * with the largest expected gain (task-scheduler.ts), `trials` per task at most, until the
   * budget is spent; then each task's confirmation. Without it: each task's trials in turn.
   */
  readonly timeBudget?: number
  /** Only these task ids (all when empty). */
  readonly tasks: readonly string[]
  readonly measure: MeasureOptions
  /** Draw progress bars on stderr (only where stderr is a terminal). */
  readonly progress: boolean
  /** The supervisor's stop flag (SIGINT, SIGTERM, --deadline): checked by compile and before each batch. */
  readonly interrupt?: Interrupt
  /**
   * After a task's trials, its this-many fastest configs and its default measured again side by
   * side (c: in turns; `confirmMeasurerOptions`), the fastest of them the record applied; 0: none.
   */
  readonly confirm?: number
  /**
   * After the trials (c, wasm, js): run the model with its records and without, in turns, and
   * append a confirmation round of each tuned workload's time in the network (network-check.ts).
   * Default true.
   */
  readonly networkCheck?: boolean
}
