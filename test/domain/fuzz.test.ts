// Seeded fuzzing of what a command message goes through: the body codec, the decoder and the
// engine's apply. Any input must give a result code or an unreadable-body reason, never a
// throw, and the books must pass check() throughout. MATCHD_FUZZ_INPUTS sets the inputs per
// property (1,000,000 across the three by default); MATCHD_PROPERTY_SEED replays a run.

import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { createWorkload } from "../../bench/workloads";
import { decodeCommand, MatchingEngine, resultCodeName } from "../../src/domain/index";
import { decodeBody } from "../../src/infra/amqp/codec";
import { propertySeed } from "../support/property";

const scale = Number(process.env.MATCHD_FUZZ_INPUTS ?? "0") || 0;
const inputs = (fallback: number) => (scale > 0 ? scale : fallback);

/** One engine for a whole property: state built by earlier inputs is part of the search. */
function pipeline() {
  const engine = new MatchingEngine();
  let applied = 0;
  return {
    engine,
    /** Codec, decoder, engine: returns what the conductor would answer, or throws (a find). */
    run(bytes: Uint8Array): string {
      const body = decodeBody(bytes);
      if (!body.ok) return `unreadable: ${body.reason}`;
      const decoded = decodeCommand(body.value);
      if (!decoded.ok) return resultCodeName(decoded.code);
      const outcome = engine.apply(decoded.command);
      if (++applied % 5000 === 0) engine.check();
      expect(resultCodeName(outcome.result.code)).not.toBe("unknown");
      return outcome.result.codeName;
    },
  };
}

const encoder = new TextEncoder();
const valid = createWorkload("mixed", { seed: 7 });
const seedCommands = Array.from({ length: 64 }, (_, i) => valid.next(i));

/** A JSON value for any field: the kinds decoders stumble on, and plain ones. */
const anyValue = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom("", "0", "-1", "1e308", "NaN", "1.", ".5", "١٢", "\u0000", "9".repeat(40)),
  fc.constantFrom(0, -0, -1, 1.5, 2 ** 53, Number.MAX_VALUE, 1e-7),
  fc.string({ maxLength: 300 }),
);

let fresh = 0;

/** A valid command with one field, somewhere, replaced, deleted or given a new sibling. */
const mutatedCommand = fc
  .tuple(
    fc.nat(seedCommands.length - 1),
    fc.nat(20),
    anyValue,
    fc.constantFrom("set", "delete", "add"),
  )
  .map(([which, fieldIndex, value, how]) => {
    const command = structuredClone(seedCommands[which]!) as unknown as Record<string, unknown>;
    const payload = command.payload as Record<string, unknown>;
    // Fresh ids, so that mutations reach matching rather than the duplicate checks.
    fresh++;
    command.commandId = `fuzz-c-${fresh}`;
    payload.id = `fuzz-o-${fresh}`;
    const targets = [
      ...Object.keys(command).map((k) => [command, k] as const),
      ...Object.keys(payload).map((k) => [payload, k] as const),
    ];
    const [target, key] = targets[fieldIndex % targets.length]!;
    if (how === "set") target[key] = value;
    else if (how === "delete") delete target[key];
    else target[`extra${fieldIndex}`] = value;
    return encoder.encode(JSON.stringify(command));
  });

describe(`fuzzing the codec, decoder and engine (seed ${propertySeed})`, () => {
  // Each kind with the outcomes it must reach: a generator that stopped reaching them (say,
  // mutations that no longer decode) would search nothing there.
  const cases: [string, fc.Arbitrary<Uint8Array>, number, string[]][] = [
    ["random bytes", fc.uint8Array({ maxLength: 256 }), inputs(400_000), ["unreadable"]],
    [
      "random JSON",
      fc.jsonValue({ maxDepth: 4 }).map((v) => encoder.encode(JSON.stringify(v) ?? "null")),
      inputs(300_000),
      ["bad-envelope"],
    ],
    [
      "mutated valid commands",
      mutatedCommand,
      inputs(300_000),
      ["bad-envelope", "bad-decimal", "rested", "filled"],
    ],
  ];
  for (const [name, arbitrary, runs, reached] of cases) {
    test(`${name}: ${runs} inputs, no throw, check() holds`, () => {
      const { engine, run } = pipeline();
      const outcomes = new Map<string, number>();
      const started = performance.now();
      try {
        fc.assert(
          fc.property(arbitrary, (bytes) => {
            const outcome = run(bytes).split(":")[0]!;
            outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
          }),
          { seed: propertySeed, numRuns: runs },
        );
      } catch (error) {
        console.error(`${name} fuzzing failed; replay with MATCHD_PROPERTY_SEED=${propertySeed}`);
        throw error;
      }
      engine.check();
      engine.checkDigest();
      const top = [...outcomes].sort((a, b) => b[1] - a[1]).slice(0, 5);
      console.log(
        `${name}: ${runs} inputs in ${((performance.now() - started) / 1000).toFixed(1)} s; outcomes ${top.map(([k, v]) => `${k} ${v}`).join(", ")}`,
      );
      for (const outcome of reached) expect(outcomes.get(outcome) ?? 0).toBeGreaterThan(0);
    }, 300_000);
  }
});
