/**
 * The conductor's HTTP face: what ready means (every reason it is not, named), and the
 * query routes, whose answers say whose books they read (an active owner's or a standby's).
 */

import type { Hono } from "hono";
import type { Config } from "../config/schema";
import type { BootProgress } from "../infra/boot";
import { durabilityWaitMs } from "../infra/durability-policy";
import { createHttpApp } from "../infra/http/app";
import { withHeldAcknowledgements } from "../infra/valkey/policy-watch";
import type { ConductorParts } from "./parts";
import { queryRoutes } from "./queries";

/** How far the boot got: the durability policy verified yet, and what it waits for if not. */
export interface ConductorBoot {
  policyVerified: boolean;
  progress: BootProgress;
}

/** Every reason the conductor is not ready now; none means ready. */
function notReadyReasons(parts: ConductorParts, boot: ConductorBoot): string[] {
  const { writer, committer, reader, consumer, owner, policyWatch } = parts;
  const reasons: string[] = [];
  if (!boot.policyVerified) {
    const waiting = boot.progress.waitingFor;
    reasons.push(
      `durability policy not verified yet${waiting === undefined ? "" : `: ${waiting}`}`,
    );
  }
  if (writer.status !== "ready") reasons.push(`datastore ${writer.status}`);
  if (committer.status !== "ready") reasons.push(`datastore committer ${committer.status}`);
  if (reader.status !== "ready") reasons.push(`datastore reader ${reader.status}`);
  if (!consumer.connected) reasons.push("broker not connected");
  if (!owner.loaded) reasons.push("books not loaded");
  if (owner.fenced) reasons.push("fenced: another conductor owns the partition");
  if (owner.halted) {
    const { kind, commandId, message } = owner.halted;
    const what = kind === "invariant" ? "a matching invariant broke" : "a batch cannot commit";
    const on = commandId === undefined ? "" : ` on command ${commandId}`;
    reasons.push(`halted: ${what}${on}: ${message}`);
  }
  if (owner.lastFailure) reasons.push(`last batch failed: ${owner.lastFailure}`);
  if (owner.keysLost) {
    reasons.push(
      `the datastore lost the partition's keys at ${owner.keysLost.at} (epoch ${owner.keysLost.epoch}): books, results and dedup markers restarted empty; restart the conductor once it is understood (docs/operations.md)`,
    );
  }
  const violated = policyWatch?.violation();
  if (violated !== undefined) reasons.push(violated);
  return reasons;
}

export function conductorApp(config: Config, parts: ConductorParts, boot: ConductorBoot): Hono {
  const { engine, store, owner, metrics, policyWatch } = parts;
  return createHttpApp({
    metrics: metrics.registry,
    readiness: () => {
      const reasons = notReadyReasons(parts, boot);
      const ready = reasons.length === 0;
      return withHeldAcknowledgements(
        { ready, status: ready ? "ready" : "not-ready", reasons, role: owner.role() },
        policyWatch,
      );
    },
    routes: (app) => {
      // A standby's books may lag the owner's: every answer says whose they are.
      for (const path of ["/books/*", "/orders/*", "/digest"]) {
        app.use(path, async (c, next) => {
          await next();
          c.header("x-matchd-role", owner.role());
        });
      }
      queryRoutes(
        engine,
        store,
        () => owner.loaded,
        durabilityWaitMs(config),
        config.httpToken,
        owner.trace,
        config.dedupRetentionSeconds,
      )(app);
    },
  });
}
