/**
 * Hides the secrets of URLs and of text that may hold one, before they reach a log, an error
 * or a report: passwords in a URL's user info and credential-like query items.
 */
import { isDiscoveryUrl } from "./valkey/address";

export function redactUrl(value: string): string {
  // Its host list is no URL the parser takes; the credentials are all that must go.
  if (isDiscoveryUrl(value)) return redactCredentials(value);
  // A broker cluster's node list: each URL on its own.
  if (value.includes(",")) return value.split(",").map(redactUrl).join(",");
  try {
    const url = new URL(value);
    if (url.password) url.password = "***";
    return url.toString();
  } catch {
    // Never echo an unparseable URL: it may still hold a password.
    return "(unparseable URL)";
  }
}

/**
 * The text with any URL password replaced by ***, parseable or not: a rejected value is
 * echoed in the error, and `amqp://user:secret@host:99999/` fails to parse yet holds a secret.
 * Everything between the scheme (or the start) and the last @ is hidden but a user name: a
 * password may itself hold a raw @ or /, and a malformed value (`amqp:/u:p@h`, `u:p@h`) is
 * exactly what gets rejected and echoed. An @ further on, in a path, costs at worst a
 * redacted host, never a revealed secret.
 */
export function redactCredentials(text: string): string {
  let out = text;
  const at = text.lastIndexOf("@");
  if (at >= 0) {
    const scheme = /^[a-z][\w+.-]*:\/{0,2}/i.exec(text)?.[0] ?? "";
    const userinfo = text.slice(scheme.length, at);
    const colon = userinfo.indexOf(":");
    const user =
      colon >= 0 && !/[/\s]/.test(userinfo.slice(0, colon)) ? userinfo.slice(0, colon + 1) : "";
    out = `${scheme}${user}***${text.slice(at)}`;
  }
  // A query item named as a credential (ioredis reads `?password=`) is hidden as well.
  return out.replace(/([?&](?:password|passwd|pass|pwd|secret|token|auth)=)[^&#\s]*/gi, "$1***");
}
