/**
 * The outbox's HTTP face: what ready means for an active outbox and for a standby (healthy,
 * waiting for the lease), and the stream's gauges read just before each scrape.
 */
import type { Hono } from "hono";
import type { BootProgress } from "../infra/boot";
import { createHttpApp, type Readiness } from "../infra/http/app";
import { withHeldAcknowledgements } from "../infra/valkey/policy-watch";
import type { OutboxParts } from "./parts";

/** How far the boot got: the durability policy verified yet, and what it waits for if not. */
export interface OutboxBoot {
  policyVerified: boolean;
  progress: BootProgress;
}

function outboxReadiness(parts: OutboxParts, boot: OutboxBoot): Readiness {
  const { control, policyWatch, lease, loop } = parts;
  const reasons: string[] = [];
  if (!boot.policyVerified) {
    const waiting = boot.progress.waitingFor;
    reasons.push(
      `durability policy not verified yet${waiting === undefined ? "" : `: ${waiting}`}`,
    );
  }
  if (control.status !== "ready") reasons.push("datastore disconnected");
  const violated = policyWatch?.violation();
  if (violated !== undefined) reasons.push(violated);
  if (!lease.held()) {
    // A standby is ready: it is healthy and takes over when the holder goes away.
    if (reasons.length > 0) return { ready: false, status: "not-ready", reasons };
    const holder = lease.otherHolder ?? "nobody yet";
    return {
      ready: true,
      status: "ready",
      reasons: [`standby: lease held by ${holder}`],
      role: "standby",
    };
  }
  if (!loop.brokerConnected) reasons.push("broker disconnected");
  const blocked = loop.brokerBlocked;
  if (blocked !== null) reasons.push(`broker blocks publishing: ${blocked}`);
  if (reasons.length > 0) return { ready: false, status: "not-ready", reasons, role: "active" };
  if (loop.unroutableExchange !== null) {
    const reason = `events to ${loop.unroutableExchange} are unroutable: bind a queue to it`;
    return { ready: true, status: "degraded", reasons: [reason], role: "active" };
  }
  return { ready: true, status: "ready", reasons: [], role: "active" };
}

export function outboxApp(parts: OutboxParts, boot: OutboxBoot): Hono {
  const { stream, control, metrics, registry, policyWatch } = parts;
  return createHttpApp({
    metrics: registry,
    readiness: () => withHeldAcknowledgements(outboxReadiness(parts, boot), policyWatch),
    beforeMetrics: async () => {
      const stats = await stream.stats(control);
      if (!stats) return;
      metrics.pending.set(stats.pending);
      metrics.streamLength.set(stats.length);
      const oldest = stats.oldestEntryMs;
      metrics.streamLagSeconds.set(oldest === null ? 0 : Math.max(0, (Date.now() - oldest) / 1000));
    },
  });
}
