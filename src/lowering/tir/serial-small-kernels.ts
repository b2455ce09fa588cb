// lowering.SerialSmallKernels (the CPU targets): a kernel whose params (what it reads and writes)
// take fewer bytes than `minBytes` runs its parallel loops serially.
//
// Why: each parallel loop is a parallel region, started and joined on every call — a few µs even
// when the other threads are spinning (2.3–3 µs an empty OpenMP region at best on the 2-core
// Zen 5 of 2026-11-26), and a join waits for the slowest thread: one that other work holds off
// its core holds the region. A core streams a share of the data its L1 holds in well under that,
// so such a kernel's region costs more than the second thread gives back: EfficientNet-B0's
// squeeze-excite 1×1 convs on one pixel (a few KB of weights) ran 3–5 µs on 1 thread and 4–7 on 2
// (docs/backends.md, seventh session). The pipeline's caller sizes `minBytes` from the target
// record: cores × the L1's bytes (each core's share of the data no larger than its L1).
//
// Meaning: a parallel loop's iterations are independent (what the parallel primitive requires), so
// running them in order computes the same; only the loop kind changes.
import { mapStmt, type PrimFunc } from "../../ast/tir/tir.js"
import { BYTES } from "../../ast/graph/dtype.js"
import { paramsOf } from "../../ast/tir/analysis.js"
import { tirPass, type TirPass } from "./tir-pass.js"

/** Bytes of a function's params: what one call reads and writes of its caller's memory. */
export const paramBytes = (f: PrimFunc): number => paramsOf(f).reduce((s, p) => s + p.elements * BYTES[p.dtype], 0)

/** The smallest kernel (params' bytes) whose loops stay parallel on a CPU target: each core's share at least its L1. */
export const parallelMinBytes = (cores: number, l1Bytes: number): number => Math.max(1, cores) * Math.max(0, l1Bytes)

/** `f` with every parallel loop serial where its params take fewer than `minBytes`; else `f` itself. */
export const serialSmallKernel = (f: PrimFunc, minBytes: number): PrimFunc => {
  if (paramBytes(f) >= minBytes) return f
  const body = mapStmt(f.body, (s) => (s.kind === "for" && s.forKind === "parallel" ? { ...s, forKind: "serial" } : undefined))
  return body === f.body ? f : { ...f, body }
}

export const serialSmallKernels = (minBytes: number): TirPass => tirPass("lowering.SerialSmallKernels", 1, (f) => serialSmallKernel(f, minBytes))
