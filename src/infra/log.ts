/**
 * Structured JSON logs on stderr, one object per line, with fixed context fields
 * (service, partition) so every line can be correlated.
 */
import type { LogLevel } from "../config/schema";

const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export function createLogger(
  level: LogLevel,
  context: Record<string, unknown> = {},
  write: (line: string) => void = (line) => process.stderr.write(line + "\n"),
): Logger {
  const threshold = rank[level];
  const emit = (at: LogLevel, message: string, fields?: Record<string, unknown>) => {
    if (rank[at] < threshold) return;
    write(
      JSON.stringify(
        { time: new Date().toISOString(), level: at, message, ...context, ...fields },
        errorReplacer,
      ),
    );
  };
  return {
    debug: (message, fields) => emit("debug", message, fields),
    info: (message, fields) => emit("info", message, fields),
    warn: (message, fields) => emit("warn", message, fields),
    error: (message, fields) => emit("error", message, fields),
  };
}

// Errors serialise to {} by default; keep their message, code and stack.
function errorReplacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) {
    const code = (value as Error & { code?: unknown }).code;
    return { name: value.name, message: value.message, code, stack: value.stack };
  }
  return value;
}
