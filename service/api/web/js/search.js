/*
 * The search tab (POST /v1/search, Hieber & Riezler 2015, §3: BOW-FD, DT, PSQ with the
 * derivation that retrieved each document): results with snippets and explanations, pages,
 * and the search as the page's address (?q=…&lang=…&method=…), restored on reload, from a
 * shared link and on back and forward. Under the query, the words its translation forest
 * translates in several ways, each option a button: a click searches again with the word
 * pinned to it (Oard, He & Wang 2008: user-assisted query translation), and the address keeps
 * the pins (&pin=word:english).
 */

import { ApiError, busyText, callApi, pageLimits } from "./api.js";
import { docHash, docState, foundBy } from "./docview.js";
import {
  byId,
  clear,
  el,
  fmt,
  hideAlert,
  queryEcho,
  renderMeta,
  showAlert,
  showDegraded,
  srOnly,
  timingText,
} from "./dom.js";
import { explanationTerms, renderExplanation } from "./explanation.js";
import { selectTab } from "./tabs.js";
import { parseSnippet } from "./text.js";
import { restoreSuggest } from "./translator.js";

const searchState = { request: null, offset: 0, seq: 0, shown: null };

/** The address of a search and its page: ?q=…&lang=…&method=…[&k=…][&page=…]. */
function searchAddress(request, offset) {
  const params = new URLSearchParams();
  params.set("q", request.query);
  params.set("lang", request.lang);
  params.set("method", request.method);
  if (request.k !== 10) params.set("k", String(request.k));
  // fb=1 / fb=0: the switch, when it differs from the service's default
  if (request.feedback !== pageLimits.feedback.default) params.set("fb", request.feedback ? "1" : "0");
  // dn=1 / dn=0: the dense reader's switch, when it differs from the service's default
  if (request.dense !== pageLimits.dense.default) params.set("dn", request.dense ? "1" : "0");
  for (const source of Object.keys(request.pins || {}).sort()) {
    params.append("pin", source + ":" + request.pins[source]);
  }
  const page = Math.floor(offset / request.k) + 1;
  if (page > 1) params.set("page", String(page));
  return "?" + params.toString();
}

/** The pins of an address: pin=word:english, repeated. */
function pinsOf(params) {
  const pins = {};
  for (const value of params.getAll("pin")) {
    const at = value.indexOf(":");
    if (at > 0 && at < value.length - 1) pins[value.slice(0, at)] = value.slice(at + 1);
  }
  return pins;
}

/** Each word with several translations, its options as buttons (the pinned one pressed). */
function renderAlternatives(alternatives, request) {
  const box = byId("search-alternatives");
  clear(box);
  const shown = Array.isArray(alternatives) ? alternatives : [];
  box.hidden = shown.length === 0;
  if (!shown.length) return;
  box.append(el("span", { className: "label", text: "Translated as: " }));
  shown.forEach(function (alt, at) {
    const group = el("span", { className: "alternative" });
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", "Translations of " + alt.source);
    group.append(el("span", { className: "source", text: String(alt.source) + ": " }));
    (alt.options || []).forEach(function (option, i) {
      if (i > 0) group.append(" · ");
      const chosen = alt.chosen === option.english;
      const button = el("button", {
        type: "button",
        className: "option" + (chosen ? " chosen" : ""),
        text: String(option.english),
        title: (chosen ? "Chosen: click to let the search choose again. " : "Search again with “" +
          alt.source + "” translated only as “" + option.english + "”. ") +
          "Posterior " + fmt(option.p, 2) + (option.cue ? ". Used in: " + option.cue : ""),
      });
      button.setAttribute("aria-pressed", chosen ? "true" : "false");
      button.addEventListener("click", function () {
        const pins = Object.assign({}, request.pins || {});
        if (chosen) delete pins[alt.source];
        else pins[alt.source] = option.english;
        searchState.request = Object.assign({}, request, { pins: pins });
        runSearch(0, false);
      });
      group.append(button);
    });
    if (at < shown.length - 1) group.append("; ");
    box.append(group);
  });
}

/** Show the search the address names (a reload, a shared link, back and forward). */
export function restoreSearch() {
  const params = new URLSearchParams(window.location.search);
  selectTab(params.get("tab") || "search", false);
  if (params.get("tab") === "translate") {
    restoreSuggest(params);
    return;
  }
  const query = params.get("q");
  if (!query) {
    if (searchState.request) { // back to before the first search
      searchState.seq++;
      searchState.request = null;
      searchState.shown = null;
      clearSearch();
    }
    return;
  }
  byId("search-query").value = query;
  for (const [name, id] of [["lang", "search-lang"], ["method", "search-method"]]) {
    const value = params.get(name);
    const select = byId(id);
    if (value && Array.from(select.options).some(function (o) { return o.value === value; })) select.value = value;
  }
  const k = parseInt(params.get("k") || "10", 10);
  byId("search-k").value = String(Number.isFinite(k) && k > 0 ? k : 10);
  const fb = params.get("fb");
  byId("search-feedback").checked = pageLimits.feedback.offered &&
    (fb === "1" || (fb !== "0" && pageLimits.feedback.default));
  const dn = params.get("dn");
  byId("search-dense").checked = pageLimits.dense.offered &&
    (dn === "1" || (dn !== "0" && pageLimits.dense.default));
  const request = Object.assign(readSearchForm(), { pins: pinsOf(params) });
  const page = Math.max(1, parseInt(params.get("page") || "1", 10) || 1);
  const offset = (page - 1) * request.k;
  if (searchState.shown === searchAddress(request, offset)) return; // on screen already
  searchState.request = request;
  runSearch(offset, false, false);
}

function readSearchForm() {
  const k = parseInt(byId("search-k").value, 10);
  return {
    query: byId("search-query").value,
    lang: byId("search-lang").value,
    method: byId("search-method").value,
    k: Number.isFinite(k) ? k : 10,
    feedback: pageLimits.feedback.offered && byId("search-feedback").checked,
    dense: pageLimits.dense.offered && byId("search-dense").checked,
    pins: {}, // a query typed anew lets the search choose every word's translation
  };
}

/** Which reader found a result, and at which rank: "words #2 · meaning #1". */
function readersText(readers) {
  if (!readers || typeof readers !== "object") return "";
  const names = { lexical: "words", dense: "meaning" };
  return Object.keys(names)
    .filter(function (k) { return Number.isFinite(readers[k]); })
    .map(function (k) { return names[k] + " #" + readers[k]; })
    .join(" · ");
}

function renderHit(hit, position, uid) {
  const id = String(hit.id);
  const link = el("a", {
    className: "result-link",
    href: docHash(id, explanationTerms(hit.explanation)),
    text: hit.title || id,
  });
  link.addEventListener("click", function (event) {
    if (event.button === 0 && !event.ctrlKey && !event.metaKey && !event.shiftKey) docState.fromResults = true;
  });
  const snippet = el("p", { className: "snippet" });
  for (const part of parseSnippet(String(hit.snippet || ""))) {
    snippet.append(part.mark ? el("mark", { text: part.text }) : part.text);
  }
  const panelId = "explain-" + uid + "-" + position;
  const toggle = el("button", {
    type: "button",
    className: "explain-toggle",
    "aria-expanded": "false",
    "aria-controls": panelId,
    text: "Details",
  });
  toggle.append(srOnly(" of result " + position));
  const panel = el("div", { id: panelId, className: "explanation", hidden: true }, [
    el("p", { className: "scores" }, [el("span", { className: "score", text: "Score " + fmt(hit.score, 3) })]),
    renderExplanation(hit.explanation),
  ]);
  toggle.addEventListener("click", function () {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
    panel.hidden = !open;
  });
  return el("li", { className: "result", "data-doc-id": id }, [
    el("h3", { className: "result-title" }, [link]),
    el("p", { className: "result-meta" }, [
      hit.origin ? el("span", { className: "doc-origin", text: String(hit.origin) }) : null,
      hit.origin ? " · " : null,
      el("span", { className: "doc-id", text: id }),
      readersText(hit.readers) ? " · " : null,
      readersText(hit.readers)
        ? el("span", { className: "found-by", title: "Found by reading the query's words (forced decoding) and its meaning (the dense reader), with the rank in each", text: "found by " + readersText(hit.readers) })
        : null,
    ]),
    snippet,
    toggle,
    panel,
  ]);
}

/** Remove every trace of the last search (results, summary, details, pager). */
function clearSearch() {
  clear(byId("search-results"));
  byId("search-results").removeAttribute("start");
  byId("search-summary").textContent = "";
  const translation = byId("search-translation");
  translation.textContent = "";
  translation.hidden = true;
  byId("search-expansion").textContent = "";
  byId("search-expansion").hidden = true;
  clear(byId("search-alternatives"));
  byId("search-alternatives").hidden = true;
  clear(byId("search-meta"));
  byId("search-details").open = false;
  byId("search-details").hidden = true;
  byId("search-pager").hidden = true;
  showDegraded("search-degraded", null);
  foundBy.clear();
}

function searchFailed(message) {
  clearSearch();
  showAlert(message);
}

async function runSearch(offset, focusResults, record) {
  const request = searchState.request;
  if (!request) return;
  const seq = ++searchState.seq;
  const address = searchAddress(request, offset);
  searchState.shown = address;
  if (record !== false && window.location.search !== address) {
    window.history.pushState(null, "", address); // back and forward move between searches
  }
  const form = byId("search-form");
  const summary = byId("search-summary");
  const results = byId("search-results");
  hideAlert();
  form.setAttribute("aria-busy", "true");
  results.setAttribute("aria-busy", "true");
  summary.textContent = "Searching…";
  try {
    const body = Object.assign({}, request, { offset: offset, explain: true });
    const response = await callApi("POST", "/v1/search", body, function (seconds) {
      if (seq === searchState.seq) summary.textContent = busyText(seconds);
    });
    if (seq !== searchState.seq) return; // a newer search has started
    searchState.offset = offset;
    showDegraded("search-degraded", response);
    const hits = Array.isArray(response.results) ? response.results : [];
    clear(results);
    foundBy.clear();
    results.start = offset + 1;
    hits.forEach(function (hit, at) {
      foundBy.set(String(hit.id), { explanation: hit.explanation, score: hit.score, query: request.query, method: request.method });
      results.append(renderHit(hit, offset + at + 1, seq));
    });
    // "of 37": the documents the method retrieved; when that is a lower bound, "of up to
    // 630" (the candidates: an upper bound), else "of 10+"
    let total = "";
    if (Number.isFinite(response.total)) {
      if (response.total_relation !== "gte") total = " of " + response.total;
      else if (Number.isFinite(response.total_max)) total = " of up to " + response.total_max;
      else total = " of " + response.total + "+";
    }
    const lead = hits.length
      ? "Results " + (offset + 1) + "–" + (offset + hits.length) + total + " for “"
      : (offset > 0 ? "No more results for “" : "No results for “");
    summary.replaceChildren(lead, queryEcho(request.query), "”");
    const translation = byId("search-translation");
    translation.replaceChildren(
      el("span", { className: "label", text: "Best translation of the query: " }),
      el("span", { className: "translation", text: String(response.translation || "") }),
    );
    translation.hidden = false;
    renderAlternatives(response.alternatives, request);
    const expansion = byId("search-expansion");
    const added = response.expansion && Array.isArray(response.expansion.added) ? response.expansion.added : [];
    expansion.replaceChildren(
      el("span", { className: "label", text: "Expanded with feedback: " }),
      el("span", { className: "translation", text: added.length ? added.join(" ") : "no words added" }),
    );
    expansion.hidden = !response.expansion;
    renderMeta(byId("search-meta"), [
      ["Scorer", String(response.signature || "")],
      ["Weights version", String(response.weights_version || "")],
      ["Dense reader", String(response.dense || "off")],
      ["Timings", timingText(response)],
    ]);
    byId("search-details").hidden = false;
    const pager = byId("search-pager");
    byId("search-prev").disabled = offset === 0;
    byId("search-next").disabled = hits.length < request.k;
    byId("search-page").textContent = "Page " + (Math.floor(offset / request.k) + 1);
    pager.hidden = offset === 0 && hits.length < request.k;
    if (focusResults) summary.focus();
  } catch (exc) {
    if (seq !== searchState.seq) return;
    searchState.shown = null; // nothing of it on screen: going back to it searches again
    searchFailed(exc instanceof ApiError ? exc.message : "Unexpected error: " + exc);
  } finally {
    if (seq === searchState.seq) {
      form.removeAttribute("aria-busy");
      results.removeAttribute("aria-busy");
    }
  }
}

export function setupSearch() {
  byId("search-summary").tabIndex = -1;
  byId("search-form").addEventListener("submit", function (event) {
    event.preventDefault();
    const request = readSearchForm();
    if (!request.query.trim()) {
      searchState.seq++; // a search still under way must not fill the list again
      searchFailed("Type a query first.");
      byId("search-query").focus();
      return;
    }
    searchState.request = request;
    runSearch(0, false);
  });
  byId("search-prev").addEventListener("click", function () {
    const r = searchState.request;
    if (r) runSearch(Math.max(0, searchState.offset - r.k), true);
  });
  byId("search-next").addEventListener("click", function () {
    const r = searchState.request;
    if (r) runSearch(searchState.offset + r.k, true);
  });
  window.addEventListener("popstate", restoreSearch); // back and forward between searches
}
