// Tuning curves: best-so-far GFLOP/s against trials, per task and tuner, read from a log's records
// (in the order they were written, so a resumed run continues its curve), drawn with vega-lite
// (compiled to a vega spec, rendered to SVG headless: no canvas, no browser).
import type { TopLevelSpec } from "vega-lite"
import { isTrial, type TuningRecord } from "./records.js"

export interface Curve {
  /** The task id (its workload's hash). */
  readonly task: string
  /** What the plot calls the task (its label when known, else the id). */
  readonly label: string
  readonly tuner: string
  /** Best GFLOP/s after each trial (0 until a candidate succeeds). */
  readonly best: readonly number[]
}

/** One curve per (task, tuner), in the log's order of first appearance. */
export const curvesOfLog = (records: readonly TuningRecord[], labels: ReadonlyMap<string, string> = new Map()): Curve[] => {
  const curves = new Map<string, { task: string; tuner: string; best: number[] }>()
  for (const r of records) {
    // a confirmation re-measures trials: not a trial of its own
    if (!isTrial(r)) continue
    const tuner = r.tuner ?? "unknown"
    const key = `${r.task}\u0000${tuner}`
    let c = curves.get(key)
    if (!c) curves.set(key, (c = { task: r.task, tuner, best: [] }))
    const g = !r.error && r.costs.length && r.gflops !== undefined && Number.isFinite(r.gflops) ? r.gflops : 0
    c.best.push(Math.max(g, c.best.at(-1) ?? 0))
  }
  return [...curves.values()].map((c) => ({ ...c, label: labels.get(c.task) ?? `task ${c.task}` }))
}

/** The first trial at which a curve reaches `target` GFLOP/s (1-based), or undefined. */
export const trialsToReach = (curve: readonly number[], target: number): number | undefined => {
  const k = curve.findIndex((g) => g >= target)
  return k < 0 ? undefined : k + 1
}

/** How a plot differs from the GFLOP/s default: the y axis's title, trials on a log axis, y not from zero, panels in the curves' order. */
export interface CurvesStyle {
  readonly yTitle?: string
  readonly logTrials?: boolean
  readonly inOrder?: boolean
}

/** The vega-lite spec: a small panel per task, a line per tuner. */
export const curvesSpec = (curves: readonly Curve[], title = "Best-so-far GFLOP/s vs trials", style: CurvesStyle = {}): TopLevelSpec => ({
  $schema: "https://vega.github.io/schema/vega-lite/v6.json",
  title,
  // a step-after line: the trials where the best changes (and the last) draw the same picture
  data: { values: curves.flatMap((c) => c.best.flatMap((g, k) => (k === 0 || k === c.best.length - 1 || g !== c.best[k - 1] ? [{ task: c.label, tuner: c.tuner, trial: k + 1, gflops: g }] : []))) },
  facet: { field: "task", type: "nominal", title: null, ...(style.inOrder ? { sort: [...new Set(curves.map((c) => c.label))] } : {}) },
  columns: Math.min(3, new Set(curves.map((c) => c.label)).size),
  resolve: { scale: { y: "independent", x: "independent" } },
  spec: {
    width: 260,
    height: 170,
    mark: { type: "line", interpolate: "step-after", strokeWidth: 1.6 },
    encoding: {
      x: { field: "trial", type: "quantitative", title: style.logTrials ? "trials (log)" : "trials", ...(style.logTrials ? { scale: { type: "log" } } : {}) },
      y: { field: "gflops", type: "quantitative", title: style.yTitle ?? "best GFLOP/s", ...(style.logTrials ? { scale: { zero: false } } : {}) },
      color: { field: "tuner", type: "nominal", scale: { domain: ["xgb", "ga", "random", "grid"].filter((t) => curves.some((c) => c.tuner === t)).concat([...new Set(curves.map((c) => c.tuner))].filter((t) => !["xgb", "ga", "random", "grid"].includes(t))) } },
    },
  },
  config: { font: "sans-serif", background: "white" },
})

/** Renders the curves as an SVG document (vega's headless renderer). */
export const renderCurvesSvg = async (curves: readonly Curve[], title?: string, style?: CurvesStyle): Promise<string> => {
  const [vega, vl] = await Promise.all([import("vega"), import("vega-lite")])
  const spec = vl.compile(curvesSpec(curves, title, style)).spec
  const view = new vega.View(vega.parse(spec), { renderer: "none" })
  try {
    return await view.toSVG()
  } finally {
    view.finalize()
  }
}
