// The devices' typed errors: an artifact that does not build or load, a kernel call that cannot run.
import { Data } from "effect"
import type { TargetKind } from "../ast/target.js"

/** A kernel call that cannot run: an unknown kernel, or arguments of the wrong count, type or size. */
export class DeviceRunError extends Data.TaggedError("DeviceRunError")<{ readonly kernel: string; readonly reason: string }> {
  override get message(): string {
    return `kernel ${this.kernel}: ${this.reason}`
  }
}

/** An artifact the device cannot build (the compiler failed or is missing). */
export class CompileError extends Data.TaggedError("CompileError")<{ readonly command: string; readonly reason: string; readonly stderr: string }> {
  override get message(): string {
    return `build failed (${this.command}): ${this.reason}${this.stderr ? `\n${this.stderr}` : ""}`
  }
}

/** A built artifact the device cannot load (a library, a module, a kernel it lacks). */
export class LoadError extends Data.TaggedError("LoadError")<{ readonly target: TargetKind; readonly path: string; readonly reason: string }> {
  override get message(): string {
    return `cannot load the ${this.target} ${this.path}: ${this.reason}`
  }
}

/**
 * A build cache folder Tessera will not use: another user owns it, or others can write into it (a
 * library planted there would be loaded and run), or it is not a folder.
 */
export class UnsafeCacheError extends Data.TaggedError("UnsafeCacheError")<{ readonly path: string; readonly reason: string }> {
  override get message(): string {
    return `the build cache ${this.path} is unsafe: ${this.reason}`
  }
}

/** No GPU to run a cuda artifact on: no CUDA driver library, or a driver that sees no device (the CLI's exit 2). */
export class NoGpuError extends Data.TaggedError("NoGpuError")<{ readonly reason: string }> {
  override get message(): string {
    return `no CUDA GPU here: ${this.reason}`
  }
}

export type DeviceError = CompileError | LoadError | UnsafeCacheError | NoGpuError

