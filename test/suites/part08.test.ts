import { runPart } from '../support/suite.js'

await runPart(7)
