/**
 * A market-data client: keeps one pair's book from `matchd feed` and proves it right. It
 * applies the snapshot, then each update whose prevSeq is the seq it holds; after every
 * message it computes the CRC32 checksum (Kraken's book format) and compares. A gap or a
 * mismatch resubscribes. It prints the top of the book as it changes, one line each.
 * Run: bun examples/feed-client.ts PAIR [ws://127.0.0.1:3040/ws] [--count N]
 */

const [pairText = "1", url = "ws://127.0.0.1:3040/ws"] = process.argv
  .slice(2)
  .filter((a) => !a.startsWith("--"));
const countFlag = process.argv.indexOf("--count");
const stopAfter = countFlag > 0 ? Number(process.argv[countFlag + 1]) : Number.POSITIVE_INFINITY;
const pairId = Number(pairText);

interface Level {
  price: string;
  volume: string;
  orders: number;
}

const book = { bids: new Map<string, Level>(), asks: new Map<string, Level>(), seq: -1 };

const table = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(text: string): number {
  let c = 0xffffffff;
  for (let i = 0; i < text.length; i++) c = table[(c ^ text.charCodeAt(i)) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A side best first: bids high to low, asks low to high. */
function sorted(side: Map<string, Level>, descending: boolean): Level[] {
  return [...side.values()].sort(
    (a, b) => (descending ? -1 : 1) * (Number(a.price) - Number(b.price)),
  );
}

/** Top 10 asks then top 10 bids, each price then volume without "." and leading zeros. */
function checksum(): number {
  const field = (text: string) => text.replace(".", "").replace(/^0+/, "");
  const levels = [
    ...sorted(book.asks, false).slice(0, 10),
    ...sorted(book.bids, true).slice(0, 10),
  ];
  return crc32(levels.map((l) => field(l.price) + field(l.volume)).join(""));
}

function apply(side: Map<string, Level>, levels: Level[]): void {
  for (const level of levels) {
    if (level.volume === "0") side.delete(level.price);
    else side.set(level.price, level);
  }
}

const ws = new WebSocket(url);
const subscribe = () =>
  ws.send(JSON.stringify({ op: "subscribe", channel: "book", pairId, depth: 25 }));
let verified = 0;
ws.onopen = subscribe;
ws.onmessage = (event) => {
  const m = JSON.parse(String(event.data));
  if (m.type === "error") throw new Error(m.error);
  if (m.channel !== "book" || (m.type !== "snapshot" && m.type !== "update")) return;
  if (m.type === "snapshot") {
    book.bids = new Map(m.bids.map((l: Level) => [l.price, l]));
    book.asks = new Map(m.asks.map((l: Level) => [l.price, l]));
  } else if (m.prevSeq !== book.seq) {
    console.log(`gap: expected prevSeq ${book.seq}, got ${m.prevSeq}; resubscribing`);
    return subscribe();
  } else {
    apply(book.bids, m.bids);
    apply(book.asks, m.asks);
  }
  book.seq = m.seq;
  if (checksum() !== m.checksum) {
    console.log(`checksum mismatch at seq ${m.seq}; resubscribing`);
    return subscribe();
  }
  verified++;
  const bid = sorted(book.bids, true)[0];
  const ask = sorted(book.asks, false)[0];
  console.log(
    `seq ${m.seq} verified: bid ${bid ? `${bid.volume} @ ${bid.price}` : "-"}, ask ${ask ? `${ask.volume} @ ${ask.price}` : "-"}`,
  );
  if (verified >= stopAfter) ws.close();
};
ws.onclose = () => process.exit(0);
