/**
 * Opens AMQP connections with a bounded connect timeout, a connection name that shows up
 * in the broker's connection list, and socket writes coalesced per event-loop turn; a
 * refused login or vhost is told apart from an unreachable broker.
 */
import amqp, { type ChannelModel } from "amqplib";
import { withinMs } from "../within";
import { BrokerRefusedError, brokerRefusal } from "./broker-errors";
import { connectToFirstAnswering } from "./broker-urls";

/**
 * Connects to the first node of `urls` (one AMQP URL, or a cluster's, comma-separated) that
 * answers. Throws BrokerRefusedError when the broker refuses the user or the vhost.
 */
export async function connectBroker(urls: string, name: string): Promise<ChannelModel> {
  const connection = await connectToFirstAnswering(
    urls,
    async (url) => {
      try {
        return await connectWithin(url, name, connectTimeoutMs);
      } catch (error) {
        throw brokerRefusal(error, url) ?? error;
      }
    },
    (error) => error instanceof BrokerRefusedError && error.refused === "credentials",
  );
  coalesceSocketWrites(connection);
  return connection;
}

/** The bound on one node's connect and handshake. */
const connectTimeoutMs = 5000;

/**
 * amqplib's `timeout` bounds the TCP connect only: a node dying under the connect can take
 * the socket and never answer the handshake (seen: a bench client stuck for a minute after a
 * cluster node's SIGKILL). A connection that opens after the bound is closed.
 */
async function connectWithin(url: string, name: string, timeoutMs: number): Promise<ChannelModel> {
  const connecting = amqp.connect(url, {
    timeout: timeoutMs,
    clientProperties: { connection_name: name },
  });
  const opened = await withinMs(connecting, timeoutMs);
  if (opened === undefined) {
    void connecting.then((late) => late.close()).catch(() => undefined);
    throw new Error(`no AMQP handshake within ${timeoutMs} ms`);
  }
  return opened;
}

/** The part of amqplib 0.10's internals that coalesceSocketWrites relies on. */
interface MuxInternals {
  out: { write(chunk: Buffer): boolean; writableNeedDrain?: boolean };
}

// Flush a coalesced write once this many bytes are waiting, to keep backpressure honest.
const coalesceFlushBytes = 64 * 1024;

/**
 * amqplib writes every frame group (one per publish) to the socket separately, and under
 * Bun each socket write costs several microseconds. This puts a small buffer between
 * amqplib's multiplexer and the socket: the writes of one event-loop turn go out as one
 * write. Frames stay whole and in order; backpressure is passed through because a
 * full buffer is flushed synchronously and the socket's own answer returned. If the
 * internals differ (another amqplib version), nothing is changed.
 */
function coalesceSocketWrites(model: ChannelModel): void {
  const muxer = (model as unknown as { connection?: { muxer?: MuxInternals } }).connection?.muxer;
  const socket = muxer?.out;
  if (!muxer || !socket || typeof socket.write !== "function") return;
  let chunks: Buffer[] = [];
  let bytes = 0;
  let scheduled = false;
  const flush = (): boolean => {
    scheduled = false;
    if (chunks.length === 0) return true;
    const data = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes);
    chunks = [];
    bytes = 0;
    return socket.write(data);
  };
  muxer.out = {
    write(chunk: Buffer): boolean {
      chunks.push(chunk);
      bytes += chunk.length;
      if (bytes >= coalesceFlushBytes) return flush();
      if (!scheduled) {
        scheduled = true;
        queueMicrotask(flush);
      }
      return true;
    },
  };
}

/** Tries a vhost refusal gets before it ends a service's boot, a second apart. */
export const vhostRefusalTries = 3;

/**
 * A service's boot-time look at the broker: the refusal that must end the boot, or null when
 * the broker let us in or could not be reached (the service retries that). Refused
 * credentials end it at once; a refused vhost only when it is refused again and again, since
 * a vhost that is down or at its connection limit is refused the same way.
 */
export async function brokerRefusalAtBoot(
  url: string,
  name: string,
  retryDelayMs = 1000,
): Promise<BrokerRefusedError | null> {
  for (let attempt = 1; ; attempt++) {
    try {
      const connection = await connectBroker(url, name);
      await connection.close().catch(() => undefined);
      return null;
    } catch (error) {
      if (!(error instanceof BrokerRefusedError)) return null;
      if (error.refused === "credentials" || attempt >= vhostRefusalTries) return error;
      await Bun.sleep(retryDelayMs);
    }
  }
}
