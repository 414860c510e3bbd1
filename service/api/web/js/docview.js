/*
 * The document view inside the page (hash routing: #doc=<id> with the matched terms as
 * term=…): the full text from GET /v1/documents/{id}?terms=…, its words marked where the
 * server's matcher says they match, and the translation that found it (kept from the
 * search in foundBy, so going to a document and back needs no new search).
 */

import { ApiError, callApi } from "./api.js";
import { byId, clear, el, fmt, hideAlert, queryEcho, renderMeta, showAlert } from "./dom.js";
import { renderExplanation, renderFoundTranslation } from "./explanation.js";
import { splitHighlights } from "./text.js";

const MAX_LINK_TERMS = 200;

/** The in-page link to a document: "#doc=<id>&term=<t>…" (URL-encoded). */
export function docHash(id, terms) {
  const params = new URLSearchParams();
  params.append("doc", String(id));
  for (const t of (terms || []).slice(0, MAX_LINK_TERMS)) params.append("term", String(t));
  return "#" + params.toString();
}

/** {id, terms} of a "#doc=…" hash, or null for any other hash. */
export function parseDocHash(hash) {
  const raw = String(hash || "").replace(/^#/, "");
  if (!raw.startsWith("doc=")) return null;
  const params = new URLSearchParams(raw);
  const id = params.get("doc");
  return id ? { id: id, terms: params.getAll("term").slice(0, MAX_LINK_TERMS) } : null;
}

// The view's request counter (a newer one wins), whether it was opened by a link on this page's
// results (its back link then goes back in the history), the document last shown, the page's title.
export const docState = { seq: 0, fromResults: false, lastId: null, pageTitle: document.title };

// What each listed hit was found by (id -> {explanation, score, query, method}), for the
// document view: kept from the search, so going to a document and back needs no new search.
export const foundBy = new Map();

/** "/v1/documents/<id>?terms=…": the id's segments encoded one by one (ids hold "/"). */
function documentPath(id, terms) {
  const path = "/v1/documents/" + String(id).split("/").map(encodeURIComponent).join("/");
  const params = new URLSearchParams();
  for (const t of terms) params.append("terms", t);
  return path + "?" + params.toString();
}

function showMainView() {
  const view = byId("doc-view");
  if (view.hidden) return;
  docState.seq++;
  view.hidden = true;
  hideAlert();
  document.title = docState.pageTitle;
  document.querySelector(".tabs").hidden = false;
  for (const tab of document.querySelectorAll("[role=tab]")) {
    byId(tab.getAttribute("aria-controls")).hidden = tab.getAttribute("aria-selected") !== "true";
  }
  docState.fromResults = false;
  // back where the searcher left: the link of the document they opened
  for (const link of document.querySelectorAll("#search-results .result-link")) {
    if (link.closest(".result").getAttribute("data-doc-id") === docState.lastId) {
      link.focus();
      break;
    }
  }
}

function renderFoundBy(box, context) {
  clear(box);
  if (!context) {
    box.append(el("p", { className: "found-note", text: "Open this document from a search result to see the translation that found it." }));
    return;
  }
  box.append(
    el("h3", { className: "small-heading", text: "The translation that found it" }),
    el("p", { className: "found-query" }, ["Query “", queryEcho(context.query), "”"]),
    renderFoundTranslation(context.explanation),
    el("details", { className: "details doc-details" }, [
      el("summary", { text: "Details" }),
      el("p", { className: "scores" }, [el("span", { className: "score", text: "Score " + fmt(context.score, 3) + " (" + String(context.method) + ")" })]),
      renderExplanation(context.explanation),
    ]),
  );
}

function renderDocText(box, text, spans) {
  clear(box);
  for (const parts of splitHighlights(text, spans)) {
    const p = el("p");
    for (const part of parts) p.append(part.mark ? el("mark", { text: part.text }) : part.text);
    box.append(p);
  }
}

async function showDocView(target) {
  const seq = ++docState.seq;
  docState.lastId = target.id;
  hideAlert();
  document.querySelector(".tabs").hidden = true;
  for (const panel of document.querySelectorAll("[role=tabpanel]")) panel.hidden = true;
  const view = byId("doc-view");
  const article = byId("doc-article");
  const status = byId("doc-status");
  view.hidden = false;
  article.hidden = true;
  status.textContent = "Loading the document…";
  window.scrollTo(0, 0);
  try {
    const doc = await callApi("GET", documentPath(target.id, target.terms));
    if (seq !== docState.seq) return;
    const title = byId("doc-title");
    clear(title);
    for (const parts of splitHighlights(String(doc.title || doc.id), doc.title_highlights)) {
      for (const part of parts) title.append(part.mark ? el("mark", { text: part.text }) : part.text);
    }
    renderMeta(byId("doc-meta"), [["Id", String(doc.id)], ["Source", String(doc.source || "–")]]);
    renderFoundBy(byId("doc-found-by"), foundBy.get(String(doc.id)));
    renderDocText(byId("doc-text"), String(doc.text || ""), doc.highlights);
    status.textContent = "";
    article.hidden = false;
    document.title = String(doc.title || doc.id) + " — " + docState.pageTitle;
    title.focus();
  } catch (exc) {
    if (seq !== docState.seq) return;
    status.textContent = "";
    article.hidden = true;
    for (const id of ["doc-title", "doc-meta", "doc-found-by", "doc-text"]) clear(byId(id));
    showAlert(exc instanceof ApiError ? exc.message : "Unexpected error: " + exc);
  }
}

export function route() {
  const target = parseDocHash(window.location.hash);
  if (target) showDocView(target);
  else showMainView();
}

export function setupDocView() {
  // the skip link moves the focus without changing the hash (which says what is shown)
  document.querySelector(".skip-link").addEventListener("click", function (event) {
    event.preventDefault();
    byId("main").focus();
  });
  byId("doc-back").addEventListener("click", function (event) {
    if (docState.fromResults) { // the entry before this one is the results: go back to it
      event.preventDefault();
      window.history.back();
    }
  });
  window.addEventListener("hashchange", route);
}
