// lowering.VectorizeLoops: a vectorized loop stays vectorized when a vector unit can run it — a
// constant extent of at most `maxLanes` over straight-line code; any other becomes serial.
//
// Opt level 0: it legalises loop kinds for the emitters (the c target's `omp simd`, wasm's SIMD
// path), as TVM's VectorizeLoop runs even with vectorization off (to scalarize).
import { constValue } from "../../ast/te/expr.js"
import { isStraightLine } from "../../ast/tir/analysis.js"
import { mapStmt } from "../../ast/tir/tir.js"
import { tirPass, type TirPass } from "./tir-pass.js"

export const vectorizeLoops = (maxLanes = 64): TirPass =>
  tirPass(
    "lowering.VectorizeLoops",
    0,
    (f) => ({
      ...f,
      body: mapStmt(f.body, (x) => {
        if (x.kind !== "for" || x.forKind !== "vectorized") return undefined
        const ext = constValue(x.extent)
        return ext !== undefined && ext <= maxLanes && isStraightLine(x.body) ? undefined : { ...x, forKind: "serial" }
      }),
    }),
    { maxVectorLanes: maxLanes },
  )
