// coxswain view: draws the facts `coxswain view` computed (embedded above as JSON). It applies
// no delivery rule: depths, claims, discards and the verdict all come from the core's replay.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("data").textContent);
  const ROWS = DATA.rows; // [seq, line, kind, turn, step, nt, ns, text, mark, ids]
  const PAGE = 200; // items per page
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  };

  // Items: a core record, or a run of consecutive host records folded into one line.
  const n = ROWS.length;
  const itemStart = new Int32Array(n);
  const itemEnd = new Int32Array(n);
  const rowItem = new Int32Array(n);
  let items = 0;
  for (let r = 0; r < n; ) {
    let end = r + 1;
    if (ROWS[r][2] === "h") while (end < n && ROWS[end][2] === "h") end++;
    itemStart[items] = r;
    itemEnd[items] = end;
    for (let k = r; k < end; k++) rowItem[k] = items;
    items++;
    r = end;
  }
  const pages = Math.max(1, Math.ceil(items / PAGE));
  const open = new Set(); // folded groups the reader opened (by first row)
  let page = 0;
  let hit = -1;

  // Message lives by id.
  const byId = new Map();
  DATA.lives.forEach((life, index) => {
    const list = byId.get(life.id);
    if (list) list.push(index);
    else byId.set(life.id, [index]);
  });

  function verdict() {
    const v = DATA.verdict;
    const box = $("verdict");
    box.textContent = "";
    box.className = "verdict " + (!v.ok ? "bad" : v.repair.length ? "repair" : "ok");
    box.appendChild(document.createTextNode("Auditor: " + v.text));
    for (const note of v.repair) box.appendChild(el("span", "note", "needs crash repair: " + note));
    if (v.line !== null) {
      const row = ROWS.findIndex((r) => r[1] === v.line);
      if (row >= 0) {
        const link = el("a", "jump", " go to line " + v.line);
        link.dataset.row = row;
        box.appendChild(link);
      }
    }
    const s = DATA.summary;
    const parts = [
      ["records", s.records], ["host", s.host], ["turns", s.turns], ["steps", s.steps],
      ["messages", s.messages], ["claimed", s.claimed], ["discarded", s.discarded],
      ["pending", s.pending], ["aborted", s.aborted], ["errors", s.errors],
      ["interrupted", s.interrupted],
    ];
    const summary = $("summary");
    parts.forEach(([label, value], i) => {
      if (i) summary.appendChild(document.createTextNode(" · "));
      summary.appendChild(el("b", "", String(value)));
      summary.appendChild(document.createTextNode(" " + label));
    });
  }

  function strip() {
    const canvas = $("strip");
    const o = DATA.overview;
    const buckets = o.turn.length;
    const width = Math.max(300, canvas.clientWidth || 1000);
    canvas.width = width;
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, width, 150);
    if (!buckets) return;
    const w = width / buckets;
    const color = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    const turnA = color("--turn-a"), turnB = color("--turn-b"), stepC = color("--step");
    const ntC = color("--nt"), nsC = color("--ns");
    let deepest = 1;
    for (let b = 0; b < buckets; b++) deepest = Math.max(deepest, o.nt[b], o.ns[b]);
    const marks = [[1, color("--discard")], [2, color("--abort")], [4, color("--error")],
      [8, color("--repair")], [16, color("--violation")]];
    for (let b = 0; b < buckets; b++) {
      const x = b * w;
      if (o.turn[b] > 0) { ctx.fillStyle = o.turn[b] % 2 ? turnA : turnB; ctx.fillRect(x, 0, w + 0.5, 18); }
      if (o.step[b]) { ctx.fillStyle = stepC; ctx.fillRect(x, 20, w + 0.5, 18); }
      if (o.nt[b] > 0) { const h = 44 * o.nt[b] / deepest; ctx.fillStyle = ntC; ctx.fillRect(x, 84 - h, w + 0.5, h); }
      if (o.ns[b] > 0) { const h = 44 * o.ns[b] / deepest; ctx.fillStyle = nsC; ctx.fillRect(x, 130 - h, w + 0.5, h); }
      for (const [bit, c] of marks) if (o.marks[b] & bit) { ctx.fillStyle = c; ctx.fillRect(x, 132, Math.max(2, w), 18); }
    }
    ctx.fillStyle = "#eef0f5"; // lane separators
    for (const y of [19, 39, 85, 131]) ctx.fillRect(0, y, width, 1);
    ctx.fillStyle = "#6b7385";
    ctx.font = "10px sans-serif";
    ctx.fillText("max " + deepest, width - 48, 50);
    canvas.onclick = (event) => {
      const rect = canvas.getBoundingClientRect();
      const b = Math.floor((event.clientX - rect.left) / rect.width * buckets);
      jump(Math.min(n - 1, Math.max(0, b * o.per)));
    };
  }

  function rowLine(r) {
    const row = ROWS[r];
    const tr = el("tr", "k-" + row[2] + (row[8] ? " m-" + row[8] : "") + (r === hit ? " hit" : ""));
    tr.dataset.row = r;
    tr.dataset.seq = row[0];
    tr.appendChild(el("td", "num", String(row[0])));
    tr.appendChild(el("td", "lane" + (row[3] ? (row[3] % 2 ? " t1" : " t2") : "")));
    tr.appendChild(el("td", "lane" + (row[4] ? " s" : "")));
    tr.appendChild(el("td", "num", row[3] ? row[3] + (row[4] ? "." + row[4] : "") : ""));
    tr.appendChild(el("td", "num", row[5] < 0 ? "?" : String(row[5])));
    tr.appendChild(el("td", "num", row[6] < 0 ? "?" : String(row[6])));
    tr.appendChild(el("td", "text", row[7]));
    return tr;
  }

  function foldLine(item) {
    const start = itemStart[item], end = itemEnd[item];
    const counts = new Map();
    for (let r = start; r < end; r++) {
      const type = ROWS[r][7].split(" ", 1)[0];
      counts.set(type, (counts.get(type) || 0) + 1);
    }
    const kinds = [...counts].map(([t, c]) => (c > 1 ? t + " ×" + c : t)).join(", ");
    const isOpen = open.has(start);
    const tr = el("tr", "fold" + (isOpen ? " open" : ""));
    tr.dataset.row = start;
    const first = ROWS[start];
    tr.appendChild(el("td", "num", String(first[0]) + (end - start > 1 ? "–" + ROWS[end - 1][0] : "")));
    tr.appendChild(el("td", "lane" + (first[3] ? (first[3] % 2 ? " t1" : " t2") : "")));
    tr.appendChild(el("td", "lane" + (first[4] ? " s" : "")));
    tr.appendChild(el("td", "num", first[3] ? first[3] + (first[4] ? "." + first[4] : "") : ""));
    tr.appendChild(el("td", "num", ""));
    tr.appendChild(el("td", "num", ""));
    const label = (isOpen ? "▾ " : "▸ ") + (end - start) + " host event" + (end - start > 1 ? "s" : "") + ": " + kinds;
    tr.appendChild(el("td", "text", label));
    tr.onclick = () => {
      if (open.has(start)) open.delete(start);
      else open.add(start);
      render();
    };
    return tr;
  }

  function pager(nav) {
    nav.textContent = "";
    const button = (label, target) => {
      const b = el("button", "", label);
      b.type = "button";
      b.disabled = target < 0 || target >= pages || target === page;
      b.onclick = () => { page = target; render(); };
      nav.appendChild(b);
    };
    button("« first", 0);
    button("‹ prev", page - 1);
    const firstRow = itemStart[page * PAGE];
    const lastRow = itemEnd[Math.min(items, (page + 1) * PAGE) - 1] - 1;
    nav.appendChild(document.createTextNode(
      " page " + (page + 1) + " of " + pages + " (records " + (ROWS[firstRow] ? ROWS[firstRow][0] : 0) +
      "–" + (ROWS[lastRow] ? ROWS[lastRow][0] : 0) + " of " + n + ") "));
    button("next ›", page + 1);
    button("last »", pages - 1);
  }

  function render() {
    const body = $("body");
    const fragment = document.createDocumentFragment();
    const last = Math.min(items, (page + 1) * PAGE);
    for (let i = page * PAGE; i < last; i++) {
      const start = itemStart[i];
      if (ROWS[start][2] !== "h") { fragment.appendChild(rowLine(start)); continue; }
      fragment.appendChild(foldLine(i));
      if (open.has(start)) for (let r = start; r < itemEnd[i]; r++) fragment.appendChild(rowLine(r));
    }
    body.textContent = "";
    body.appendChild(fragment);
    pager($("pager"));
    pager($("pager-bottom"));
  }

  // Shows row `r`: its page, its fold opened, highlighted and scrolled into view.
  function jump(r) {
    if (r < 0 || r >= n) return;
    hit = r;
    const item = rowItem[r];
    if (ROWS[r][2] === "h") open.add(itemStart[item]);
    page = Math.floor(item / PAGE);
    render();
    const tr = document.querySelector('#body tr[data-row="' + r + '"]:not(.fold)');
    if (tr) tr.scrollIntoView({ block: "center" });
  }

  function link(text, row) {
    const a = el("a", "jump", text);
    a.dataset.row = row;
    return a;
  }

  function describe(life) {
    const card = el("div", "card");
    card.dataset.id = life.id;
    const head = el("h3", "", life.id + " — " + life.target + (life.waking ? ", waking" : ", quiet") +
      (life.source ? ", from " + life.source : "") + (life.preview ? ": " + life.preview : ""));
    card.appendChild(head);
    const list = el("ul");
    const item = (...parts) => {
      const li = el("li");
      for (const part of parts) li.appendChild(typeof part === "string" ? document.createTextNode(part) : part);
      list.appendChild(li);
      return li;
    };
    const seq = (row) => "#" + ROWS[row][0];
    item("inserted at ", link(seq(life.inserted), life.inserted),
      ROWS[life.inserted][3] ? " (during turn " + ROWS[life.inserted][3] + ")" : " (between turns)",
      life.redelivered ? ", redelivered (" + life.redelivered + ") by crash repair (S59)" : "");
    if (life.claimed) {
      const li = item("claimed at ", link(seq(life.claimed[0]), life.claimed[0]), " by turn " + life.claimed[1]);
      li.className = "end-claimed";
    }
    for (const row of life.entered) {
      item("entered step " + ROWS[row][3] + "." + ROWS[row][4] + " at ", link(seq(row), row));
    }
    if (life.discarded) {
      const li = item("discarded at ", link(seq(life.discarded[0]), life.discarded[0]), ": " + life.discarded[1]);
      li.className = "end-discarded";
    }
    if (!life.claimed && !life.discarded) item("still pending at the log's end").className = "end-pending";
    // The core's answer (S58), computed in Rust; only the id's last life has one.
    if (life.fate) item("fate" + (DATA.fates_after ? " " + DATA.fates_after : "") + ": " + life.fate).className = "fate";
    card.appendChild(list);
    return card;
  }

  function search() {
    const query = $("search").value.trim();
    const box = $("life");
    box.textContent = "";
    if (!query) return;
    let ids = byId.has(query) ? [query] : [];
    if (!ids.length) {
      for (const id of byId.keys()) {
        if (id.includes(query)) ids.push(id);
        if (ids.length >= 20) break;
      }
    }
    if (!ids.length) { box.appendChild(el("div", "card none", "no message with id " + query)); return; }
    for (const id of ids) for (const index of byId.get(id)) box.appendChild(describe(DATA.lives[index]));
  }

  function nextMark() {
    for (let r = hit + 1; r < n; r++) if (ROWS[r][8]) { jump(r); return; }
    for (let r = 0; r <= hit && r < n; r++) if (ROWS[r][8]) { jump(r); return; }
  }

  document.addEventListener("click", (event) => {
    const a = event.target.closest && event.target.closest("a.jump");
    if (a) { event.preventDefault(); jump(Number(a.dataset.row)); }
  });
  $("search").addEventListener("input", search);
  $("next-mark").addEventListener("click", nextMark);
  window.addEventListener("resize", strip);

  verdict();
  strip();
  render();
  window.coxswainView = { jump, search, rows: n, items, pages };
  window.coxswainFirstRender = performance.now();
  document.body.dataset.ready = "1";
})();
