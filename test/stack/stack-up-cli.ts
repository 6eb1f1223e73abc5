// Calls stackUp from a separate short-lived process, so the test can check that the
// servers outlive the process that started them (as they must for the compiled binary).
import { stackUp } from "../../src/stack/index";

const dir = process.argv[2];
if (dir === undefined) throw new Error("usage: stack-up-cli.ts <dir>");
const info = await stackUp({ dir, log: (line) => console.error(line) });
console.log(JSON.stringify(info));
process.exit(0);
