/**
 * The feed's live page, served from the binary at `/`: a pair's ladder with depth bars, the
 * last trades, the sequence number, the checksum check and the connection state, in plain
 * HTML and JavaScript that speak the feed's own WebSocket protocol (no build step, no assets).
 */

export const livePage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>matchd feed</title>
<style>
  body { font: 14px/1.4 ui-monospace, monospace; margin: 1.5em; color: #222; }
  h1 { font-size: 1.2em; margin: 0 0 .5em; }
  .row { display: flex; gap: 2em; align-items: flex-start; }
  table { border-collapse: collapse; min-width: 22em; }
  td, th { padding: 1px 8px; text-align: right; position: relative; }
  th { border-bottom: 1px solid #999; }
  .bar { position: absolute; top: 1px; bottom: 1px; right: 0; opacity: .25; z-index: -1; }
  .ask .bar { background: #d33; } .bid .bar { background: #2a2; }
  .ask td.price { color: #b11; } .bid td.price { color: #181; }
  #status span { margin-right: 1.5em; }
  .bad { color: #b11; font-weight: bold; } .good { color: #181; }
</style>
</head>
<body>
<h1>matchd market data</h1>
<p>pair <input id="pair" value="1" size="4"> depth <select id="depth"><option>10</option><option>25</option><option>100</option></select>
<button id="go">watch</button></p>
<p id="status"><span id="conn">connecting</span><span id="seq">seq -</span><span id="check">checksum -</span><span id="halt"></span></p>
<div class="row">
  <table id="ladder"><thead><tr><th>price</th><th>volume</th><th>orders</th></tr></thead><tbody></tbody></table>
  <table id="trades"><thead><tr><th>seq</th><th>price</th><th>volume</th><th>taker</th></tr></thead><tbody></tbody></table>
</div>
<script>
"use strict";
const state = { bids: new Map(), asks: new Map(), seq: null, trades: [], pair: 1, depth: 10, ws: null };
const crcTable = new Uint32Array(256).map((_, n) => { let c = n; for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1; return c >>> 0; });
function crc32(text) { let c = 0xffffffff; for (let i = 0; i < text.length; i++) c = crcTable[(c ^ text.charCodeAt(i)) & 0xff] ^ (c >>> 8); return (c ^ 0xffffffff) >>> 0; }
const field = (t) => t.replace(".", "").replace(/^0+/, "");
const sorted = (side) => [...side.values()].sort((a, b) => (side === state.bids ? -1 : 1) * (Number(a.price) - Number(b.price)));
function checksum() {
  let text = "";
  for (const l of sorted(state.asks).slice(0, 10)) text += field(l.price) + field(l.volume);
  for (const l of sorted(state.bids).slice(0, 10)) text += field(l.price) + field(l.volume);
  return crc32(text);
}
function applyLevels(side, levels) {
  for (const l of levels) { if (l.volume === "0") side.delete(l.price); else side.set(l.price, l); }
}
function setText(id, text, cls) { const el = document.getElementById(id); el.textContent = text; el.className = cls || ""; }
function verify(expected) {
  const ok = checksum() === expected;
  setText("check", ok ? "checksum ok" : "checksum MISMATCH", ok ? "good" : "bad");
  if (!ok) resubscribe();
}
function draw() {
  const asks = sorted(state.asks).slice(0, state.depth).reverse();
  const bids = sorted(state.bids).slice(0, state.depth);
  const max = Math.max(1, ...asks.concat(bids).map((l) => Number(l.volume)));
  const row = (l, cls) => '<tr class="' + cls + '"><td class="price">' + l.price + '</td><td>' + l.volume +
    '<div class="bar" style="width:' + (100 * Number(l.volume) / max).toFixed(1) + '%"></div></td><td>' + l.orders + '</td></tr>';
  document.querySelector("#ladder tbody").innerHTML = asks.map((l) => row(l, "ask")).join("") + bids.map((l) => row(l, "bid")).join("");
  document.querySelector("#trades tbody").innerHTML = state.trades.slice(-20).reverse().map((t) =>
    "<tr><td>" + t.seq + "</td><td>" + t.price + "</td><td>" + t.volume + "</td><td>" + t.takerSide + "</td></tr>").join("");
  setText("seq", "seq " + state.seq);
}
function onMessage(m) {
  if (m.channel === "book" && m.type === "snapshot") {
    state.bids = new Map(m.bids.map((l) => [l.price, l])); state.asks = new Map(m.asks.map((l) => [l.price, l]));
    state.seq = m.seq; setText("halt", m.halted ? "HALTED: " + m.haltReason : "", "bad"); verify(m.checksum);
  } else if (m.channel === "book" && m.type === "update") {
    if (m.prevSeq !== state.seq) { setText("check", "gap: resubscribing", "bad"); return resubscribe(); }
    applyLevels(state.bids, m.bids); applyLevels(state.asks, m.asks); state.seq = m.seq;
    if (m.halted !== undefined) setText("halt", m.halted ? "HALTED" : "", "bad");
    verify(m.checksum);
  } else if (m.channel === "trades") {
    state.trades.push(...m.trades); state.trades = state.trades.slice(-100);
  } else if (m.type === "error") { setText("conn", "error: " + m.error, "bad"); }
  draw();
}
function subscribe() {
  state.ws.send(JSON.stringify({ op: "subscribe", channel: "book", pairId: state.pair, depth: state.depth }));
  state.ws.send(JSON.stringify({ op: "subscribe", channel: "trades", pairId: state.pair }));
}
function resubscribe() { state.seq = null; subscribe(); }
function connect() {
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  state.ws = ws;
  ws.onopen = () => { setText("conn", "connected", "good"); subscribe(); };
  ws.onmessage = (e) => onMessage(JSON.parse(e.data));
  ws.onclose = (e) => { setText("conn", "disconnected (" + (e.reason || e.code) + "); reconnecting", "bad"); setTimeout(connect, 1000); };
}
document.getElementById("go").onclick = () => {
  state.ws.send(JSON.stringify({ op: "unsubscribe", channel: "book", pairId: state.pair }));
  state.ws.send(JSON.stringify({ op: "unsubscribe", channel: "trades", pairId: state.pair }));
  state.pair = Number(document.getElementById("pair").value); state.depth = Number(document.getElementById("depth").value);
  state.trades = []; resubscribe();
};
const params = new URLSearchParams(location.search);
if (params.get("pair")) { state.pair = Number(params.get("pair")); document.getElementById("pair").value = params.get("pair"); }
connect();
</script>
</body>
</html>
`;
