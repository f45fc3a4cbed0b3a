// pentrace web viewer: keyboard navigation, date presets, raw records, paging, live, import,
// and rounds that fold.
// Served by pentrace (no CDN, no build step); the pages hold no inline script.
"use strict";

function navItems() {
  return Array.from(document.querySelectorAll("[data-nav]")).filter((item) => !item.hidden);
}

function moveFocus(step) {
  const items = navItems();
  if (!items.length) { return; }
  const at = items.indexOf(document.activeElement);
  const next = items[Math.max(0, Math.min(items.length - 1, at < 0 ? 0 : at + step))];
  if (!next.hasAttribute("href") && !next.hasAttribute("tabindex")) { next.tabIndex = -1; }
  next.focus();
  next.scrollIntoView({block: "nearest"});
}

document.addEventListener("keydown", (event) => {
  const typing = /^(INPUT|SELECT|TEXTAREA)$/.test(event.target.tagName);
  if (event.key === "Escape" && typing) { event.target.blur(); return; }
  if (typing || event.ctrlKey || event.metaKey || event.altKey) { return; }
  if (event.key === "/") {
    const search = document.querySelector("[data-search]");
    if (search) { event.preventDefault(); search.focus(); }
  } else if (event.key === "j") { moveFocus(1); }
  else if (event.key === "k") { moveFocus(-1); }
  else if (event.key === "Enter" && document.activeElement.matches("div[data-nav]")) {
    const raw = document.activeElement.querySelector("[data-raw]");
    if (raw) { raw.click(); }
  }
});

function setupPresets() {
  for (const preset of document.querySelectorAll("[data-preset]")) {
    const form = preset.form;
    const since = form.querySelector("[name=since]");
    const custom = form.querySelectorAll("[data-custom]");
    const show = () => {
      const isCustom = preset.value === "custom";
      custom.forEach((label) => { label.hidden = !isCustom; });
      // Traces' "since" holds the preset itself; the Usage range's custom bounds are cleared.
      if (!isCustom && since) { since.value = preset.name === "range" ? "" : preset.value; }
      if (!isCustom) { const until = form.querySelector("[name=until]"); if (until) { until.value = ""; } }
    };
    preset.addEventListener("change", show);
    custom.forEach((label) => { label.hidden = preset.value !== "custom"; });
  }
}

// The record as JSON (redacted), or the server's reason when it refuses (the verbatim record
// without the token answers 403); a shown record can be asked for verbatim.
async function showRaw(button) {
  const shown = button.nextElementSibling;
  if (shown && shown.classList.contains("rawrecord")) { shown.remove(); return; }
  const answer = await fetch(button.dataset.raw, {headers: {Accept: "application/json"}});
  const body = await answer.json();
  const pre = document.createElement("pre");
  pre.className = "rawrecord";
  if (answer.ok) {
    pre.textContent = JSON.stringify(body, null, 2);
  } else {
    pre.dataset.refused = String(answer.status);
    pre.textContent = "not available: " + body.error.message + (body.error.hint ? "\nhint: " + body.error.hint : "");
  }
  button.after(pre);
  if (answer.ok && body.redacted && !button.dataset.raw.endsWith("?raw=1")) {
    const verbatim = document.createElement("button");
    verbatim.type = "button";
    verbatim.className = "raw";
    verbatim.dataset.raw = button.dataset.raw + "?raw=1";
    verbatim.textContent = "verbatim record";
    pre.append(document.createElement("br"), verbatim);
  }
}

// An image the server refused after all (cut-off data, a file that is gone): its reason.
async function explainImage(image) {
  const answer = await fetch(image.src);
  const note = document.createElement("p");
  note.className = "image-ref refused";
  note.dataset.imageRefused = "";
  let reason = "HTTP " + answer.status;
  if ((answer.headers.get("Content-Type") || "").startsWith("application/json")) {
    reason = (await answer.json()).error.message;
  }
  note.textContent = "image not shown: " + reason;
  image.closest("figure").replaceWith(note);
}

document.addEventListener("error", (event) => {
  if (event.target.matches && event.target.matches("img[data-image]")) { explainImage(event.target); }
}, true);

// Items of a fetched fragment not already on the page (by their id="pN"), so none shows twice.
function newItems(html) {
  const fragment = document.createRange().createContextualFragment(html);
  for (const item of fragment.querySelectorAll("div.item[id^=p]")) {
    if (document.getElementById(item.id)) { item.remove(); }
  }
  for (const heading of fragment.querySelectorAll("h3.round[id]")) {
    if (document.getElementById(heading.id)) { heading.remove(); }  // the same round goes on
  }
  return fragment;
}

async function loadMore(link) {
  const answer = await fetch(link.href);
  if (!answer.ok) { link.textContent = "could not load: HTTP " + answer.status; return; }
  const records = link.closest("#records");
  link.replaceWith(newItems(await answer.text()));
  foldRounds();
  if (records && !records.querySelector("a[data-more]") && answer.headers.get("X-Pentrace-Next")) {
    records.dataset.tail = link.href.split("?")[0];  // this window reached the end: follow it
    records.dataset.next = answer.headers.get("X-Pentrace-Next");
  }
}

// Records recorded after the page loaded: fetched from data-next when the live panel hears of
// them, one fetch at a time (events arriving meanwhile cause one more fetch after it).
const tail = {busy: false, again: false, appended: 0};

async function appendNewer() {
  const records = document.querySelector("#records[data-tail]");
  if (!records) { return; }
  if (tail.busy) { tail.again = true; return; }
  tail.busy = true;
  try {
    do {
      tail.again = false;
      const from = records.dataset.next;
      const answer = await fetch(records.dataset.tail + "?from=" + from + "&fragment=1");
      const next = answer.headers.get("X-Pentrace-Next");
      if (!answer.ok || !next) { return; }
      const fragment = newItems(await answer.text());
      for (const more of fragment.querySelectorAll("a[data-more]")) { more.remove(); }
      tail.appended += fragment.querySelectorAll("div.item[id^=p]").length;
      records.append(fragment);
      foldRounds();
      records.dataset.next = next;
      tail.again = tail.again || Number(next) - Number(from) >= 500;  // a full window: more
    } while (tail.again);
  } finally {
    tail.busy = false;
  }
}

document.addEventListener("click", (event) => {
  const raw = event.target.closest("[data-raw]");
  if (raw) { event.preventDefault(); showRaw(raw); return; }
  const more = event.target.closest("a[data-more]");
  if (more) { event.preventDefault(); loadMore(more); }
});

function setupLive() {
  const panel = document.querySelector("[data-live]");
  if (!panel || typeof EventSource === "undefined") { return; }
  const list = panel.querySelector("[data-live-events]");
  const state = panel.querySelector("[data-live-state]");
  const live = window.pentraceLive = {ids: [], types: [], control: [], opens: 0, errors: 0, tail};
  const source = new EventSource(panel.dataset.live);
  source.onopen = () => { live.opens += 1; state.textContent = "following (connection " + live.opens + ")"; };
  source.onerror = () => { live.errors += 1; state.textContent = "disconnected: reconnecting..."; };
  source.onmessage = (message) => {
    const data = JSON.parse(message.data);
    if (!(message.lastEventId && data.id === message.lastEventId)) {
      live.control.push(data.type);
      return;
    }
    live.ids.push(message.lastEventId);
    live.types.push(data.type);
    const item = document.createElement("li");
    item.textContent = data.type + " (" + message.lastEventId + ")";
    list.append(item);
    list.scrollTop = list.scrollHeight;
    appendNewer();
  };
}

// Each round's heading folds its records away (and back); "collapse all" leaves the headings
// as an outline of the session.  Records that arrive later follow their round's state.
const folded = new Set();

function showRound(round, open) {
  if (open) { folded.delete(round); } else { folded.add(round); }
  for (const item of document.querySelectorAll(`#records [data-in-round="${round}"]`)) {
    item.hidden = !open;
  }
  const toggle = document.querySelector(`#records h3.round[data-round="${round}"] button`);
  if (toggle) {
    toggle.setAttribute("aria-expanded", String(open));
    toggle.textContent = open ? "fold" : "unfold";
  }
}

function foldRounds() {
  for (const heading of document.querySelectorAll("#records h3.round[data-round]")) {
    const round = heading.dataset.round;
    if (!heading.querySelector("button")) {
      const toggle = document.createElement("button");
      toggle.type = "button";
      toggle.addEventListener("click", () => showRound(round, folded.has(round)));
      heading.prepend(toggle);
    }
    showRound(round, !folded.has(round));
  }
}

function setupRounds() {
  const tools = document.querySelector("[data-round-tools]");
  if (!tools) { return; }
  tools.hidden = false;
  const rounds = () => Array.from(document.querySelectorAll("#records h3.round[data-round]"),
    (heading) => heading.dataset.round);
  tools.querySelector("[data-collapse-all]").addEventListener("click", () => {
    rounds().forEach((round) => showRound(round, false));
  });
  tools.querySelector("[data-expand-all]").addEventListener("click", () => {
    rounds().forEach((round) => showRound(round, true));
  });
  foldRounds();
}

function setupImport() {
  const form = document.querySelector("form[data-import]");
  if (!form) { return; }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const out = form.querySelector("[data-import-result]");
    const file = form.file.files[0];
    const query = new URLSearchParams({project: form.project.value, agent: form.agent.value,
      filename: file ? file.name : ""});
    out.textContent = "importing...";
    const answer = await fetch(form.dataset.import + "?" + query, {method: "POST", body: file});
    const body = await answer.json();
    if (answer.ok) {
      out.textContent = "imported ";
      const link = document.createElement("a");
      link.href = body.url;
      link.textContent = body.ref;
      out.append(link);
    } else {
      out.textContent = "refused: " + body.error.message + (body.error.hint ? " (" + body.error.hint + ")" : "");
    }
    out.dataset.status = String(answer.status);
  });
}

setupPresets();
setupRounds();
setupLive();
setupImport();
