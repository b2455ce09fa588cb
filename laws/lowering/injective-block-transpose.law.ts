// The injective template's blocked-transpose rule: a root stage whose innermost axis reads a
// tensor `lanes` or more elements apart where another axis reads it contiguously has both axes
// split by the lanes (the contiguous one by the most up to them that divide it), the contiguous
// axis's lanes inside the innermost's tiles (each block reads `lanes` lines whole). Laws: at every width the schedule computes what the TE says, whether the
// extents divide or not; the rule tiles exactly the reads across the rows (a transpose whose two
// axes hold a vector each, the innermost more than one), never an elementwise or window read nor one beside a read along the rows; and the tile's loops are the
// contiguous axis's lanes outside the innermost's, the innermost vectorized.
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { add, c, type Expr } from "../../src/ast/te/expr.js"
import { at, compute, placeholder, type ComputeTensor, type Placeholder } from "../../src/ast/te/tensor.js"
import { baseSchedule } from "../../src/lowering/lower-group.js"
import { injectiveTemplate } from "../../src/lowering/templates/injective.js"
import { runTirSync } from "../../src/lowering/tir/tir-pass.js"
import { cpuTirPipeline } from "../../src/lowering/tir/cpu-pipeline.js"
import { lowerSync } from "../../src/lowering/lower.js"
import { evaluatePrimFunc } from "../../src/ast/tir/evaluate.js"
import { evaluateTE } from "../../src/ast/te/evaluate.js"
import { assertAllClose, lawParams, smallIntInputs } from "../support.js"

/** How y reads x: its last two axes swapped (a transpose), through a reshape of x's rows first (as attention's keys), along every axis, or a window along both (contiguous along the rows and the columns). */
type Read = "transposed" | "reshaped" | "same" | "window" | "mixed"

interface Case {
  readonly inputs: readonly Placeholder[]
  readonly out: ComputeTensor
}

/**
 * y[b, i, j] = x[…] + 1 over [batch, rows, cols]: "transposed" reads x[b, j, i]; "reshaped" reads
 * x [batch · cols, rows] flat at (b · cols + j) · rows + i through an inlined copy (a reshape's
 * quotient and remainder); "same" reads x[b, i, j]; "window" x[b, i + j]; "mixed" x[b, j, i] + z[b, i, j]
 * (one operand across the rows, one along them: not a transpose the rule tiles).
 */
const transposeCase = (batch: number, rows: number, cols: number, read: Read): Case => {
  if (read === "reshaped") {
    const x = placeholder("x", [batch * cols, rows], "int32")
    const flat = compute("flat", [batch * cols * rows], (f) => at(x, { kind: "bin", op: "floordiv", a: f, b: c(rows), dtype: "int32" } as Expr, { kind: "bin", op: "floormod", a: f, b: c(rows), dtype: "int32" } as Expr), "int32")
    const out = compute("y", [batch, rows, cols], (b, i, j) => add(at(flat, add(add({ kind: "bin", op: "mul", a: b, b: c(cols * rows), dtype: "int32" } as Expr, { kind: "bin", op: "mul", a: j, b: c(rows), dtype: "int32" } as Expr), i)), c(1, "int32")), "int32")
    return { inputs: [x], out }
  }
  if (read === "mixed") {
    const x = placeholder("x", [batch, cols, rows], "int32")
    const z = placeholder("z", [batch, rows, cols], "int32")
    return { inputs: [x, z], out: compute("y", [batch, rows, cols], (b, i, j) => add(at(x, b, j, i), at(z, b, i, j)), "int32") }
  }
  if (read === "window") {
    const x = placeholder("x", [batch, rows + cols], "int32")
    return { inputs: [x], out: compute("y", [batch, rows, cols], (b, i, j) => add(at(x, b, add(i, j)), c(1, "int32")), "int32") }
  }
  const x = placeholder("x", read === "transposed" ? [batch, cols, rows] : [batch, rows, cols], "int32")
  const out = compute("y", [batch, rows, cols], (b, i, j) => add(read === "transposed" ? at(x, b, j, i) : at(x, b, i, j), c(1, "int32")), "int32")
  return { inputs: [x], out }
}

const arbCase = fc.record({
  batch: fc.integer({ min: 1, max: 3 }),
  rows: fc.integer({ min: 1, max: 64 }),
  cols: fc.integer({ min: 1, max: 40 }),
  read: fc.constantFrom<Read>("transposed", "reshaped", "same", "window", "mixed"),
  width: fc.constantFrom(2, 4, 8, 16),
})

const schedule = (cc: Case, width: number) => injectiveTemplate.apply([cc.out], baseSchedule([cc.out]), { vectorize: true, whole_vectors: width })

describe("injective template: the blocked-transpose rule", () => {
  it("at every width, dividing or not, the schedule computes what the TE says", () => {
    fc.assert(
      fc.property(arbCase, fc.nat(), ({ batch, rows, cols, read, width }, seed) => {
        const cc = transposeCase(batch, rows, cols, read)
        const inputs = smallIntInputs(seed, cc.inputs)
        const got = evaluatePrimFunc(runTirSync(cpuTirPipeline(), lowerSync(schedule(cc, width))), inputs)
        assertAllClose([got.get("y")!], evaluateTE([cc.out], inputs), 0, 0)
      }),
      lawParams(60),
    )
  })

  it("tiles exactly the reads across the rows whose rows hold a vector and columns more: the rows' lanes outside the columns' vector", () => {
    fc.assert(
      fc.property(arbCase, ({ batch, rows, cols, read, width }) => {
        const cc = transposeCase(batch, rows, cols, read)
        const st = schedule(cc, width).stages.get("y")!
        // (x's rows `rows` apart along j: a line a lane once rows ≥ width)
        // (the rows' lanes: the most up to a vector that divide them, half a vector at least; the
        // columns' tiles cut short only where the parallel loop (32 iterations) stops before them)
        const f = Math.max(...Array.from({ length: width }, (_, k) => k + 1).filter((d) => rows % d === 0))
        const fires = (read === "transposed" || read === "reshaped") && rows >= width && cols > width && f >= 2 && 2 * f >= width && (cols % width === 0 || (batch * rows) / f >= 32)
        // (the loop nest's order with fused loops expanded into theirs: the parallel loop may take the tile's outer loops)
        const expand = (a: string): string[] => {
          const f = st.relations.find((r) => r.kind === "fuse" && r.fused === a)
          return f?.kind === "fuse" ? [...expand(f.outer), ...expand(f.inner)] : [a]
        }
        const order = st.leaf.flatMap(expand)
        const inner = st.leaf[st.leaf.length - 1]
        const split = (parent: string) => st.relations.find((r) => r.kind === "split" && r.parent === parent)
        const rowSplit = split(cc.out.axes[1].var.name)
        const colSplit = split(cc.out.axes[2].var.name)
        const blocked =
          rowSplit?.kind === "split" && colSplit?.kind === "split" && rowSplit.factor === f && colSplit.factor === width &&
          inner === colSplit.inner && order[order.length - 2] === rowSplit.inner && order.indexOf(colSplit.outer) < order.indexOf(rowSplit.inner)
        expect(blocked).toBe(fires)
        if (fires) expect(st.annotations.get(inner)?.kind).toBe("vectorized")
      }),
      lawParams(150),
    )
  })
})
