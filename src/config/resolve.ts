/**
 * Resolves the configuration once from the environment and flags (flags win),
 * collecting every problem instead of stopping at the first.
 */
import { redactCredentials, redactUrl } from "../infra/redact";
import { type Config, type Subcommand, settings } from "./schema";

export type ConfigResult = { ok: true; config: Config } | { ok: false; problems: string[] };

export function resolveConfig(
  env: Readonly<Record<string, string | undefined>>,
  flags: ReadonlyMap<string, string>,
  subcommand: Subcommand,
  /** The host's name, for MATCHING_PARTITION=ordinal (main.ts passes os.hostname()). */
  hostname = "",
): ConfigResult {
  const problems: string[] = [];
  const values: Record<string, unknown> = {};
  for (const setting of settings) {
    const fromFlag = flags.get(setting.flag);
    const fromEnv = env[setting.env];
    const given = fromFlag ?? (fromEnv === undefined || fromEnv === "" ? undefined : fromEnv);
    const source = fromFlag !== undefined ? setting.flag : setting.env;
    const ordinal = setting.key === "partition" && given === "ordinal";
    const raw = ordinal ? ordinalOf(hostname) : given;
    if (ordinal && raw === undefined) {
      problems.push(
        `${setting.env} (${setting.flag}): got ordinal, but the host name "${hostname}" does not end in -<number>, as a StatefulSet's pod names do [from ${source}]`,
      );
      continue;
    }
    const parsed = setting.schema.safeParse(raw ?? setting.defaultFor(subcommand));
    if (parsed.success) {
      values[setting.key] = parsed.data;
    } else {
      problems.push(
        `${setting.env} (${setting.flag}): got ${shown(setting.key, raw)}; accepted: ${setting.accepted} [from ${source}]`,
      );
    }
  }
  const { partition, partitionCount } = values;
  if (
    typeof partition === "number" &&
    typeof partitionCount === "number" &&
    partition >= partitionCount
  ) {
    problems.push(
      `MATCHING_PARTITION (--partition): got ${partition}; accepted: below MATCHING_PARTITION_COUNT (${partitionCount})`,
    );
  }
  // Every setting parsed, so the record now has exactly the Config shape.
  return problems.length === 0
    ? { ok: true, config: values as unknown as Config }
    : { ok: false, problems };
}

/**
 * The number that ends a host name such as `matchd-conductor-3` (a Kubernetes StatefulSet's
 * pod, or a name given per instance): the partition of MATCHING_PARTITION=ordinal.
 */
export function ordinalOf(hostname: string): string | undefined {
  return /-(\d{1,4})$/.exec(hostname)?.[1]?.replace(/^0+(?=\d)/, "");
}

/**
 * MATCHING_* variables in the environment that are no setting (MATCHING_REPLICA_URL, which
 * `matchd stack up` writes for the tests, aside): most likely misspelt settings, whose
 * defaults then apply without a word. Reported as warnings; they start nothing different.
 */
export function unknownSettingNames(env: Readonly<Record<string, string | undefined>>): string[] {
  const known = new Set<string>([
    ...settings.map((setting) => setting.env),
    "MATCHING_REPLICA_URL",
  ]);
  return Object.keys(env)
    .filter((name) => name.startsWith("MATCHING_") && !known.has(name))
    .sort();
}

/** A rejected value as the problem list echoes it: a token is never shown, a URL's password hidden. */
function shown(key: keyof Config, raw: string | undefined): string {
  if (raw === undefined) return "undefined";
  if (key === "httpToken" || key === "sentinelPassword") return "(hidden)";
  return JSON.stringify(redactCredentials(raw));
}

/** A redacted view of the config for start-up logs and bench reports. */
export function describeConfig(config: Config): Record<string, unknown> {
  return {
    ...config,
    brokerUrl: redactUrl(config.brokerUrl),
    datastoreUrl: redactUrl(config.datastoreUrl),
    httpToken: config.httpToken === "" ? "(none)" : "***",
    sentinelPassword: config.sentinelPassword === "" ? "(none)" : "***",
  };
}
