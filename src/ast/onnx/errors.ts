import { Data } from "effect"

/** Bytes that are not a well-formed ONNX model (or tensor), or that the decoder rejects. */
export class DecodeError extends Data.TaggedError("DecodeError")<{
  /** What was being decoded: "model", "initializer 'w'", "node 'conv1' attribute 'value'", a file. */
  readonly where: string
  readonly reason: string
}> {
  override get message(): string {
    return `cannot decode ${this.where}: ${this.reason}`
  }
}

/** A well-formed model that uses a feature Tessera does not support (opset, type, functions). */
export class UnsupportedModelError extends Data.TaggedError("UnsupportedModelError")<{
  readonly where: string
  readonly feature: string
}> {
  override get message(): string {
    return `${this.where}: unsupported: ${this.feature}`
  }
}
