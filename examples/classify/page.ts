// The example in a page: shows the top-1 class (test/browser.test.ts reads #top1).
import { classify } from "./app.js"

const show = (id: string, text: string) => {
  const el = (globalThis as unknown as { document: { getElementById(id: string): { textContent: string } | null } }).document.getElementById(id)
  if (el) el.textContent = text
}
classify().then(
  (r) => show("top1", String(r.top1)),
  (e: unknown) => show("error", e instanceof Error ? e.message : String(e)),
)
