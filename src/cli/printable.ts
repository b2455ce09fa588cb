// Text from a model (names, messages that quote them) made safe to print on a terminal. No imports:
// the command line's entry (main.ts) loads it before anything else.

/**
 * Text for a terminal with the bytes a model's names may carry made visible: control characters
 * other than newline and tab (ESC starts a terminal escape sequence), DEL, the C1 controls and the
 * bidirectional overrides ("Trojan source") become \xNN or \u{NNNN}.
 */
export const printable = (s: string): string =>
  s.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g, (c) => {
    const code = c.charCodeAt(0)
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u{${code.toString(16)}}`
  })
