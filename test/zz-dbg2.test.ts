import { it } from "vitest"
import { Effect } from "effect"
import { targetSettings } from "../src/cli/targets.js"
import { compileGraph, emitArtifact } from "../src/pipeline.js"
import { zooGraph } from "../src/zoo/index.js"
import { writeFileSync } from "node:fs"
it("dbg", async () => {
  const settings = targetSettings("cuda", 1, { precision: "fp16" })
  const program = await Effect.runPromise(compileGraph(zooGraph("resnet18"), settings.target))
  const a = await Effect.runPromise(emitArtifact(program, settings.target))
  const src = new TextDecoder().decode(a.files.get("tessera_kernels.cu"))
  writeFileSync("/tmp/r18fp16.cu", src)
  console.log("half4", (src.match(/tessera_load_half4/g) ?? []).length, "half2", (src.match(/tessera_load_half2/g) ?? []).length, "twins", (src.match(/f32acc/g) ?? []).length, "kernels", a.kernels.length)
}, 600000)
