// The example in Node: prints the top-1 class and the scores as JSON.
import { classify } from "./app.js"

console.log(JSON.stringify(await classify()))
