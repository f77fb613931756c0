// The bpecore playground: tokens, counts, split and chunk cuts of the text in the box, for one or
// several encodings side by side. Everything comes from this server's API:
//   GET /v1/encodings, WS /v1/stream (the count as you type: appended text is sent alone),
//   POST /v1/encode with offsets_range (only the tokens on screen), /v1/split and /v1/chunk.
// The API's offsets are code points; JavaScript strings index UTF-16 units: Text converts.
// Long texts stay responsive: the token view and the chunk list are virtualised (only the rows on
// screen are DOM nodes) and the HTTP work waits for a pause in typing.
"use strict";

const ROW_HEIGHT = 20; // px, .view .row and .chunks .row in playground.css
const OVERSCAN = 40; // rows fetched beyond those on screen, so short scrolls need no request
const PALETTE = 6; // token colour classes c0..c5

const $ = (selector, root = document) => root.querySelector(selector);

function escapeHtml(s) {
  return s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

// Control characters made visible in the token view (one UTF-16 unit each: offsets do not move).
function visible(s) {
  return s.replace(/[\n\t\r]/g, (c) => ({ "\n": "\u21b5", "\t": "\u2192", "\r": "\u240d" })[c]);
}

// Python's repr of a bytes object, from hex.
function bytesRepr(hex) {
  let out = "";
  for (let i = 0; i < hex.length; i += 2) {
    const b = parseInt(hex.slice(i, i + 2), 16);
    if (b === 0x5c) out += "\\\\";
    else if (b === 0x27) out += "\\'";
    else if (b === 0x0a) out += "\\n";
    else if (b === 0x09) out += "\\t";
    else if (b === 0x0d) out += "\\r";
    else if (b >= 0x20 && b < 0x7f) out += String.fromCharCode(b);
    else out += "\\x" + hex.slice(i, i + 2);
  }
  return "b'" + out + "'";
}

function debounce(fn, ms) {
  let timer = null;
  const call = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
  call.cancel = () => clearTimeout(timer);
  return call;
}

// Index of the first element of the sorted array `a` that is >= x.
function lowerBound(a, x) {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// A text and the map between UTF-16 indices (JavaScript) and code points (the API).
class Text {
  constructor(s) {
    this.s = s;
    this.pairs = null; // UTF-16 index of the high half of each surrogate pair, when there are any
    if (/[\ud800-\udbff][\udc00-\udfff]/.test(s)) {
      const pairs = [];
      const re = /[\ud800-\udbff][\udc00-\udfff]/g;
      for (let m = re.exec(s); m; m = re.exec(s)) pairs.push(m.index);
      this.pairs = Int32Array.from(pairs);
    }
    this.length = s.length - (this.pairs ? this.pairs.length : 0); // in code points
    this.quoted = null;
  }

  // The text as a JSON string, made once: every request about this text sends it.
  get json() {
    if (this.quoted === null) this.quoted = JSON.stringify(this.s);
    return this.quoted;
  }

  // A request body: {text, ...fields}, the text quoted once however many requests send it.
  body(fields) {
    return `{"text":${this.json},${JSON.stringify(fields).slice(1)}`;
  }

  // Code points before UTF-16 index u (u at a character boundary).
  pointOf(u) {
    return this.pairs ? u - lowerBound(this.pairs, u - 1) : u;
  }

  // UTF-16 index of code point p.
  unitOf(p) {
    if (!this.pairs) return p;
    // the k-th pair (0-based) starts at code point pairs[k] - k
    let lo = 0;
    let hi = this.pairs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.pairs[mid] - mid < p) lo = mid + 1;
      else hi = mid;
    }
    return p + lo;
  }
}

// GET path, or POST a JSON body (a string) to it; the answer, or an Error with the API's message.
async function api(path, body, signal) {
  const r = await fetch(path, {
    method: body === undefined ? "GET" : "POST",
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body,
    signal,
  });
  const answer = await r.json().catch(() => null);
  if (!r.ok) {
    const message = answer && answer.error ? answer.error.message : r.statusText;
    const err = new Error(`${r.status}: ${message}`);
    err.status = r.status;
    throw err;
  }
  return answer;
}

// The exact count of the box's text over WS /v1/stream. Text appended to what was sent is sent
// alone (the stream counts everything pushed so far); any other edit starts a new stream.
class CountStream {
  constructor(encoding, onCount, onError) {
    this.encoding = encoding;
    this.onCount = onCount;
    this.onError = onError;
    this.ws = null;
    this.sent = ""; // the text the stream has been given so far
    this.waiting = []; // lengths of the text each unanswered frame completes
    this.buffer = []; // frames written before the socket opened
  }

  update(text) {
    if (this.ws && this.ws.readyState <= WebSocket.OPEN && text.startsWith(this.sent)) {
      if (text.length > this.sent.length) this.push(text.slice(this.sent.length), text);
      return;
    }
    this.open();
    if (text) this.push(text, text);
    else this.onCount(0, 0, 0, true);
  }

  open() {
    this.close();
    const url = new URL(`v1/stream?encoding=${encodeURIComponent(this.encoding)}`, location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(url);
    this.ws = ws;
    this.sent = "";
    this.waiting = [];
    this.buffer = [];
    ws.onopen = () => {
      for (const frame of this.buffer) ws.send(frame);
      this.buffer = [];
    };
    ws.onmessage = (ev) => {
      const m = JSON.parse(ev.data);
      if (m.error) return this.onError(m.error.message);
      const length = this.waiting.shift();
      this.onCount(m.count, m.bytes, length, this.waiting.length === 0);
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null; // the next update starts a new stream
      if (ev.code !== 1000) this.onError(`count stream closed (${ev.code}${ev.reason ? ": " + ev.reason : ""})`);
    };
  }

  push(frame, text) {
    this.sent = text;
    this.waiting.push(text.length);
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(frame);
    else this.buffer.push(frame);
  }

  close() {
    if (!this.ws) return;
    const ws = this.ws;
    this.ws = null;
    ws.onmessage = ws.onclose = ws.onopen = null;
    if (ws.readyState === WebSocket.CONNECTING) ws.onopen = () => ws.close(1000);
    else ws.close(1000);
  }
}

// A virtualised list of fixed-height rows: only those on screen (and a few around) are DOM nodes.
class VirtualRows {
  constructor(scroller, renderRows) {
    this.scroller = scroller;
    this.spacer = $(".spacer", scroller);
    this.rowsEl = $(".rows", scroller);
    this.renderRows = renderRows; // (first, end) -> HTML of rows first..end-1
    this.count = 0;
    this.range = [0, 0];
    scroller.addEventListener("scroll", () => this.render(), { passive: true });
  }

  setCount(n) {
    this.count = n;
    this.spacer.style.height = `${n * ROW_HEIGHT}px`;
  }

  visible() {
    const top = this.scroller.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - 4);
    const end = Math.min(this.count, Math.ceil((top + this.scroller.clientHeight) / ROW_HEIGHT) + 4);
    return [first, Math.max(first, end)];
  }

  render() {
    const [first, end] = this.visible();
    this.range = [first, end];
    this.rowsEl.style.transform = `translateY(${first * ROW_HEIGHT}px)`;
    this.rowsEl.innerHTML = this.renderRows(first, end);
  }

  scrollToRow(row) {
    this.scroller.scrollTop = Math.max(0, row * ROW_HEIGHT - this.scroller.clientHeight / 3);
    this.render();
  }
}

// One encoding's column: count, split cut, token view, chunks.
class Column {
  constructor(info, app) {
    this.app = app;
    this.name = info.name;
    this.el = document.importNode($("#column-template").content, true).firstElementChild;
    this.el.dataset.encoding = info.name;
    $(".name", this.el).textContent = info.name;
    $(".name", this.el).title = `${info.n_vocab.toLocaleString()} ids`;
    this.countEl = $(".count-value", this.el);
    this.stateEl = $(".count-state", this.el);
    this.sizeEl = $(".size", this.el);
    this.splitEl = $(".split-info", this.el);
    this.chunksInfo = $(".chunks-info", this.el);
    this.errorEl = $(".error", this.el);
    this.text = new Text("");
    this.rowStarts = new Int32Array([0]); // UTF-16 index where each row of the token view starts
    this.window = null; // tokens with offsets for a range of the text
    this.cuts = []; // [{at (UTF-16), kind, label}] sorted by at
    this.split = null;
    this.chunks = [];
    this.requests = {}; // kind -> AbortController of the request in flight
    this.stream = new CountStream(
      info.name,
      (count, bytes, length, settled) => this.showCount(count, bytes, length, settled),
      (message) => this.showError(message),
    );
    this.view = new VirtualRows($(".view", this.el), (a, b) => this.tokenRows(a, b));
    this.chunkList = new VirtualRows($(".chunks", this.el), (a, b) => this.chunkRows(a, b));
    this.fetchWindow = debounce(() => this.loadWindow(), 60);
    $(".view", this.el).addEventListener("scroll", () => this.fetchWindowIfNeeded(), { passive: true });
    $(".chunks", this.el).addEventListener("click", (ev) => {
      const row = ev.target.closest("[data-chunk]");
      if (row) this.reveal(this.chunks[+row.dataset.chunk].start);
    });
    this.splitEl.addEventListener("click", () => this.split && this.reveal(this.split.offset));
  }

  showCount(count, bytes, length, settled) {
    const exact = settled && length === this.app.text.length;
    this.countEl.textContent = count.toLocaleString("en");
    this.countEl.dataset.count = count;
    this.countEl.dataset.chars = length;
    this.countEl.dataset.state = exact ? "exact" : "counting";
    this.stateEl.textContent = exact ? "" : "counting\u2026";
    this.sizeEl.textContent = ` \u00b7 ${bytes.toLocaleString("en")} bytes`;
  }

  showError(message) {
    this.errorEl.hidden = !message;
    this.errorEl.textContent = message || "";
  }

  // The text changed: the count at once, the rest after a pause in typing (App.settle).
  typed(text) {
    this.countEl.dataset.state = "counting";
    this.stream.update(text);
  }

  settle(textObj) {
    this.text = textObj;
    this.window = null;
    this.split = null;
    this.chunks = [];
    this.cuts = [];
    this.cutAt = null;
    delete this.splitEl.dataset.offset;
    this.chunksInfo.dataset.count = "";
    this.layout();
    this.loadWindow();
    this.loadCuts();
  }

  // Rows of the token view: the text's lines, wrapped at the width of the view.
  layout() {
    const view = $(".view", this.el);
    // a few columns to spare for the cut marks drawn between characters
    const cols = Math.max(16, Math.floor((view.clientWidth - 16) / this.app.charWidth) - 4);
    const s = this.text.s;
    const starts = [0];
    let i = 0;
    while (i < s.length) {
      const nl = s.indexOf("\n", i);
      const lineEnd = nl === -1 ? s.length : nl + 1;
      let j = i;
      while (lineEnd - j > cols) {
        let k = j + cols;
        const c = s.charCodeAt(k);
        if (c >= 0xdc00 && c <= 0xdfff) k -= 1; // never between the halves of a pair
        starts.push(k);
        j = k;
      }
      if (lineEnd < s.length) starts.push(lineEnd);
      i = lineEnd;
    }
    this.rowStarts = Int32Array.from(starts);
    this.view.setCount(s.length ? starts.length : 0);
    this.view.render();
  }

  rowEnd(r) {
    return r + 1 < this.rowStarts.length ? this.rowStarts[r + 1] : this.text.s.length;
  }

  fetchWindowIfNeeded() {
    const [first, end] = this.view.range;
    if (end <= first) return;
    const a = this.rowStarts[first];
    const b = this.rowEnd(end - 1);
    const w = this.window;
    if (!w || w.text !== this.text || a < w.a || b > w.b) this.fetchWindow();
  }

  async loadWindow() {
    const text = this.text;
    if (!text.s) return this.view.render();
    const [first, end] = this.view.visible();
    const r0 = Math.max(0, first - OVERSCAN);
    const r1 = Math.min(this.view.count, end + OVERSCAN);
    const a = this.rowStarts[r0];
    const b = this.rowEnd(r1 - 1);
    const answer = await this.request("window", "v1/encode", text.body({
      encoding: this.name,
      disallowed_special: [],
      return_offsets: true,
      return_bytes: true,
      offsets_range: [text.pointOf(a), text.pointOf(b)],
    }));
    if (!answer || text !== this.text) return;
    const n = answer.offsets.length;
    const w = { text, a, b, first: answer.offsets_first, start: new Int32Array(n), end: new Int32Array(n) };
    w.ids = answer.offsets.map((o) => o.id);
    w.bytes = answer.offsets.map((o) => o.bytes);
    answer.offsets.forEach((o, k) => {
      w.start[k] = text.unitOf(o.start);
      w.end[k] = text.unitOf(o.end);
    });
    this.window = w;
    this.view.render();
  }

  async loadCuts() {
    const text = this.text;
    const app = this.app;
    if (!text.s) return this.showCuts(text, null, null);
    const split = this.request(
      "split", "v1/split", text.body({ encoding: this.name, max_tokens: app.splitN, keep: app.keep }),
    );
    const chunks = this.request(
      "chunk", "v1/chunk",
      text.body({ encoding: this.name, max_tokens: app.maxTokens, overlap: app.overlap }),
    );
    const [sp, ch] = [await split, await chunks];
    if (text === this.text) this.showCuts(text, sp, ch);
  }

  showCuts(text, sp, ch) {
    const app = this.app;
    this.cuts = [];
    if (sp) {
      this.split = { ...sp, n: app.splitN, keep: app.keep, at: text.unitOf(sp.offset) };
      const call = sp.start === 0 ? "split_at" : "split_at_end";
      this.splitEl.innerHTML =
        `<span class="cut-key split"></span><code>${call}(text, ${app.splitN}) = ${sp.offset}</code>: ` +
        `keeps ${(sp.end - sp.start).toLocaleString("en")} chars, ${sp.count} tokens`;
      this.splitEl.dataset.offset = sp.offset;
      this.splitEl.dataset.count = sp.count;
      this.cuts.push({ at: this.split.at, kind: "split", label: `${call}(text, ${app.splitN}) = ${sp.offset}` });
    } else {
      this.splitEl.textContent = "";
    }
    this.chunks = ch ? ch.chunks : [];
    this.chunksInfo.innerHTML = ch
      ? `<span class="cut-key chunk"></span>${ch.count.toLocaleString("en")} ` +
        `chunk${ch.count === 1 ? "" : "s"} of at most ` +
        `${app.maxTokens} tokens, overlap ${app.overlap}`
      : "";
    this.chunksInfo.dataset.count = ch ? ch.count : "";
    this.chunks.forEach((c, i) => {
      c.a = text.unitOf(c.start);
      c.b = text.unitOf(c.end);
      this.cuts.push({ at: c.a, kind: "chunk-start", label: `chunk ${i} starts at ${c.start}` });
      this.cuts.push({ at: c.b, kind: "chunk-end", label: `chunk ${i} ends at ${c.end} (${c.tokens} tokens)` });
    });
    this.cuts.sort((x, y) => x.at - y.at || (x.kind === "chunk-end" ? -1 : 1));
    this.cutAt = Int32Array.from(this.cuts.map((c) => c.at));
    this.chunkList.setCount(this.chunks.length);
    this.chunkList.render();
    this.view.render();
  }

  async request(kind, path, body) {
    if (this.requests[kind]) this.requests[kind].abort();
    const ctl = new AbortController();
    this.requests[kind] = ctl;
    try {
      const answer = await api(path, body, ctl.signal);
      this.showError("");
      return answer;
    } catch (e) {
      if (e.name !== "AbortError") this.showError(`${path}: ${e.message}`);
      return null;
    } finally {
      if (this.requests[kind] === ctl) delete this.requests[kind];
    }
  }

  reveal(at) {
    const row = Math.max(0, lowerBound(this.rowStarts, this.text.unitOf(at) + 1) - 1);
    this.view.scrollToRow(row);
    this.fetchWindowIfNeeded();
  }

  // HTML of token-view rows first..end-1: one span per token piece, cut marks between.
  tokenRows(first, end) {
    const s = this.text.s;
    const w = this.window && this.window.text === this.text ? this.window : null;
    const cuts = this.cuts;
    let html = "";
    for (let r = first; r < end; r++) {
      const rs = this.rowStarts[r];
      const re = this.rowEnd(r);
      const last = r === this.rowStarts.length - 1;
      let c = this.cutAt ? lowerBound(this.cutAt, rs) : 0;
      const marks = (upTo, inclusive) => {
        let out = "";
        while (c < cuts.length && (cuts[c].at < upTo || (inclusive && cuts[c].at === upTo))) {
          out += `<i class="cut ${cuts[c].kind}" title="${escapeHtml(cuts[c].label)}"></i>`;
          c++;
        }
        return out;
      };
      html += '<div class="row">';
      if (!w || rs < w.a || re > w.b) {
        html += `<span class="plain">${escapeHtml(visible(s.slice(rs, re)))}</span>`;
      } else {
        let k = Math.max(0, lowerBound(w.end, rs + 1));
        let pos = rs;
        for (; k < w.start.length && w.start[k] < re; k++) {
          const a = Math.max(w.start[k], pos);
          const b = Math.min(w.end[k], re);
          const cls = `t c${(w.first + k) % PALETTE}`;
          if (b <= a) {
            html += `<span class="${cls} part" data-k="${k}"></span>`; // shares a character
            continue;
          }
          html += marks(a, true) + `<span class="${cls}" data-k="${k}">`;
          let p = a;
          while (c < cuts.length && cuts[c].at < b) {
            const at = cuts[c].at;
            html += escapeHtml(visible(s.slice(p, at))) + marks(at, true);
            p = at;
          }
          html += escapeHtml(visible(s.slice(p, b))) + "</span>";
          pos = b;
        }
      }
      html += marks(re, last) + "</div>";
    }
    return html;
  }

  chunkRows(first, end) {
    let html = "";
    for (let i = first; i < end; i++) {
      const c = this.chunks[i];
      const preview = visible(c.text.slice(0, 160));
      html +=
        `<div class="row" data-chunk="${i}" data-start="${c.start}" data-end="${c.end}" data-tokens="${c.tokens}">` +
        `<b>${i}</b><span class="range">[${c.start}, ${c.end})</span><span class="tok">${c.tokens} tok</span>` +
        `<span class="preview">${escapeHtml(preview)}</span></div>`;
    }
    return html;
  }

  tip(k) {
    const w = this.window;
    const piece = this.text.s.slice(w.start[k], w.end[k]);
    return (
      `<b>token ${(w.first + k).toLocaleString("en")}</b> \u00b7 id <b>${w.ids[k]}</b><br>` +
      `<code>${escapeHtml(bytesRepr(w.bytes[k]))}</code><br><span class="dim">` +
      `chars [${this.text.pointOf(w.start[k])}, ${this.text.pointOf(w.end[k])}) ${escapeHtml(JSON.stringify(piece))}</span>`
    );
  }

  destroy() {
    this.stream.close();
    for (const ctl of Object.values(this.requests)) ctl.abort();
    this.el.remove();
  }
}

class App {
  constructor() {
    this.box = $("#text");
    this.status = $("#status");
    this.columnsEl = $("#columns");
    this.columns = new Map();
    this.text = "";
    this.textObj = new Text("");
    this.encodings = [];
    this.charWidth = this.measureCharWidth();
    this.readControls();
    this.settleTimer = null;
    this.box.addEventListener("input", () => this.onInput());
    for (const id of ["keep", "split-n", "max-tokens", "overlap"]) {
      $(`#${id}`).addEventListener("input", debounce(() => this.onControls(), 200));
    }
    const relayout = () => this.columns.forEach((c) => c.layout() || c.fetchWindowIfNeeded());
    window.addEventListener("resize", debounce(relayout, 150));
    this.installTip();
    this.loadEncodings();
  }

  measureCharWidth() {
    const probe = document.createElement("span");
    probe.className = "probe";
    probe.textContent = "x".repeat(100);
    document.body.appendChild(probe);
    const width = probe.getBoundingClientRect().width / 100 || 8;
    probe.remove();
    return width;
  }

  readControls() {
    const int = (id, min, fallback) => {
      const v = parseInt($(`#${id}`).value, 10);
      return Number.isFinite(v) && v >= min ? v : fallback;
    };
    this.keep = $("#keep").value;
    this.splitN = int("split-n", 0, 16);
    this.maxTokens = int("max-tokens", 1, 32);
    this.overlap = Math.min(int("overlap", 0, 0), this.maxTokens - 1);
  }

  async loadEncodings() {
    for (;;) {
      try {
        const answer = await api("v1/encodings");
        this.encodings = answer.data;
        break;
      } catch (e) {
        this.status.textContent = e.status === 503 ? "loading encodings\u2026" : `error: ${e.message}`;
        await new Promise((done) => setTimeout(done, 500));
      }
    }
    const box = $("#encodings");
    const wanted = new URLSearchParams(location.search).getAll("encoding");
    const seen = new Set();
    for (const info of this.encodings) {
      if (seen.has(info.name)) continue; // an alias listed under its encoding's name
      seen.add(info.name);
      const label = document.createElement("label");
      const input = document.createElement("input");
      input.type = "checkbox";
      input.value = info.name;
      input.checked = wanted.length ? wanted.includes(info.name) : info.default;
      input.addEventListener("change", () => this.syncColumns());
      label.append(input, ` ${info.name}`);
      box.appendChild(label);
    }
    this.status.textContent = "ready";
    this.status.dataset.ready = "1";
    this.syncColumns();
  }

  syncColumns() {
    const chosen = [...document.querySelectorAll("#encodings input:checked")].map((i) => i.value);
    for (const [name, column] of this.columns) {
      if (!chosen.includes(name)) {
        column.destroy();
        this.columns.delete(name);
      }
    }
    for (const name of chosen) {
      if (this.columns.has(name)) continue;
      const column = new Column(this.encodings.find((e) => e.name === name), this);
      this.columns.set(name, column);
      this.columnsEl.appendChild(column.el);
      column.typed(this.text);
    }
    // keep the page's order of checkboxes
    for (const name of chosen) this.columnsEl.appendChild(this.columns.get(name).el);
    this.columnsEl.style.setProperty("--columns", String(Math.max(1, chosen.length)));
    this.settle();
  }

  onInput() {
    this.text = this.box.value;
    for (const column of this.columns.values()) column.typed(this.text);
    // a large paste waits a little longer for the next keystroke before the HTTP work
    clearTimeout(this.settleTimer);
    this.settleTimer = setTimeout(() => this.settle(), this.text.length > 100000 ? 300 : 150);
  }

  settle() {
    this.textObj = new Text(this.text);
    for (const column of this.columns.values()) column.settle(this.textObj);
  }

  onControls() {
    this.readControls();
    for (const column of this.columns.values()) column.loadCuts();
  }

  installTip() {
    const tip = $("#tip");
    this.columnsEl.addEventListener("mouseover", (ev) => {
      const span = ev.target.closest(".t");
      const columnEl = ev.target.closest(".column");
      if (!span || !columnEl) return;
      const column = this.columns.get(columnEl.dataset.encoding);
      if (!column || !column.window) return;
      tip.innerHTML = column.tip(+span.dataset.k);
      tip.hidden = false;
      const r = span.getBoundingClientRect();
      tip.style.left = `${Math.min(r.left, window.innerWidth - tip.offsetWidth - 8) + window.scrollX}px`;
      tip.style.top = `${r.bottom + 6 + window.scrollY}px`;
      span.classList.add("hover");
    });
    this.columnsEl.addEventListener("mouseout", (ev) => {
      const span = ev.target.closest(".t");
      if (span) span.classList.remove("hover");
      tip.hidden = true;
    });
  }
}

window.playground = new App();
