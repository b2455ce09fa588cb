// The messages between the playground's page and its compiler worker.

/** Page → worker. */
export type Request =
  | { readonly type: "compile"; readonly name: string; readonly zoo?: string; readonly bytes?: ArrayBuffer }
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
  | { readonly type: "compiled"; readonly name: string; readonly compileMs: number; readonly stages: readonly { readonly stage: string; readonly ms: number }[]; readonly svg: string; readonly kernels: readonly KernelRow[]; readonly inputs: string; readonly outputs: string }
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
    }
  | { readonly type: "error"; readonly message: string }
