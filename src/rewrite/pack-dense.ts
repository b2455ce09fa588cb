// The layout rewrite of constant weights (Ansor's layout rewrite; TVM's dense_pack a special case),
// a rule of rewrite.AlterLayout: a matrix product whose right-hand operand B [K, N] is a constant
// takes it in column panels [⌈N/w⌉, K, w] at compile time, so a column tile of the product reads
// one contiguous stream per panel instead of a short stretch of every row of B (a row of
// [768, 3072] is 12 KB: a tile of 64 columns reads 256 bytes of each). Two forms:
// - a few rows (Gemm or 2-D MatMul, ≤ DENSE_PACK_MAX_ROWS): DensePack, panels of one vector (the
//   reduction rule's wide column tiles stream them once);
// - more rows (MatMul, batched too, and Gemm): MatMulPacked, panels of the matmul register tile's
//   width for those rows and columns — from the target record's lanes, FMA pipes × latency and
//   registers (src/ast/register-tile.ts), the tile the matmul rule then computes over each panel;
//   a panel (K × w) at most half the L2 where a width allows it.
// A product of two computed operands (attention's) is left as it is.
import { attr } from "../ast/graph/attrs.js"
import { resolveNode } from "../ast/graph/evaluate.js"
import type { Node } from "../ast/graph/graph.js"
import { packDense } from "../ast/graph/ops/layout.js"
import { TESSERA_DOMAIN } from "../ast/graph/ops/index.js"
import { matmulRegisterTile, type RegisterFile } from "../ast/register-tile.js"
import type { Rule } from "./rules.js"

/** The widest batch a DensePack layer is made for: its weights are read once per row block. */
export const DENSE_PACK_MAX_ROWS = 8

/**
 * What the rule makes of a product (Gemm canonical: no transposes, alpha 1, beta 1 or no C; MatMul
 * with A of rank ≥ 2): float32, B a constant [K, N], A of static shape. `dense`: DensePack in panels
 * of the lanes (A [M, K], M ≤ 8, N ≥ 2 panels); `packed`: MatMulPacked in panels of the register
 * tile's width `panel` (M ≥ 2 rows a batch, the width whole vectors, N more than one panel);
 * undefined: left alone. Only for 8 or more lanes (the c target on AVX2 / AVX-512, where it was
 * measured).
 */
export const packingOf = (
  n: Node,
  type: (v: string) => { readonly dtype: string; readonly shape: readonly (number | string)[] } | undefined,
  constant: (v: string) => { readonly dtype: string; readonly shape: readonly number[] } | undefined,
  target: RegisterFile,
): { readonly kind: "dense" } | { readonly kind: "packed"; readonly panel: number } | undefined => {
  if (n.domain !== "" || (n.op !== "Gemm" && n.op !== "MatMul") || target.vectorLanes < 8) return undefined
  if (n.op === "Gemm") {
    const a = resolveNode(n).attrs as { alpha: number; beta: number; transA: number; transB: number }
    if (a.transA || a.transB || a.alpha !== 1 || (a.beta !== 1 && n.inputs[2])) return undefined
  }
  const x = type(n.inputs[0])
  const w = constant(n.inputs[1])
  if (!x || !w || x.dtype !== "float32" || w.dtype !== "float32" || x.shape.length < 2 || w.shape.length !== 2) return undefined
  const M = x.shape[x.shape.length - 2]
  const N = w.shape[1]
  if (typeof M !== "number") return undefined
  if (x.shape.length === 2 && M <= DENSE_PACK_MAX_ROWS) return N >= 2 * target.vectorLanes ? { kind: "dense" } : undefined
  // (a batch of unknown size has no compute; one row a batch is the reduction rule's)
  if (!x.shape.every((d) => typeof d === "number") || M < 2) return undefined
  const panel = matmulRegisterTile(target, M, N, undefined, w.shape[0]).cols
  return panel % target.vectorLanes === 0 && N > panel ? { kind: "packed", panel } : undefined
}

/**
 * Gemm / MatMul over a constant B → DensePack (a few rows) or MatMulPacked (more; a Gemm's C
 * added after it, which the fuser takes into the product's epilogue), B re-laid in column panels.
 * MobileNetV2's 1280 → 1000 classifier as DensePack, weights from memory, AVX-512: 0.41 → 0.23 ms
 * (a C microbenchmark of both loops); a transformer's linear layer [1, 50, 768] · [768, 3072] from
 * panels of 64 (hand-edited): 2.34–2.61 → 2.08–2.12 ms at 1 thread (Zen 4).
 */
export const denseToPacked = (target: RegisterFile): Rule => ({
  name: "dense-to-packed",
  apply: (n, ctx) => {
    const packing = packingOf(n, ctx.type, ctx.constant, target)
    if (!packing) return undefined
    const w = ctx.constant(n.inputs[1])!
    const N = w.shape[1]
    const b = packing.kind === "dense" ? target.vectorLanes : packing.panel
    const wName = ctx.fresh(`${n.inputs[1]}_NK${b}n`)
    const y = ctx.fresh(`${n.outputs[0]}_packed`)
    const constants = new Map([[wName, packDense(w, b)]])
    if (packing.kind === "dense")
      return {
        nodes: [{ name: ctx.fresh(`${n.name}_pack`), op: "DensePack", domain: TESSERA_DOMAIN, inputs: [n.inputs[0], wName, ...n.inputs.slice(2)], outputs: [y], attrs: { n: attr.int(N) } }],
        outputs: [y],
        constants,
      }
    const product: Node = { name: ctx.fresh(`${n.name}_packed`), op: "MatMulPacked", domain: TESSERA_DOMAIN, inputs: [n.inputs[0], wName], outputs: [y], attrs: { n: attr.int(N) } }
    if (!n.inputs[2]) return { nodes: [product], outputs: [y], constants }
    // (a canonical Gemm's C: beta 1, broadcast to [M, N] as Add broadcasts it)
    const z = ctx.fresh(`${n.outputs[0]}_biased`)
    return { nodes: [product, { name: ctx.fresh(`${n.name}_bias`), op: "Add", domain: "", inputs: [y, n.inputs[2]], outputs: [z], attrs: {} }], outputs: [z], constants }
  },
})
