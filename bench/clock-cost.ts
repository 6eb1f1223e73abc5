// What reading the clock at every command costs the domain bench: the alternating workload
// run with a clock read after each apply() and with reads only at each batch's start and end
// (batches of 500), interleaved in one process (six pairs after one warm-up pair), medians
// printed. Usage: node_modules/.bin/bun bench/clock-cost.ts

import { type CommandEnvelope, MatchingEngine } from "../src/domain/index";
import { createWorkload } from "./workloads";

const commands = 1_000_000;
const batchSize = 500;

function commandsPerSecond(readPerCommand: boolean): number {
  const workload = createWorkload("alternating", { seed: 1 });
  const engine = new MatchingEngine();
  const batch: CommandEnvelope[] = new Array(batchSize);
  const latencies = new Float64Array(batchSize);
  let timedNs = 0;
  for (let start = 0; start < commands; start += batchSize) {
    for (let k = 0; k < batchSize; k++) batch[k] = workload.next(start + k);
    const batchStart = Bun.nanoseconds();
    let previous = batchStart;
    if (readPerCommand) {
      for (let k = 0; k < batchSize; k++) {
        engine.apply(batch[k]!);
        const ended = Bun.nanoseconds();
        latencies[k] = ended - previous;
        previous = ended;
      }
    } else {
      for (let k = 0; k < batchSize; k++) engine.apply(batch[k]!);
      previous = Bun.nanoseconds();
    }
    timedNs += previous - batchStart;
  }
  return Math.round(commands / (timedNs / 1e9));
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[values.length >> 1]!;

commandsPerSecond(true);
commandsPerSecond(false);
const perCommand: number[] = [];
const perBatch: number[] = [];
for (let pair = 0; pair < 6; pair++) {
  perCommand.push(commandsPerSecond(true));
  perBatch.push(commandsPerSecond(false));
}
console.log(`a clock read per command: ${perCommand.join(" ")} (median ${median(perCommand)})`);
console.log(`one read per batch:       ${perBatch.join(" ")} (median ${median(perBatch)})`);
console.log(`ratio of medians: ${(median(perBatch) / median(perCommand)).toFixed(3)}`);
