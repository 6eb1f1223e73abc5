/**
 * The bench's help text: its boundaries and flags from the registry, then the settings it
 * reads from the service's one schema.
 */
import { configUsageFor } from "../src/cli/usage";
import { boundaryHelp, flagHelp } from "./registry";

export const benchUsage = (): string => `usage: matchd bench <boundary> [flags]

boundaries:
${boundaryHelp()}

flags:
${flagHelp()}

With no datastore and broker URL given (MATCHING_DATASTORE_URL / --datastore-url and
MATCHING_BROKER_URL / --broker-url), the bench starts its own private stack and services
and tears them down at the end; a stack already running in --dir is used and left running.

${configUsageFor("bench")}`;
