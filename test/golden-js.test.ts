// Goldens of the js target: the same fixed cases and schedules as the c goldens (scripts/update-goldens.ts),
// emitted as ES modules. Any byte change fails; to accept a reviewed change:
//   UPDATE_GOLDENS=1 npx vitest run test/golden-js.test.ts
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { GOLDEN_CASES, goldenFunc } from "../scripts/update-goldens.js"
import { emitJsModule } from "../src/emit/js/emit.js"

const DIR = path.resolve(import.meta.dirname, "../golden/js")
const render = () => new Map(GOLDEN_CASES.map((mk) => mk()).map((g) => [`${g.name}.js`, emitJsModule([{ name: g.name, func: goldenFunc(g) }])] as const))

describe("golden/js", () => {
  const files = render()
  if (process.env.UPDATE_GOLDENS) {
    mkdirSync(DIR, { recursive: true })
    for (const [name, text] of files) {
      const file = path.join(DIR, name)
      const old = existsSync(file) ? readFileSync(file, "utf8") : undefined
      if (old !== text) {
        writeFileSync(file, text)
        console.log(`${old === undefined ? "added" : "changed"} golden/js/${name}`)
      }
    }
  }
  for (const [name, text] of files)
    it(`${name} is byte-for-byte the golden`, () => {
      const file = path.join(DIR, name)
      expect(existsSync(file), `${file} is missing: UPDATE_GOLDENS=1 npx vitest run test/golden-js.test.ts`).toBe(true)
      expect(text === readFileSync(file, "utf8"), `${name} changed: review the diff, then UPDATE_GOLDENS=1 npx vitest run test/golden-js.test.ts`).toBe(true)
    })
  it("emission is deterministic", () => {
    const again = render()
    for (const [name, text] of files) expect(again.get(name)).toBe(text)
  })
})
