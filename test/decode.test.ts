import { describe, expect, it } from "vitest"
import { decodeOnnx } from "../src/ast/onnx/decode.js"
import { runFailure } from "./support/effect.js"

describe("decodeOnnx", () => {
  it("rejects empty bytes with a DecodeError", async () => {
    const e = await runFailure(decodeOnnx(new Uint8Array()))
    expect(e._tag).toBe("DecodeError")
  })
  it("rejects bytes that are not protobuf", async () => {
    const e = await runFailure(decodeOnnx(new TextEncoder().encode("this is not an onnx model at all")))
    expect(["DecodeError"]).toContain(e._tag)
  })
})
