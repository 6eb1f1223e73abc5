/**
 * `matchd book` and `matchd result`: the conductor's HTTP queries, with a conductor that is
 * not there, or cannot answer yet, named in one line.
 */
import type { CommandResult } from "../../domain/index";
import { bearerHeaders } from "../../infra/http/bearer";
import { ClientError } from "./client-error";
import type { BookView } from "./format";

const requestTimeoutMs = 5000;

async function getJson(
  baseUrl: string,
  path: string,
  token = "",
): Promise<{ status: number; body: unknown }> {
  let response: Response;
  try {
    response = await fetch(`${baseUrl}${path}`, {
      signal: AbortSignal.timeout(requestTimeoutMs),
      headers: bearerHeaders(token),
    });
  } catch (error) {
    throw new ClientError(
      `no conductor answers at ${baseUrl} (${(error as Error).message}); start \`./matchd conductor\`, or pass --conductor-url`,
    );
  }
  const text = await response.text();
  try {
    return { status: response.status, body: JSON.parse(text) as unknown };
  } catch {
    throw new ClientError(
      `${baseUrl}${path} answered ${response.status} with no JSON: is that a conductor?`,
    );
  }
}

function errorOf(body: unknown): string {
  const error = (body as { error?: unknown } | null)?.error;
  return typeof error === "string" ? error : JSON.stringify(body);
}

export async function fetchBook(
  baseUrl: string,
  pairId: number,
  depth: number,
): Promise<BookView & { pairId: number }> {
  const { status, body } = await getJson(baseUrl, `/books/${pairId}?depth=${depth}`);
  if (status !== 200)
    throw new ClientError(`the conductor cannot show pair ${pairId}: ${errorOf(body)}`);
  return body as BookView & { pairId: number };
}

/** `token`: MATCHING_HTTP_TOKEN, which a conductor that has one requires here. */
export async function fetchResult(
  baseUrl: string,
  commandId: string,
  token: string,
): Promise<CommandResult> {
  const path = `/commands/${encodeURIComponent(commandId)}`;
  const { status, body } = await getJson(baseUrl, path, token);
  if (status === 401) {
    throw new ClientError(
      `the conductor at ${baseUrl} requires its token: set MATCHING_HTTP_TOKEN to the conductor's`,
    );
  }
  if (status === 404) {
    throw new ClientError(
      `no stored result for command ${commandId} (never processed, still queued, or processed longer ago than the dedup window, so expired)`,
    );
  }
  if (status !== 200)
    throw new ClientError(`the conductor cannot show command ${commandId}: ${errorOf(body)}`);
  return body as CommandResult;
}
