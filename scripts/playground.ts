// `npm run playground`: builds the playground into dist/playground and serves it on localhost
// (PORT, default 8080) until stopped.
import * as path from "node:path"
import { buildPlayground, playgroundFolders, serveFolders } from "./playground-server.js"

const outdir = path.resolve("dist/playground")
await buildPlayground(outdir)
const { url } = await serveFolders(playgroundFolders(outdir), Number(process.env.PORT ?? 8080))
console.log(`tessera playground: ${url} (Ctrl-C stops it)`)
