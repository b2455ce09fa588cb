// What a schedule template is: a group's schedule as a function of knobs declared as data (split
// factors, reorder choices, unroll / vectorize / parallel), with defaults per target. The defaults
// are the untuned schedules; the auto-tuner searches the knobs (src/search).
import type * as S from "../../ast/schedule/schedule.js"
import type { ComputeTensor } from "../../ast/te/tensor.js"

/**
 * A knob that matters only where another knob has a value (the generated space's knobs under
 * `sketch: "generated"`, a template's under `sketch: "template"`): elsewhere it is held at its
 * absent value (`canonicalConfig`), so configs that give one schedule are one config.
 */
export interface KnobCondition {
  readonly knob: string
  readonly value: string | number | boolean
}

export type Knob =
  | {
      readonly kind: "split"
      readonly name: string
      readonly extent: number
      readonly candidates: readonly number[]
      /** Lanes of each unit split, where a unit is a vector (a channel block's; absent: 1). */
      readonly lanes?: number
      /**
       * Elements of the split axis that one float32 lane's 4 bytes hold, where its type is a narrower
       * integer whose vector operations the compiler runs on that many more lanes (an 8-bit one: 4,
       * a 16-bit one: 2; absent: 1). The defaults size a split in vector lanes times this.
       */
      readonly perLane?: number
      readonly when?: KnobCondition
    }
  | {
      readonly kind: "choice"
      readonly when?: KnobCondition
      /**
       * Candidates are factorizations of `extent` over this many tile levels, written "a.b"
       * (inner level last); the search moves factors between levels (sketch.ts).
       */
      readonly levels?: number
      readonly name: string
      readonly candidates: readonly (string | number | boolean)[]
      /** The extent of the loop the choice is about, where there is one (an unroll's loop). */
      readonly extent?: number
      /**
       * A convolution's `reduce_order`: input columns between adjacent output columns (the stride,
       * read off its compute). Not searched; what the defaults read to see how much input the taps
       * of a row's unrolled window share. Absent: 1.
       */
      readonly inputStride?: number
      /**
       * A convolution's `oc_order`: the floats of the input its image tiles read (the padded copy's,
       * where it has one) and whether every output channel reads all of it (`dense`; a grouped or
       * depthwise conv's channel tiles read only their own groups' channels). Not searched; what the
       * band rule (conv2d-nchwc.ts, imageBands) weighs against the weights.
       */
      readonly input?: { readonly floats: number; readonly dense: boolean }
      /**
       * What a config without this knob means: for a knob added to a template later, the value
       * that gives the schedule its records were tuned with (so older tuning logs still apply).
       */
      readonly absent?: string | number | boolean
    }

export type Config = Readonly<Record<string, string | number | boolean>>

/** A config's value of a knob: the knob's `absent` value where the config lacks it. */
export const knobValue = (knob: Knob, config: Config): string | number | boolean | undefined =>
  config[knob.name] ?? (knob.kind === "choice" ? knob.absent : undefined)

/** Whether a knob matters in a config: it has no condition, or its condition's knob has that value there. */
export const knobActive = (knobs: readonly Knob[], knob: Knob, config: Config): boolean => {
  if (!knob.when) return true
  const ctrl = knobs.find((k) => k.name === knob.when!.knob)
  return (ctrl ? knobValue(ctrl, config) : config[knob.when.knob]) === knob.when.value
}

/**
 * `config` with the `absent` values of the knobs it lacks filled in: a config from before a knob
 * was added and the same config with the knob's absent value are one schedule (one hash).
 */
export const completeConfig = (knobs: readonly Knob[], config: Config): Config => {
  const missing = knobs.filter((k) => k.kind === "choice" && k.absent !== undefined && config[k.name] === undefined)
  return missing.length ? { ...config, ...Object.fromEntries(missing.map((k) => [k.name, (k as { absent: string | number | boolean }).absent])) } : config
}

export interface ScheduleTarget {
  /** fp32 lanes of the vector unit (16 AVX-512, 8 AVX2, 4 SIMD128, 1 scalar). */
  readonly vectorLanes: number
  readonly cores: number
  /** FMA pipes and their latency in cycles at that width (measured on the host; absent: 2 × 4). */
  readonly fmaUnits?: number
  readonly fmaLatency?: number
  /** Vector registers of the ISA (absent: 16). */
  readonly vectorRegisters?: number
  /**
   * Whether a multiply-add is one instruction that may take its broadcast operand from memory
   * (absent: true); false for WebAssembly SIMD128 (a mul, an add and a splat load each).
   */
  readonly fusedMultiplyAdd?: boolean
  /**
   * Whether the compiler the emitted code goes through vectorizes a loop with loops inside it
   * (absent: true, gcc's outer-loop vectorizer on the c target); false where the emitter's own
   * vector code takes only an innermost loop of straight-line stores (js, wasm).
   */
  readonly outerLoopVectorizer?: boolean
  /** The 8-bit dot-product instruction the emitter renders (AVX-512 VNNI's, SIMD128's i16 dot; absent: none, int8 products are loops). */
  readonly int8Dot?: "vnni" | "avx2" | "simd128"
  /** Bytes of a core's L1 data cache (the target record's, measured from sysfs on the host; absent: 32 KiB). */
  readonly l1Bytes?: number
  /** Bytes of a core's L2 cache (the target record's, measured from sysfs on the host; absent: 256 KiB). */
  readonly l2Bytes?: number
}

export interface Template {
  readonly name: string
  /** Whether the auto-tuner searches this template's knobs (a task per workload). */
  readonly tunable: boolean
  /** The knobs of this group's schedule (depends on its shapes). */
  readonly space: (outputs: readonly ComputeTensor[], base: S.Schedule) => readonly Knob[]
  readonly defaults: (knobs: readonly Knob[], target: ScheduleTarget) => Config
  /** The schedule for a config (every config of the space is legal). */
  readonly apply: (outputs: readonly ComputeTensor[], base: S.Schedule, config: Config) => S.Schedule
  /**
   * Why a config of the space is refused before it is lowered or built (a limit the target's
   * record sets that its schedule breaks, known from the schedule alone); undefined: it is not.
   * The tuner records a refused config as a trial with that error, never builds it.
   */
  readonly refuse?: (outputs: readonly ComputeTensor[], base: S.Schedule, config: Config) => string | undefined
}
