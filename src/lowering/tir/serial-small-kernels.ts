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
import { mapStmt, PARALLEL_CHUNKS, type PrimFunc } from "../../ast/tir/tir.js"
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

// lowering.ParallelChunks (the c target): a kernel whose params take fewer bytes than `maxBytes` — the
// record's cores × its L2's bytes, each core's share of the data no larger than its L2 — runs each
// parallel loop as one chunk a thread (the pragma `parallel_chunks` = 1: each thread its home share,
// OpenMP's static split), instead of the pool's four.
//
// Why: such a kernel's regions are short (a share its L2 holds streams in within microseconds), and
// every chunk costs cache-line transfers between the cores — its claim on the thread's home counter,
// its count on the region's shared `done`, the waiting thread's polls of it — ~250 ns each way
// between the 2 vCPUs of the Zen 5 of 2026-11-28 (a ping-pong's round trip 0.47–0.64 µs). Four
// chunks a thread balance a region whose worker is late; on a region of 10–20 µs the transfers cost
// more than the balance gives: MobileNetV2 int8 (every kernel under 2 MB, ~110 regions a run) at 2
// threads 0.88–0.98 of the four-chunk pool's time in six alternated sittings, while ResNet-18 int8
// and MobileNetV2 fp32 with one chunk a thread everywhere read 1.01–1.07 (docs/backends.md,
// "MobileNetV2 int8 at 2 threads", sixteenth session). A larger kernel keeps the pool's count.
//
// Meaning: a pragma on the loop; the iterations and what each computes are unchanged.

/** `f` with every parallel loop marked to run in `chunks` chunks a thread where its params take fewer than `maxBytes`; else `f` itself. */
export const fewChunksKernel = (f: PrimFunc, maxBytes: number, chunks = 1): PrimFunc => {
  if (paramBytes(f) >= maxBytes) return f
  const body = mapStmt(f.body, (s) =>
    s.kind === "for" && s.forKind === "parallel" && !(s.pragmas ?? []).some(([k]) => k === PARALLEL_CHUNKS)
      ? { ...s, pragmas: [...(s.pragmas ?? []), [PARALLEL_CHUNKS, String(chunks)] as const] }
      : undefined,
  )
  return body === f.body ? f : { ...f, body }
}

/** The largest kernel (params' bytes, exclusive) whose parallel loops run one chunk a thread: the cores' L2s. */
export const oneChunkMaxBytes = (cores: number, l2Bytes: number): number => Math.max(1, cores) * Math.max(0, l2Bytes)

export const parallelChunks = (maxBytes: number): TirPass => tirPass("lowering.ParallelChunks", 1, (f) => fewChunksKernel(f, maxBytes))
