/**
 * Help texts of the client commands, with the defaults their schemas apply.
 */
import { clientSettingsRead } from "../../config/flag-scope";
import { settingsUsage } from "../usage";
import { eventsIdleMs } from "./events";
import {
  defaultConductorUrl,
  defaultFeedUrl,
  defaultPrecisions,
  defaultTimeoutMs,
  defaultUser,
} from "./options";

const { priceDecimals, amountDecimals, quoteDecimals } = defaultPrecisions;

const rpcFlags = `  --user U             the order's user id [default ${defaultUser}]
  --no-wait            print the command id once the broker confirmed it, without waiting
  --timeout-ms T       how long to wait for the durable result [default ${defaultTimeoutMs}]
  --json               print the result as JSON`;

export const clientUsage: Record<string, string> = {
  order: `usage: matchd order place --pair P --side bid|ask --price X --volume V [flags]
       matchd order cancel ORDER_ID --pair P [--user U]
       matchd order amend --id ORDER_ID --pair P [--volume V] [--price X] [--stop-price S]
       matchd order cancel-all --user U [--pair P]
       matchd order oco --pair P --side S --volume V --price X --stop-price S [flags]

Sends the command to matching:commands.p<pairId mod partition count> as RPC (replyTo) and
prints its durable result: the conductor replies once the commit is fsynced as its durability
policy promises. Exit 0 accepted, 6 rejected (the line names the result code and reason),
1 when the broker or a conductor is not there, 5 when the broker refuses user or vhost.

place flags:
  --pair P             the pair id (a positive integer)
  --side S             bid | ask
  --type T             limit | market | stop-limit | stop-market [default limit]
  --price X            limit price (required for limit and stop-limit)
  --stop-price S       the trade price that triggers a stop-limit or stop-market order
  --volume V           base volume (a market bid may give --quote-volume instead)
  --quote-volume Q     a market (or stop-market) bid's quote budget
  --tif T              gtc | ioc | fok | gtd [default gtc for limit; market orders never rest]
  --expire-at T        a gtd order's expiry: epoch ms, ISO-8601 or +N(ms|s|m|h|d) from now
  --display-volume D   an iceberg: show D of the volume at a time (a GTC or GTD limit order)
  --post-only          refuse to take liquidity
  --stp M              none | cancel-taker | cancel-maker | cancel-both [default none]
  --id ID              the order id [default a new UUID]
  --price-decimals N   the pair's price precision [default ${priceDecimals}]
  --amount-decimals N  the pair's volume precision [default ${amountDecimals}]
  --quote-decimals N   the pair's quote precision [default ${quoteDecimals}]
${rpcFlags}

cancel flags:
  --pair P             the order's pair
${rpcFlags}

amend flags (at least one of --volume, --price, --stop-price; docs/orders.md):
  --id ID              the order to amend, resting or a stop
  --pair P             the order's pair
  --volume V           the new total volume, executed part included
  --price X            the new limit price
  --stop-price S       a stop's new stop price
${rpcFlags}

oco flags (a take-profit limit at --price and a stop at --stop-price, one cancels the other):
  --stop-limit-price L the stop's limit price: a stop-limit [default a stop-market]
  --list-id ID         the list id; the legs are ID-tp and ID-sl [default a new UUID]
  --expire-at T        both legs good till T, as for place

cancel-all flags:
  --user U             whose orders and stops to cancel (required)
  --pair P             only this pair's [default every pair of partition --partition]
  --partition N        without --pair: the partition (MATCHING_PARTITION) [default 0]
${rpcFlags.split("\n").slice(1).join("\n")}

The precisions are the bench's; every order of a pair must use the same ones.

${settingsUsage((flag) => clientSettingsRead["order place"]!.includes(flag), "client")}`,
  session: `usage: matchd session cancel-after --user U --timeout T [--pair P]

Arms (or renews) the user's dead-man's switch on one partition: unless another one comes
within the timeout, every order and stop of the user on the partition's pairs is cancelled.
--timeout 0 disarms it. Prints the durable result: triggerAt is the deadline (epoch ms).

flags:
  --user U             whose switch (required)
  --timeout T          0 (disarm), or 1s..24h as e.g. 1500ms, 60s, 5m, 1h (required)
  --pair P             a pair of the partition to send it to [default --partition's]
  --partition N        without --pair: the partition (MATCHING_PARTITION) [default 0]
${rpcFlags.split("\n").slice(1).join("\n")}

${settingsUsage((flag) => clientSettingsRead["session cancel-after"]!.includes(flag), "client")}`,
  pair: `usage: matchd pair halt --pair P --reason TEXT [--no-wait] [--json]
       matchd pair resume --pair P --reason TEXT [--no-wait] [--json]

Halts or resumes a pair: a halted pair refuses places and amends (cancels still work). The
command is published with the AMQP user-id of the broker URL's user, which the broker checks;
the conductor executes it only when that user is in its MATCHING_OPERATOR_USERS, and answers
not-authorised (308) otherwise. Exit codes as for matchd order.
  --pair P             the pair
  --reason TEXT        why, 1..200 characters (in the pair.halted.v1 or pair.resumed.v1 event)
  --no-wait            print the command id once the broker confirmed it, without waiting
  --timeout-ms T       how long to wait for the durable result [default ${defaultTimeoutMs}]
  --json               print the result as JSON

${settingsUsage((flag) => clientSettingsRead["pair halt"]!.includes(flag), "client")}`,
  book: `usage: matchd book PAIR [--depth N] [--json] [--conductor-url URL]

Prints the pair's aggregated depth as a ladder: asks above the spread, bids below it.
  --depth N            price levels a side, 1..1000 [default 10]
  --conductor-url URL  the conductor's HTTP [default ${defaultConductorUrl}]
  --json               print the conductor's answer as JSON
`,
  watch: `usage: matchd watch PAIR [--depth N] [--once] [--feed-url URL]

Draws the pair's live ladder and its last trades from a running feed (matchd feed), redrawn
at every update; each update's checksum is checked, and a gap or a mismatch resubscribes.
  --depth N            price levels a side, 1..100 [default 10]
  --once               print the ladder once and end (for scripts)
  --feed-url URL       the feed's HTTP [default ${defaultFeedUrl}]
`,
  result: `usage: matchd result COMMAND_ID [--json] [--conductor-url URL]

Prints a command's stored result (shown only once it is durable), e.g. after --no-wait.
A conductor with MATCHING_HTTP_TOKEN set answers only with its token.
  --conductor-url URL  the conductor's HTTP [default ${defaultConductorUrl}]
  --json               print the result as JSON

${settingsUsage((flag) => clientSettingsRead.result!.includes(flag), "client")}`,
  events: `usage: matchd events [--follow] [--pair P] [--json]

Binds an exclusive queue of its own to every event exchange and prints each event as one
line: stream offset, type, pair, order ids, price and volume. Only events published while it
runs are seen. Without --follow it ends after ${eventsIdleMs / 1000} s with no new event.
  --follow             keep printing until Ctrl-C
  --pair P             only this pair's events
  --json               print the event envelopes

${settingsUsage((flag) => clientSettingsRead.events!.includes(flag), "client")}`,
};
