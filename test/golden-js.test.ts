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

const renderCase = (mk: (typeof GOLDEN_CASES)[number]): readonly [string, string] => {
  const g = mk()
  return [`${g.name}.js`, emitJsModule([{ name: g.name, func: goldenFunc(g) }])]
}

describe("golden/js", () => {
  if (process.env.UPDATE_GOLDENS) {
    mkdirSync(DIR, { recursive: true })
    for (const [name, text] of render()) {
      const file = path.join(DIR, name)
      const old = existsSync(file) ? readFileSync(file, "utf8") : undefined
      if (old !== text) {
        writeFileSync(file, text)
        console.log(`${old === undefined ? "added" : "changed"} golden/js/${name}`)
      }
    }
  }
  // (each case rendered inside its test, not while the tests are collected: a mutation run attributes
  // the lowering and emission it runs to that test, instead of running every test for each mutant)
  for (const mk of GOLDEN_CASES)
    it(`the case ${mk.name} is byte-for-byte the golden`, () => {
      const [name, text] = renderCase(mk)
      const file = path.join(DIR, name)
      expect(existsSync(file), `${file} is missing: UPDATE_GOLDENS=1 npx vitest run test/golden-js.test.ts`).toBe(true)
      expect(text === readFileSync(file, "utf8"), `${name} changed: review the diff, then UPDATE_GOLDENS=1 npx vitest run test/golden-js.test.ts`).toBe(true)
    })
  it("emission is deterministic", () => {
    const files = render()
    const again = render()
    for (const [name, text] of files) expect(again.get(name)).toBe(text)
  })
})
