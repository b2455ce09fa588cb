// The messages between the playground's page and its compiler worker.

/** Page → worker. */
export type Request =
  | { readonly type: "compile"; readonly name: string; readonly zoo?: string; readonly bytes?: ArrayBuffer; readonly threads?: number }
  | { readonly type: "run"; readonly runs: number; readonly seed: number }

export interface KernelRow {
  readonly name: string
  readonly ops: string
  readonly shape: string
  readonly flops: number
  readonly ms: number | null
  readonly kind: "compiled" | "fallback"
}

/** Worker → page. */
export type Reply =
  | { readonly type: "stage"; readonly text: string; readonly ms: number }
  | { readonly type: "compiled"; readonly name: string; readonly compileMs: number; readonly stages: readonly { readonly stage: string; readonly ms: number }[]; readonly svg: string; readonly kernels: readonly KernelRow[]; readonly inputs: string; readonly outputs: string; readonly threads: number; readonly isolated: boolean }
  | {
      readonly type: "ran"
      readonly oursMs: number
      readonly ortMs: number | null
      readonly ortError?: string
      readonly ratio: number | null
      readonly maxDiff: number | null
      readonly top5: number | null
      readonly top1: number
      readonly ortTop1: number | null
      /** Threads the module ran on (the calling worker's included), and the parallel ranges its workers took in the timed runs. */
      readonly threads: number
      readonly workerRanges: number
      /** onnxruntime-web's threads. */
      readonly ortThreads: number
      /** fnv1a of the first output's bytes: equal digests, equal outputs (bit for bit). */
      readonly digest: string
    }
  | { readonly type: "error"; readonly message: string }
