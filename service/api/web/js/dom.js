/*
 * Building the DOM from text (textContent and attributes only, never markup), number and
 * timing formats, and the page's shared regions: the alert and the degraded notices.
 */

import { truncate } from "./text.js";

export function el(tag, attrs, children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "className") node.className = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    }
  }
  for (const child of children || []) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

export function srOnly(text) {
  return el("span", { className: "sr-only", text: text });
}

export function byId(id) {
  return document.getElementById(id);
}

export function clear(node) {
  node.replaceChildren();
}

export function fmt(value, digits) {
  return typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "–";
}

export function renderMeta(dl, rows) {
  clear(dl);
  for (const [term, value] of rows) {
    dl.append(el("dt", { text: term }), el("dd", { text: value }));
  }
}

export function timingText(response) {
  const t = response.timings || {};
  return "decode " + fmt(t.decode_ms, 0) + " ms, rank " + fmt(t.rank_ms, 0) + " ms, total " +
    fmt(t.total_ms, 0) + " ms" + (response.cached ? " (translation from cache)" : "");
}

const QUERY_ECHO_CHARS = 80;

/** The user's text for a heading: cut at QUERY_ECHO_CHARS, the whole of it in the title. */
export function queryEcho(text) {
  return el("span", { className: "query-echo", title: String(text), text: truncate(text, QUERY_ECHO_CHARS) });
}

export function showAlert(message) {
  const box = byId("alert");
  box.textContent = message;
  box.hidden = false;
}

export function hideAlert() {
  const box = byId("alert");
  box.textContent = "";
  box.hidden = true;
}

export function showDegraded(id, response) {
  const box = byId(id);
  if (response && response.degraded) {
    box.textContent = "Partial answer: decoding was cut short by the time budget" +
      (response.degraded_reason ? " (" + response.degraded_reason + ")" : "") +
      ". Results may be less accurate.";
    box.hidden = false;
  } else {
    box.textContent = "";
    box.hidden = true;
  }
}
