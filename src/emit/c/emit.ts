// The `c` target: PrimFuncs → C11 translation units (plus the header), built by gcc or clang into
// a shared library and called through an FFI: one unit of everything (what the tuner builds), and
// the split form an artifact ships — a unit per distinct kernel code (kernels of the same code are
// aliases of its first), a runtime unit, and the prelude header they include — so each unit is
// compiled in parallel and cached by its content. Pure and deterministic: same funcs and options,
// same bytes. Identifiers are generated (b0 for buffers, v3 for variables) in order of first
// appearance; names from programs appear only in escaped comments.
//
// The functions are the C-family walker's (../c-family/render.ts) under the c dialect
// (dialect.ts, which says how each construct is lowered to C); this file assembles the units — the
// prelude, the intrinsic definitions the kernels call, the kernels — and the header.
import { storedBuffers } from "../../ast/tir/analysis.js"
import type { PrimFunc } from "../../ast/tir/tir.js"
import { renderFunction, type RenderMemo } from "../c-family/render.js"
import { commentSafe, isIdentifier, Names } from "../c-family/names.js"
import { EmitError } from "../emit-error.js"
import { cDialect, declareC, describeC, type CParallel } from "./dialect.js"
import { cPool, C_POOL_DECLARATIONS } from "./pool.js"
import { cPreludeHeader, C_RUNTIME } from "./prelude.js"

export interface CEmitOptions {
  /** Params are declared `restrict` (they never overlap). Default true. */
  readonly restrict?: boolean
  /** Functions whose params may overlap (in-place kernels): declared without `restrict` whatever `restrict` says. */
  readonly aliased?: ReadonlySet<string>
  /** Allocations up to this many bytes live on the stack. Default 32 KiB. */
  readonly stackBytes?: number
  /** Fill every allocation with 0xff bytes (NaN / -1) so a read before write shows. Default false. */
  readonly poison?: boolean
  /** The header's include guard and the library's name in comments. Default "tessera_kernels". */
  readonly libName?: string
  /** What runs parallel loops (dialect.ts): Tessera's thread pool or OpenMP. Default "pool"; the backend record says which it emits. */
  readonly parallel?: CParallel
  /**
   * Add the plan unit to the split form (`tessera_plan.c`, last): every kernel in the given order,
   * called through a wrapper of one signature, so a run is one native call (planUnit). Default
   * false (the tuner's candidates and the goldens have none; an artifact has one).
   */
  readonly plan?: boolean
}

/** One translation unit of a split artifact. */
export interface CUnit {
  /** Its file name: `<kernel>.c` after the first kernel it defines, or `tessera_runtime.c`. */
  readonly file: string
  /** The kernels it defines: the first's code, the others aliases of it (the same code); none for the runtime. */
  readonly kernels: readonly string[]
  readonly source: string
}

export interface CEmitted {
  /** Every kernel in one translation unit, the prelude first (what the tuner builds its candidates from). */
  readonly source: string
  /** The library's header: every kernel's prototype. */
  readonly header: string
  /** The split form's prelude header (tessera_prelude.h), which each of its units includes. */
  readonly prelude: { readonly file: string; readonly source: string }
  /** The split form: the runtime unit, then one unit per distinct kernel code, in order of first appearance, then the plan unit where asked for. */
  readonly units: readonly CUnit[]
}

/** The prelude header's file name, as the units include it. */
export const C_PRELUDE_FILE = "tessera_prelude.h"
/** The runtime unit's file name. */
export const C_RUNTIME_FILE = "tessera_runtime.c"
/** The plan unit's file name (no kernel's: a kernel's name never starts with `tessera_`). */
export const C_PLAN_FILE = "tessera_plan.c"

const C_KEYWORDS = new Set(
  "auto break case char const continue default do double else enum extern float for goto if inline int long register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while main _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local".split(
    " ",
  ),
)

/** Whether `name` can be an exported C symbol here (no keyword, no reserved or generated prefix). */
export const isSafeCName = (name: string): boolean =>
  isIdentifier(name) && !C_KEYWORDS.has(name) && !name.startsWith("tessera_") && !name.startsWith("_") && !/^[bv][0-9]+$/.test(name) && name.length <= 200

const fail = (reason: string): never => {
  throw new EmitError({ target: "c", reason })
}

const checkNames = (funcs: readonly PrimFunc[]): void => {
  const seen = new Set<string>()
  for (const f of funcs) {
    if (!isSafeCName(f.name)) fail(`function name ${commentSafe(f.name)} is not a safe C identifier (rename it, e.g. k0)`)
    if (seen.has(f.name)) fail(`function name ${f.name} appears twice`)
    seen.add(f.name)
  }
}

/** A kernel's declaration as the header has it: without `restrict`, its params named as the definition's. */
const declaration = (f: PrimFunc, name = f.name): string => {
  const names = new Names("b")
  return declareC(name, f, f.params.map((p) => names.get(p.name)), storedBuffers(f.body), false)
}

/** A kernel's prototype for the header: its comment, then its declaration without `restrict`. */
const prototype = (f: PrimFunc): string => `${describeC(f, storedBuffers(f.body))}\n${declaration(f)};`

/**
 * What decides a kernel's object code: its text without the comments (which name the program's
 * values; commentSafe escapes any comment terminator in a name, so the first terminator closes
 * each), with its own name taken out of its signature and of its outlined loops' names
 * (`tessera_par<i>_<name>`, `tessera_range<i>_<name>`: dialect.ts), and the definitions it calls.
 */
const codeKey = (name: string, text: string, definitions: ReadonlyMap<string, string>): string =>
  [
    text
      .replace(/\/\*[\s\S]*?\*\//g, "")
      .replace(new RegExp(`\\btessera_(par|range)([0-9]+)_${name}\\b`, "g"), "tessera_$1$2_")
      .replace(` ${name}(`, " ("),
    ...definitions.values(),
  ].join("\0")

/**
 * A definition a kernel's unit carries (a `static inline` helper: the VNNI dot, a gemm micro-kernel),
 * guarded by its name: the device's build compiles small units several to a gcc run, through a file
 * that includes them (src/device/c/build.ts), where each helper must be defined once.
 */
const guarded = (fn: string, text: string): string => {
  if (!isIdentifier(fn)) fail(`helper name ${commentSafe(fn)} is not a C identifier`)
  const guard = `TESSERA_HAVE_${fn}`
  return `#ifndef ${guard}\n#define ${guard}\n${text}\n#endif`
}

/** A kernel's unit: the prelude, its declaration as the header has it (checked against the definition), the definitions it calls, its code, and each kernel of the same code as an alias. */
const kernelUnit = (lib: string, members: readonly { readonly f: PrimFunc; readonly text: string; readonly definitions: ReadonlyMap<string, string> }[]): CUnit => {
  const [first, ...same] = members
  const name = first.f.name
  const also = same.length ? ` (${same.map((m) => m.f.name).join(", ")}: the same code, as aliases)` : ""
  const source = [
    `/* Generated by Tessera (c target): ${lib}, kernel ${name}${also}. Do not edit. */`,
    `#include "${C_PRELUDE_FILE}"`,
    "",
    `${declaration(first.f)};`,
    "",
    ...[...first.definitions].map(([fn, h]) => `${guarded(fn, h)}\n`),
    `${first.text}\n`,
    ...same.map((m) => `${describeC(m.f, storedBuffers(m.f.body))}\n${declaration(m.f)} __attribute__((alias("${name}")));\n`),
  ].join("\n")
  return { file: `${name}.c`, kernels: members.map((m) => m.f.name), source }
}

/**
 * The plan: a run's kernels called from C, so a run is one native call instead of one FFI call a
 * kernel (each boundary through the JS executor and koffi cost 2–4 µs with real kernels, their
 * code and data refetched after every large kernel: docs/tuning.md). Each kernel gets a wrapper
 * of one signature, `static void tessera_plan_<kernel>(void* const* a)`, that calls it on its
 * arguments' pointers (C converts `void*` to each param's pointer type); the table holds them in
 * the funcs' order (the program's compiled kernels, in run order) with each one's argument count.
 * `tessera_plan_run(args, from, to)` runs kernels [from, to) on `args`, every kernel's arguments
 * one after another from the first kernel's; `tessera_plan_size` and `tessera_plan_args` say how
 * many kernels and arguments the table has, for the loader to check. A unit of its own, so the
 * runtime unit stays the same bytes for every model; its wrappers are static and named
 * `tessera_plan_*` (no kernel's name starts with `tessera_`), so it can share a translation unit
 * with kernel units (src/device/c/build.ts batches small units).
 */
const planUnit = (lib: string, funcs: readonly PrimFunc[]): CUnit => {
  const wrapper = (f: PrimFunc) => `tessera_plan_${f.name}`
  const total = funcs.reduce((n, f) => n + f.params.length, 0)
  const source = [
    `/* Generated by Tessera (c target): ${lib}, the plan: its ${funcs.length} kernels in run order, one call a run. Do not edit. */`,
    `#include "${C_PRELUDE_FILE}"`,
    "",
    ...funcs.map((f) => `${declaration(f)};`),
    "",
    ...funcs.map((f) => `static void ${wrapper(f)}(void* const* a) { ${f.name}(${f.params.map((_, k) => `a[${k}]`).join(", ")}); }`),
    "",
    `typedef void (*tessera_plan_fn)(void* const*);`,
    `static const tessera_plan_fn tessera_plan_table[${funcs.length}] = {`,
    ...funcs.map((f) => `  ${wrapper(f)},`),
    `};`,
    `static const int tessera_plan_argc[${funcs.length}] = {${funcs.map((f) => f.params.length).join(", ")}};`,
    "",
    `int tessera_plan_size(void) { return ${funcs.length}; }`,
    `int tessera_plan_args(void) { return ${total}; }`,
    `void tessera_plan_run(void* const* args, int from, int to) {`,
    `  for (int i = 0; i < from; i++) args += tessera_plan_argc[i];`,
    `  for (int i = from; i < to; i++) {`,
    `    tessera_plan_table[i](args);`,
    `    args += tessera_plan_argc[i];`,
    `  }`,
    `}`,
    "",
  ].join("\n")
  return { file: C_PLAN_FILE, kernels: [], source }
}

/**
 * The kernels as one translation unit (`source`), and split (`units`: one per distinct code, each
 * kernel of the same code an alias of the first), with the header. Throws EmitError.
 */
export const emitC = (funcs: readonly PrimFunc[], options: CEmitOptions = {}): CEmitted => {
  checkNames(funcs)
  const parallel = options.parallel ?? "pool"
  const dialectOf = (restrict: boolean) => cDialect({ restrict, stackBytes: options.stackBytes ?? 32 * 1024, poison: options.poison ?? false, parallel })
  const dialect = dialectOf(options.restrict ?? true)
  const overlapping = options.aliased && options.aliased.size > 0 ? dialectOf(false) : dialect
  const lib = options.libName ?? "tessera_kernels"
  if (!isIdentifier(lib)) fail(`library name ${commentSafe(lib)} is not a safe C identifier`)
  // (kernels that share a lowered function render its body once)
  const memo: RenderMemo = new Map()
  const rendered = funcs.map((f) => {
    const definitions = new Map<string, string>()
    const text = renderFunction(options.aliased?.has(f.name) ? overlapping : dialect, f, f.name, definitions, memo)
    return { f, text, definitions }
  })
  // the single unit's definitions: each once, in order of first use
  const intrinsics = new Map<string, string>()
  for (const r of rendered) for (const [k, v] of r.definitions) if (!intrinsics.has(k)) intrinsics.set(k, v)
  const source = [`/* Generated by Tessera (c target): ${lib}. Do not edit. */`, dialect.prelude, ...[...intrinsics.values()].map((h) => `${h}\n`), ...rendered.map((r) => `${r.text}\n`)].join("\n")
  const byCode = new Map<string, (typeof rendered)[number][]>()
  for (const r of rendered) {
    const key = codeKey(r.f.name, r.text, r.definitions)
    const members = byCode.get(key)
    if (members) members.push(r)
    else byCode.set(key, [r])
  }
  const runtime: CUnit = {
    file: C_RUNTIME_FILE,
    kernels: [],
    source: [
      `/* Generated by Tessera (c target): ${lib}, the runtime every kernel's unit calls. Do not edit. */`,
      `#include "${C_PRELUDE_FILE}"`,
      "",
      parallel === "pool" ? `${C_RUNTIME}\n${cPool("")}` : C_RUNTIME,
    ].join("\n"),
  }
  const units = [runtime, ...[...byCode.values()].map((members) => kernelUnit(lib, members)), ...(options.plan && funcs.length > 0 ? [planUnit(lib, funcs)] : [])]
  const preludeHeader = cPreludeHeader(parallel === "pool" ? `\n${C_POOL_DECLARATIONS}` : "")
  const prelude = { file: C_PRELUDE_FILE, source: `/* Generated by Tessera (c target): the prelude every unit includes. Do not edit. */\n${preludeHeader}` }
  const guard = `${lib.toUpperCase()}_H`
  const header = [
    `/* Generated by Tessera (c target): ${lib}. Do not edit. */`,
    `#ifndef ${guard}`,
    `#define ${guard}`,
    `#include <stdint.h>`,
    `#ifdef __cplusplus`,
    `extern "C" {`,
    `#endif`,
    "",
    ...funcs.map(prototype).map((p) => `${p}\n`),
    `#ifdef __cplusplus`,
    `}`,
    `#endif`,
    `#endif`,
    "",
  ].join("\n")
  return { source, header, prelude, units }
}
