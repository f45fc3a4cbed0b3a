// pentrace web viewer: keyboard navigation, date presets, raw records, paging, live, import.
// Served by pentrace (no CDN, no build step); the pages hold no inline script.
"use strict";

function navItems() { return Array.from(document.querySelectorAll("[data-nav]")); }

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
      if (!isCustom && since && since.type !== "date") { since.value = preset.value; }
      if (!isCustom && since && since.type === "date") { since.value = ""; }
      if (!isCustom) { const until = form.querySelector("[name=until]"); if (until) { until.value = ""; } }
    };
    preset.addEventListener("change", show);
    custom.forEach((label) => { label.hidden = preset.value !== "custom"; });
  }
}

async function showRaw(button) {
  const shown = button.nextElementSibling;
  if (shown && shown.classList.contains("rawrecord")) { shown.remove(); return; }
  const answer = await fetch(button.dataset.raw, {headers: {Accept: "application/json"}});
  const pre = document.createElement("pre");
  pre.className = "rawrecord";
  pre.textContent = JSON.stringify(await answer.json(), null, 2);
  button.after(pre);
}

async function loadMore(link) {
  const answer = await fetch(link.href);
  if (!answer.ok) { link.textContent = "could not load: HTTP " + answer.status; return; }
  const fragment = document.createRange().createContextualFragment(await answer.text());
  link.replaceWith(fragment);
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
  const live = window.pentraceLive = {ids: [], types: [], control: [], opens: 0, errors: 0};
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
  };
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
setupLive();
setupImport();
