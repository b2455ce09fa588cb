// Where Tessera keeps what it measures and builds on this host (the FMA record, the c target's
// objects and libraries): $TESSERA_CACHE_DIR, else $XDG_CACHE_HOME/tessera, else ~/.cache/tessera.
import * as os from "node:os"
import * as path from "node:path"

/** Where measurements and builds are kept: $TESSERA_CACHE_DIR, else $XDG_CACHE_HOME/tessera, else ~/.cache/tessera. */
export const cacheRoot = (): string =>
  process.env.TESSERA_CACHE_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), ".cache"), "tessera")
