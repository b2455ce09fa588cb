// What differs between C-like targets, as one record per target: the statement walker
// (render.ts) owns the structure every such target shares — recursion over TIR, `if`/`else`,
// sequences, indentation, generated names, the buffers and variable ranges in scope, the enclosing
// loops, the definitions a module must include, the errors — and asks the dialect for the rest.
import type { Expr, Var } from "../../ast/te/expr.js"
import type { Interval } from "../../ast/te/simplify.js"
import type { Buffer, PrimFunc, Stmt } from "../../ast/tir/tir.js"
import type { EmitTarget } from "../emit-error.js"
import type { ExprRenderer, ExprScope } from "./expr.js"

export type StmtOf<K extends Stmt["kind"]> = Extract<Stmt, { kind: K }>
export type ForStmt = StmtOf<"for">

/** What a dialect's entries see at a statement. */
export interface Walk extends ExprScope {
  /** An expression rendered here (expr.ts, under the dialect's table). */
  readonly expr: (e: Expr) => string
  /** The generated name of a buffer. */
  readonly buf: (name: string) => string
  /** A buffer in scope by its program name (params, then allocations; inner ones shadow). */
  readonly buffer: (name: string) => Buffer | undefined
  /** The loops around this statement, outermost first. */
  readonly loops: readonly ForStmt[]
  /** Asks the module to include `text` once, under `key` (in order of first use), before every kernel. */
  readonly define: (key: string, text: string) => void
}

/**
 * A statement with a body: its lines before the body and after it, relative to the statement's
 * indentation (a line may indent itself further with leading spaces); the body sits one level in.
 */
export interface Block {
  readonly open: readonly string[]
  readonly close: readonly string[]
}

/** A `let`'s block, and the range of its variable that the body may assume (none: unknown there). */
export interface LetBlock extends Block {
  readonly bound?: Interval
}

/** The statements the dialect renders whole, as lines relative to their indentation: every kind without a body (a new kind of TIR statement lands here, and each dialect's `leaf` table fails to compile until it renders it). */
export type LeafKind = Exclude<Stmt["kind"], "seq" | "if" | "for" | "allocate" | "let">

/**
 * A C-like target as data. The walker renders `if`, sequences and indentation alike for every
 * dialect; everything else is an entry here, the statements without a body in a table typed over
 * their kinds.
 *
 * Entries, and the c dialect's choices (c/dialect.ts):
 * - `prelude`: the text every module starts with (c: `static inline` helpers, `tessera_alloc`);
 * - `signature`: a kernel's opening lines up to its `{` — qualifiers, return type, params by
 *   their generated names (c: a comment naming the original tensors, then
 *   `void f(const float* restrict b0, float* restrict b1) {`, params never stored to `const`);
 * - `expr`: the expression kinds whose text differs — constants, casts, calls, binary operators
 *   (c: c/expr.ts, each in its value class; variables, reads and `select` are the family's own);
 * - `access`: a buffer element (c: a flat index through the buffer's strides);
 * - `loop`: each loop kind (c: parallel → `#pragma omp parallel for`, vectorized →
 *   `#pragma omp simd`, unrolled → `#pragma GCC unroll n`, thread / vthread → a serial loop and
 *   a comment; then `for (int64_t v = …; v < …; ++v) {`);
 * - `allocate`: allocations by scope (c: an aligned stack array, or a `tessera_alloc` heap block
 *   freed after the body);
 * - `let`: a scalar binding (c: `const int64_t v = …;` in a block, integer lets bounded);
 * - `store`, `evaluate`: one element written, an expression run for its effect;
 * - `barrier`: a synchronisation of the threads of a block (c: a no-op comment outside thread
 *   loops, `walk.fail` inside one: a serial loop cannot keep its phases);
 * - `intrinsic`: a tensor intrinsic call, with its definition asked for through `walk.define`
 *   (c: a `tessera_gemm_*` micro-kernel; anything else fails: lower it first);
 * - `reduceLoop`: a loop that sums into one element, or takes its max or min (c: a float
 *   accumulator in a register under `#pragma omp simd reduction(…)`, so it vectorizes — a sum's
 *   additions reassociated, as onnxruntime's are).
 *
 * A CUDA dialect (kernels plus a host launcher) is another such record and its expression
 * renderer, no copy of the walker: `signature` gives `extern "C" __global__ void
 * __launch_bounds__(n) k(…)`; `loop` renders a thread-bound loop (`walk.loops` tells which axes
 * are bound around it) as `const int64_t v = threadIdx.x;` under a guard when the extent is not
 * the launch's, and keeps serial / unrolled loops as C's; `allocate` maps `shared` to a
 * `__shared__` array and `local` to a register array; `barrier` is `__syncthreads();` where C
 * fails; its prelude qualifies the helpers `__device__`. The host launcher (grid and block sizes
 * from the thread loops, the `<<<…>>>` calls) is module assembly beside the walker, as the c
 * target's header is.
 */
/**
 * A loop whose body reduces into one element: `for v: B[idx] = B[idx] ⊕ term` with ⊕ one of add,
 * max, min, `idx` free of `v`, `term` never reading B (render.ts finds them; a dialect may keep
 * the element in a register and reassociate, as a vector reduction).
 */
export interface ReduceLoop {
  readonly store: StmtOf<"store">
  readonly op: "add" | "max" | "min"
  /** The other operand (the store's value less the read of its own element). */
  readonly term: Expr
}

/**
 * A parallel loop whose body the walker outlined into a function of its own (a thread pool's task):
 * the loop, its kernel's name and its index among the kernel's outlined loops (a dialect names its
 * functions after both: unique in a unit of many kernels), the buffers and variables of the enclosing scopes its body reads or
 * writes (in order of first use; each buffer with whether the body stores to it), its variable's,
 * min's and extent's text inside the function, and the body's lines, indented as a loop's body
 * directly inside a function's (four spaces).
 */
export interface OutlinedLoop {
  readonly loop: ForStmt
  readonly kernel: string
  readonly index: number
  readonly buffers: readonly { readonly buffer: Buffer; readonly stored: boolean }[]
  readonly vars: readonly Var[]
  readonly variable: string
  readonly min: string
  readonly extent: string
  readonly body: readonly string[]
}

export interface CDialect {
  readonly target: EmitTarget
  readonly prelude: string
  /** Opening lines of kernel `name` up to and including its `{`; `params` are the params' generated names, `stored` the buffers it writes. */
  readonly signature: (f: PrimFunc, name: string, params: readonly string[], stored: ReadonlySet<string>) => readonly string[]
  readonly expr: ExprRenderer
  readonly access: (source: string, indices: readonly Expr[], walk: Walk) => string
  readonly loop: (s: ForStmt, walk: Walk) => Block
  readonly allocate: (s: StmtOf<"allocate">, walk: Walk) => Block
  readonly let: (s: StmtOf<"let">, walk: Walk) => LetBlock
  readonly leaf: { readonly [K in LeafKind]: (s: StmtOf<K>, walk: Walk) => readonly string[] }
  /**
   * A reduction loop rendered whole (lines relative to its indentation; `walk` is the loop body's, its
   * variable in scope), or undefined to render it as any loop. Absent: every loop as written.
   */
  readonly reduceLoop?: (s: ForStmt, r: ReduceLoop, walk: Walk) => readonly string[] | undefined
  /**
   * Any loop rendered whole (lines relative to its indentation; `walk` is the scope around the
   * loop, its variable not in it), or undefined to render it otherwise (cuda: a vectorized copy
   * as one float4 / float2 access). Absent: no loop is.
   */
  readonly wholeLoop?: (s: ForStmt, walk: Walk) => readonly string[] | undefined
  /**
   * A parallel loop (not inside another parallel or a vectorized loop) outlined: the definitions of
   * its function(s), placed before the kernel, and the lines that run it in place of the loop
   * (relative to its indentation; `walk` is the scope around the loop). Absent: parallel loops are
   * rendered by `loop` (c under OpenMP: `#pragma omp parallel for`).
   */
  readonly outline?: (o: OutlinedLoop, walk: Walk) => { readonly definition: readonly string[]; readonly call: readonly string[] }
}
