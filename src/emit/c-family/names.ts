// Names in emitted source: every identifier is generated (b0, b1, … for buffers, v0, v1, … for
// variables, in order of first appearance), so no name from a program or a model ever reaches code;
// the original names appear only in comments, rendered by `commentSafe`.

/** A C / JS identifier (the only kernel names an emitter exports). */
export const isIdentifier = (name: string): boolean => /^[A-Za-z_][A-Za-z0-9_]*$/.test(name)

/** Generated names: the first name asked for is `${prefix}0`, the next new one `${prefix}1`, …; the same name gives the same one. */
export class Names {
  private readonly map = new Map<string, string>()
  constructor(private readonly prefix: string) {}
  get(name: string): string {
    let n = this.map.get(name)
    if (n === undefined) {
      n = `${this.prefix}${this.map.size}`
      this.map.set(name, n)
    }
    return n
  }
}

/**
 * A rendering of an arbitrary name that is safe inside a C block comment, a C++ / JS line comment
 * and a JS block comment: quoted and escaped as JSON (no line break), ASCII only (no U+2028 /
 * U+2029 line terminators of JS), no `*​/` that would end a block comment, no `?` (no `??/` trigraph
 * that would splice a line comment onto the next line).
 */
export const commentSafe = (s: string): string =>
  JSON.stringify(s)
    .replace(/\*\//g, "*\\/")
    .replace(/\?/g, "\\u003f")
    .replace(/[^\x20-\x7e]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`)
