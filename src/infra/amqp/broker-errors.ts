/**
 * Names the broker's refusals a person must fix (wrong credentials, a vhost that does not
 * exist or is not permitted) apart from an unreachable broker, which is worth retrying:
 * retrying a refusal for ever only hides it behind "not reachable".
 */
import { redactUrl } from "../redact";

/** The broker answered and refused this user or vhost: fatal at boot, never retried there. */
export class BrokerRefusedError extends Error {
  override readonly name = "BrokerRefusedError";
  readonly code = "BROKER_REFUSED";

  constructor(
    message: string,
    /**
     * "vhost" is amqplib's one report of every refusal at ConnectionOpen: a vhost that does not
     * exist or is not permitted, and also one that is down or at its connection limit, which
     * pass; a service takes it as fatal only when it persists.
     */
    readonly refused: "credentials" | "vhost",
  ) {
    super(message);
  }
}

/**
 * The refusal behind a failed connect, or null when the broker was merely not reached.
 * amqplib reports a bad login as "403 (ACCESS-REFUSED)" and a missing or forbidden vhost
 * (the broker's 530 NOT_ALLOWED closes the connection at ConnectionOpen) only as
 * "Expected ConnectionOpenOk; got <ConnectionClose ...>".
 */
export function brokerRefusal(error: unknown, url: string): BrokerRefusedError | null {
  const message = error instanceof Error ? error.message : String(error);
  const { user, vhost } = urlParts(url);
  if (/ACCESS.REFUSED|\b403\b/.test(message)) {
    return new BrokerRefusedError(
      `the broker at ${redactUrl(url)} refused the credentials of user ${user} (wrong user or password in MATCHING_BROKER_URL)`,
      "credentials",
    );
  }
  if (/Expected ConnectionOpenOk|NOT.ALLOWED|\b530\b/.test(message)) {
    return new BrokerRefusedError(
      `the broker at ${redactUrl(url)} refused vhost "${vhost}": it does not exist, or user ${user} has no permission on it (the vhost is the URL's path)`,
      "vhost",
    );
  }
  return null;
}

/** One line for a failed broker connect or channel, without a stack trace. */
export function brokerErrorLine(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as Error & { code?: unknown }).code;
  return typeof code === "string" && !error.message.includes(code)
    ? `${code}: ${error.message}`
    : error.message;
}

function urlParts(url: string): { user: string; vhost: string } {
  try {
    const parsed = new URL(url);
    const path = decodeURIComponent(parsed.pathname.replace(/^\//, ""));
    return { user: decodeURIComponent(parsed.username) || "guest", vhost: path || "/" };
  } catch {
    return { user: "(unknown)", vhost: "(unknown)" };
  }
}
