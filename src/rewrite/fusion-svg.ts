// The fused graph as SVG: its DOT (fusionDot) rendered by Graphviz compiled to wasm, in process —
// `tessera inspect --fused --format svg` and the playground show the same picture.
import { Effect } from "effect"
import type { FusedGraph } from "./fuse-ops.js"
import { fusionDot } from "./report.js"

/** The SVG element alone, no XML prolog. */
export const fusionSvg = (fused: FusedGraph): Effect.Effect<string> =>
  Effect.promise(async () => {
    const viz = await (await import("@viz-js/viz")).instance()
    const svg = viz.renderString(fusionDot(fused), { format: "svg" })
    const k = svg.indexOf("<svg")
    return k >= 0 ? svg.slice(k).trimEnd() : svg
  })
