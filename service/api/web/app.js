/*
 * The CLIR web page: a search tab (POST /v1/search, Hieber & Riezler 2015, §3: BOW-FD, DT,
 * PSQ with the derivation that retrieved each document) and a translator tab (POST /v1/suggest,
 * TR paper: reference sentences from the pool, each with its word-level differences to the query's
 * 1-best translation).
 *
 * Safety rule: text from the API or the user is only ever put into the page with textContent
 * or as an option/attribute value, never parsed as HTML. The one piece of markup the API sends
 * (the snippet's <mark> tags around otherwise HTML-escaped text) is split by parseSnippet and
 * rebuilt as DOM nodes.
 *
 * Each search result links to a document view inside the page (hash routing: #doc=<id> with
 * the matched terms as term=…, so the link can be opened in a new tab and the back button
 * returns to the results without searching again). The view shows the full text from
 * GET /v1/documents/{id}?terms=…, its words marked where the server's matcher says they match
 * (the same matcher as the snippets), and the translation that found the document (the hit's
 * explanation, kept from the search). Raw scores and the scorer signature sit behind "Details".
 *
 * The pure helpers (entity decoding, snippet parsing, tokenising, the word diff, truncation,
 * the explanation's terms, the #doc= links and the highlight splitting) are exposed as
 * window.ClirPage so that the browser test can check them on hand-computed examples.
 */
"use strict";

(function () {
  // ------------------------------------------------------------------ pure helpers

  const NAMED_ENTITIES = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'" };

  /** Decode the character references of HTML-escaped text (what Python's html.escape makes). */
  function decodeEntities(text) {
    return text.replace(/&(#[xX][0-9a-fA-F]+|#[0-9]+|[a-zA-Z]+);/g, function (whole, name) {
      if (name.charAt(0) === "#") {
        const hex = name.charAt(1) === "x" || name.charAt(1) === "X";
        const code = hex ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
        const valid = code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff);
        return valid ? String.fromCodePoint(code) : whole;
      }
      return Object.prototype.hasOwnProperty.call(NAMED_ENTITIES, name)
        ? NAMED_ENTITIES[name]
        : whole;
    });
  }

  /**
   * Split a snippet ("a <mark>b</mark> &lt;c&gt;") into [{text, mark}] parts with plain text:
   * [{text: "a ", mark: false}, {text: "b", mark: true}, {text: " <c>", mark: false}].
   */
  function parseSnippet(snippet) {
    const parts = [];
    const tag = /<mark>([\s\S]*?)<\/mark>/g;
    let last = 0;
    let match;
    while ((match = tag.exec(snippet)) !== null) {
      if (match.index > last) {
        parts.push({ text: decodeEntities(snippet.slice(last, match.index)), mark: false });
      }
      parts.push({ text: decodeEntities(match[1]), mark: true });
      last = tag.lastIndex;
    }
    if (last < snippet.length) {
      parts.push({ text: decodeEntities(snippet.slice(last)), mark: false });
    }
    return parts;
  }

  const TOKEN = /[\p{L}\p{M}\p{N}]+(?:['’][\p{L}\p{M}\p{N}]+)*|[^\s\p{L}\p{M}\p{N}]/gu;

  /**
   * Words and single punctuation marks of `text`, each {text, norm, space}: norm is the
   * NFKC lower-cased form that the diff compares, space says whether whitespace preceded it.
   */
  function tokenize(text) {
    const tokens = [];
    let end = 0;
    for (const m of text.matchAll(TOKEN)) {
      tokens.push({
        text: m[0],
        norm: m[0].normalize("NFKC").toLowerCase(),
        space: tokens.length > 0 && m.index > end,
      });
      end = m.index + m[0].length;
    }
    return tokens;
  }

  /**
   * Word-level diff of `before` (the translation) and `after` (a reference sentence) by a
   * longest common subsequence over tokens: a list of {op, token} in reading order, op being
   * "same" (the token of `after`), "ins" (only in `after`) or "del" (only in `before`). Within a
   * changed stretch deletions come before insertions.
   */
  function wordDiff(before, after) {
    const a = typeof before === "string" ? tokenize(before) : before;
    const b = typeof after === "string" ? tokenize(after) : after;
    const n = a.length;
    const m = b.length;
    // lcs[i][j] = length of the longest common subsequence of a[i:] and b[j:]
    const lcs = [];
    for (let i = 0; i <= n; i++) lcs.push(new Array(m + 1).fill(0));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i][j] = a[i].norm === b[j].norm
          ? lcs[i + 1][j + 1] + 1
          : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    const ops = [];
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[i].norm === b[j].norm) {
        ops.push({ op: "same", token: b[j] });
        i++;
        j++;
      } else if (i < n && (j >= m || lcs[i + 1][j] >= lcs[i][j + 1])) {
        ops.push({ op: "del", token: a[i] });
        i++;
      } else {
        ops.push({ op: "ins", token: b[j] });
        j++;
      }
    }
    return ops;
  }

  /**
   * Consecutive ops of one kind joined: [{op, lead, text}], lead being the space before the run
   * ("" for the first), each token keeping its own spacing (tokenize's space).
   */
  function diffRuns(ops) {
    const runs = [];
    for (const { op, token } of ops) {
      const lead = token.space ? " " : "";
      const prev = runs[runs.length - 1];
      if (prev && prev.op === op) {
        prev.text += lead + token.text;
      } else {
        runs.push({ op: op, lead: runs.length > 0 ? lead : "", text: token.text });
      }
    }
    return runs;
  }

  /** A short text for screen readers and everyone: "2 words added, 1 word removed …". */
  function diffSummary(ops) {
    const added = ops.filter(function (o) { return o.op === "ins"; }).length;
    const removed = ops.filter(function (o) { return o.op === "del"; }).length;
    if (added === 0 && removed === 0) return "Same words as the translation.";
    const words = function (k) { return k + (k === 1 ? " word" : " words"); };
    const parts = [];
    if (added > 0) parts.push(words(added) + " added");
    if (removed > 0) parts.push(words(removed) + " removed");
    return parts.join(", ") + " compared with the translation.";
  }

  /** `text` with its whitespace runs collapsed, cut at `max` characters (code points) with "…". */
  function truncate(text, max) {
    const chars = Array.from(String(text).replace(/\s+/g, " ").trim());
    if (chars.length <= max) return chars.join("");
    return chars.slice(0, max).join("").trimEnd() + "…";
  }

  /**
   * The English terms a hit's explanation says matched the document, each once, in order
   * (the page's copy of the records' matched_terms in service/retrieval/explain.py): DT's
   * "matched", BOW-FD's per-sentence "matched" terms, PSQ's translations found in the document.
   */
  function explanationTerms(explanation) {
    const out = [];
    if (!explanation || typeof explanation !== "object") return out;
    if (explanation.feedback && Array.isArray(explanation.matched)) { // feedback: {term, weight}
      for (const m of explanation.matched) out.push(String(m.term));
    } else if (Array.isArray(explanation.matched)) {
      for (const t of explanation.matched) out.push(String(t));
    } else if (Array.isArray(explanation.sentences)) {
      for (const s of explanation.sentences) {
        for (const m of (s && Array.isArray(s.matched) ? s.matched : [])) out.push(String(m.term));
      }
    } else if (explanation.terms && typeof explanation.terms === "object") {
      for (const found of Object.values(explanation.terms)) {
        for (const e of Object.keys(found || {})) out.push(e);
      }
    }
    return Array.from(new Set(out));
  }

  const MAX_LINK_TERMS = 200;

  /** The in-page link to a document: "#doc=<id>&term=<t>…" (URL-encoded). */
  function docHash(id, terms) {
    const params = new URLSearchParams();
    params.append("doc", String(id));
    for (const t of (terms || []).slice(0, MAX_LINK_TERMS)) params.append("term", String(t));
    return "#" + params.toString();
  }

  /** {id, terms} of a "#doc=…" hash, or null for any other hash. */
  function parseDocHash(hash) {
    const raw = String(hash || "").replace(/^#/, "");
    if (!raw.startsWith("doc=")) return null;
    const params = new URLSearchParams(raw);
    const id = params.get("doc");
    return id ? { id: id, terms: params.getAll("term").slice(0, MAX_LINK_TERMS) } : null;
  }

  /**
   * The paragraphs of `text` (one per "\n"; blank ones dropped), each a list of {text, mark}
   * parts, marked where `spans` ([start, end) offsets in code points, as the API sends them)
   * say.
   */
  function splitHighlights(text, spans) {
    const chars = Array.from(String(text));
    const marked = new Uint8Array(chars.length);
    for (const span of Array.isArray(spans) ? spans : []) {
      const start = Math.max(0, Number(span[0]));
      const end = Math.min(chars.length, Number(span[1]));
      for (let i = start; i < end; i++) marked[i] = 1;
    }
    const paragraphs = [];
    let parts = [];
    let at = 0;
    const flush = function () {
      if (parts.some(function (p) { return p.text.trim(); })) paragraphs.push(parts);
      parts = [];
    };
    while (at < chars.length) {
      if (chars[at] === "\n") {
        flush();
        at++;
        continue;
      }
      let end = at;
      while (end < chars.length && chars[end] !== "\n" && marked[end] === marked[at]) end++;
      parts.push({ text: chars.slice(at, end).join(""), mark: marked[at] === 1 });
      at = end;
    }
    flush();
    return paragraphs;
  }

  // ------------------------------------------------------------------ DOM helpers

  function el(tag, attrs, children) {
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

  function srOnly(text) {
    return el("span", { className: "sr-only", text: text });
  }

  function byId(id) {
    return document.getElementById(id);
  }

  function clear(node) {
    node.replaceChildren();
  }

  function fmt(value, digits) {
    return typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "–";
  }

  // ------------------------------------------------------------------ API access

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  /** The label a searcher sees on the field ``name`` of the open panel (null: none). */
  function fieldLabel(name) {
    const panel = document.querySelector('[role="tabpanel"]:not([hidden])');
    const input = panel ? panel.querySelector('[name="' + CSS.escape(String(name)) + '"]') : null;
    const label = input && input.id ? document.querySelector('label[for="' + input.id + '"]') : null;
    return label ? label.textContent.trim() : null;
  }

  /** The API's error as one readable line: its field errors under the page's own labels
   * ("Per page: should be at most 1000"), else its detail sentence. */
  function formatDetail(data) {
    if (!data || typeof data !== "object") return null;
    const errors = Array.isArray(data.errors) ? data.errors : [];
    const fields = errors.map(function (item) {
      const loc = item && Array.isArray(item.loc) ? item.loc : [];
      const label = loc.length === 2 && loc[0] === "body" ? fieldLabel(loc[1]) : null;
      if (!label) return null;
      const msg = String(item.msg || "is not valid")
        .replace(/^Value error, /, "")
        .replace(/^Input should be less than or equal to /, "should be at most ")
        .replace(/^Input should be greater than or equal to /, "should be at least ")
        .replace(/^Input should be /, "should be ");
      return label + ": " + msg;
    });
    if (fields.length && fields.every(function (f) { return f !== null; })) return fields.join("; ");
    if (typeof data.detail === "string") return data.detail;
    return data.detail !== undefined ? JSON.stringify(data.detail) : null;
  }

  /** What went wrong, in a searcher's words where the page knows them better than the API. */
  function errorMessage(response, data) {
    if (response.status === 413) {
      return "Your text is too long: shorten it" +
        (pageLimits.maxQueryChars ? " to at most " + pageLimits.maxQueryChars + " characters." : ".");
    }
    if (response.status === 503 && response.headers.get("Retry-After")) {
      return "The service is busy: try again in a few seconds.";
    }
    const detail = formatDetail(data) || response.statusText || "no details";
    return "Error " + response.status + ": " + detail;
  }

  const pageLimits = { maxQueryChars: null };

  async function callApi(method, path, body) {
    const init = { method: method, headers: { Accept: "application/json" } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (exc) {
      throw new ApiError(0, "The service cannot be reached (" + exc.message + "). Is it running?");
    }
    const raw = await response.text();
    let data = null;
    try {
      data = raw ? JSON.parse(raw) : null;
    } catch (_exc) {
      data = null;
    }
    if (!response.ok) {
      throw new ApiError(response.status, errorMessage(response, data));
    }
    return data;
  }

  function showAlert(message) {
    const box = byId("alert");
    box.textContent = message;
    box.hidden = false;
  }

  function hideAlert() {
    const box = byId("alert");
    box.textContent = "";
    box.hidden = true;
  }

  function showDegraded(id, response) {
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

  // ------------------------------------------------------------------ tabs

  /** The open tab ("search", "translate"): the id of its tab button without "tab-". */
  function selectTab(name, focus) {
    const tabs = Array.from(document.querySelectorAll("[role=tab]"));
    const tab = byId("tab-" + name) || tabs[0];
    for (const t of tabs) {
      const selected = t === tab;
      t.setAttribute("aria-selected", selected ? "true" : "false");
      t.tabIndex = selected ? 0 : -1;
      byId(t.getAttribute("aria-controls")).hidden = !selected;
    }
    if (focus) tab.focus();
  }

  function setupTabs() {
    const tabs = Array.from(document.querySelectorAll("[role=tab]"));
    function select(tab, focus) {
      selectTab(tab.id.replace(/^tab-/, ""), focus);
      // the open tab is part of the address (a reload or a shared link opens it again)
      const params = new URLSearchParams(window.location.search);
      if (tab.id === "tab-search") params.delete("tab");
      else params.set("tab", tab.id.replace(/^tab-/, ""));
      const query = params.toString() ? "?" + params.toString() : window.location.pathname;
      window.history.replaceState(null, "", query + window.location.hash);
    }
    for (const tab of tabs) {
      tab.addEventListener("click", function () { select(tab, true); });
      tab.addEventListener("keydown", function (event) {
        const at = tabs.indexOf(tab);
        let next = null;
        if (event.key === "ArrowRight" || event.key === "ArrowDown") next = tabs[(at + 1) % tabs.length];
        else if (event.key === "ArrowLeft" || event.key === "ArrowUp") next = tabs[(at - 1 + tabs.length) % tabs.length];
        else if (event.key === "Home") next = tabs[0];
        else if (event.key === "End") next = tabs[tabs.length - 1];
        if (next) {
          event.preventDefault();
          select(next, true);
        }
      });
    }
  }

  // ------------------------------------------------------------------ languages (/readyz)

  const LANGUAGE_NAMES = { de: "German", zh: "Chinese", en: "English" };

  /** The query inputs take at most the server's max_query_chars (index.html has a default). */
  function setMaxQueryChars(limit) {
    if (!Number.isInteger(limit) || limit < 1) return;
    pageLimits.maxQueryChars = limit;
    for (const id of ["search-query", "suggest-sentence"]) byId(id).maxLength = limit;
  }

  async function loadLanguages(attempt) {
    const status = byId("service-status");
    let body = null;
    try {
      const response = await fetch("/readyz", { headers: { Accept: "application/json" } });
      body = await response.json();
    } catch (exc) {
      status.textContent = "The service cannot be reached (" + exc.message + ").";
      return;
    }
    if (!body || typeof body !== "object") {
      status.textContent = "The service gave an unreadable readiness answer.";
      return;
    }
    setMaxQueryChars(body.max_query_chars);
    if (body.detail === "still loading" && attempt < 30) {
      status.textContent = "The service is still loading its models…";
      window.setTimeout(function () { loadLanguages(attempt + 1); }, 1000);
      return;
    }
    const models = body.models && typeof body.models === "object" ? body.models : {};
    const langs = Object.keys(models).sort();
    for (const select of document.querySelectorAll(".lang-select")) {
      clear(select);
      for (const lang of langs) {
        const name = LANGUAGE_NAMES[lang] || lang;
        select.append(el("option", { value: lang, text: name + " (" + lang + ")" }));
      }
    }
    if (langs.length === 0) {
      status.textContent = "No language is loaded: " + String(body.detail || "not ready") + ".";
      const missing = Array.isArray(body.missing) ? body.missing.join("; ") : "";
      showAlert("The service is not ready: " + String(body.detail || "") + (missing ? " (" + missing + ")" : ""));
      return;
    }
    const names = langs.map(function (l) { return (LANGUAGE_NAMES[l] || l) + " (" + l + ")"; });
    let text = "Languages loaded: " + names.join(", ") + ".";
    if (!body.ready) text += " Not ready: " + String(body.detail) + ".";
    if (!body.pool_index) text += " No sentence pool: the translator tab cannot answer.";
    status.textContent = text;
    restoreSearch(); // the languages are there: a reloaded or shared search can run
  }

  // ------------------------------------------------------------------ search tab

  const searchState = { request: null, offset: 0, seq: 0, shown: null };

  /** The address of a search and its page: ?q=…&lang=…&method=…[&k=…][&page=…]. */
  function searchAddress(request, offset) {
    const params = new URLSearchParams();
    params.set("q", request.query);
    params.set("lang", request.lang);
    params.set("method", request.method);
    if (request.k !== 10) params.set("k", String(request.k));
    if (request.feedback) params.set("fb", "1");
    const page = Math.floor(offset / request.k) + 1;
    if (page > 1) params.set("page", String(page));
    return "?" + params.toString();
  }

  /** Show the search the address names (a reload, a shared link, back and forward). */
  function restoreSearch() {
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
    byId("search-feedback").checked = params.get("fb") === "1";
    const request = readSearchForm();
    const page = Math.max(1, parseInt(params.get("page") || "1", 10) || 1);
    const offset = (page - 1) * request.k;
    if (searchState.shown === searchAddress(request, offset)) return; // on screen already
    searchState.request = request;
    runSearch(offset, false, false);
  }
  const QUERY_ECHO_CHARS = 80;

  function readSearchForm() {
    const k = parseInt(byId("search-k").value, 10);
    return {
      query: byId("search-query").value,
      lang: byId("search-lang").value,
      method: byId("search-method").value,
      k: Number.isFinite(k) ? k : 10,
      feedback: byId("search-feedback").checked,
    };
  }

  /** The user's text for a heading: cut at QUERY_ECHO_CHARS, the whole of it in the title. */
  function queryEcho(text) {
    return el("span", { className: "query-echo", title: String(text), text: truncate(text, QUERY_ECHO_CHARS) });
  }

  /** The translation's words, the ones in `matched` in <mark>. */
  function markedTranslation(translation, matched) {
    const set = new Set(matched.map(function (t) { return String(t).toLowerCase(); }));
    const line = el("span", { className: "translation" });
    String(translation).split(/\s+/).filter(Boolean).forEach(function (word, at) {
      if (at > 0) line.append(" ");
      line.append(set.has(word.toLowerCase()) ? el("mark", { text: word }) : word);
    });
    return line;
  }

  /** How a hit was retrieved, with its numbers (BM25 weights, model and retrieval scores). */
  function renderExplanation(explanation) {
    const box = el("div", { className: "explanation-body" });
    if (!explanation || typeof explanation !== "object") {
      box.append(el("p", { text: "No explanation was returned." }));
      return box;
    }
    if (Array.isArray(explanation.sentences)) { // BOW-FD: each sentence's best derivation
      for (const s of explanation.sentences) {
        const matched = Array.isArray(s.matched) ? s.matched : [];
        const terms = matched.map(function (m) { return m.term; });
        box.append(
          el("p", { className: "derivation" }, [
            el("span", { className: "label", text: "Translation that retrieved it" + (explanation.sentences.length > 1 ? " (sentence " + (Number(s.sentence) + 1) + ")" : "") + ": " }),
            markedTranslation(s.translation || "", terms),
          ]),
          el("p", { className: "matched" }, [
            "Matched words: ",
            matched.length
              ? matched.map(function (m) { return m.term + " (BM25 " + fmt(m.bm25, 2) + (m.count > 1 ? ", ×" + m.count : "") + ")"; }).join(", ")
              : "none",
          ]),
          el("p", { className: "scores", text: "Translation model " + fmt(s.smt, 2) + " + retrieval " + fmt(s.ir, 2) + " = " + fmt(s.score, 2) }),
        );
      }
    } else if (explanation.feedback && Array.isArray(explanation.matched)) { // expanded query
      const added = new Set((explanation.added || []).map(String));
      const words = explanation.matched.map(function (m) {
        return m.term + " (" + fmt(m.weight, 3) + (added.has(String(m.term)) ? ", from feedback" : "") + ")";
      });
      box.append(
        el("p", { className: "derivation" }, [
          el("span", { className: "label", text: "Best translation of the query: " }),
          markedTranslation(explanation.translation || "", explanation.matched.map(function (m) { return m.term; })),
        ]),
        el("p", { className: "matched", text: "Matched words of the expanded query: " + (words.length ? words.join(", ") : "none") }),
      );
    } else if (Array.isArray(explanation.matched)) { // DT: the 1-best translation
      const terms = explanation.matched.map(String);
      box.append(
        el("p", { className: "derivation" }, [
          el("span", { className: "label", text: "Translation that retrieved it: " }),
          markedTranslation(explanation.translation || "", terms),
        ]),
        el("p", { className: "matched", text: "Matched words: " + (terms.length ? terms.join(", ") : "none") }),
      );
    } else if (explanation.terms && typeof explanation.terms === "object") { // PSQ
      const list = el("ul", { className: "psq-terms" });
      for (const [source, found] of Object.entries(explanation.terms)) {
        const parts = Object.entries(found || {}).map(function (e) { return e[0] + " (" + fmt(e[1], 3) + ")"; });
        list.append(el("li", {}, [el("span", { className: "label", text: source + " → " }), parts.join(", ")]));
      }
      box.append(el("p", { text: "Query words and the English translations found in this document, with Pr(e|f):" }), list);
    } else {
      box.append(el("pre", { text: JSON.stringify(explanation, null, 2) }));
    }
    return box;
  }

  /** The translation that found a document, for a searcher: the words only, no numbers. */
  function renderFoundTranslation(explanation) {
    const box = el("div", { className: "found-body" });
    if (!explanation || typeof explanation !== "object") return box;
    if (Array.isArray(explanation.sentences)) { // BOW-FD: per sentence, the best derivation
      const several = explanation.sentences.length > 1;
      for (const s of explanation.sentences) {
        const terms = (Array.isArray(s.matched) ? s.matched : []).map(function (m) { return m.term; });
        box.append(el("p", { className: "derivation" }, [
          several ? el("span", { className: "label", text: "Sentence " + (Number(s.sentence) + 1) + ": " }) : null,
          markedTranslation(s.translation || "", terms),
        ]));
      }
    } else if (explanation.feedback && Array.isArray(explanation.matched)) { // expanded query
      const terms = explanation.matched.map(function (m) { return String(m.term); });
      const added = (explanation.added || []).map(String);
      box.append(el("p", { className: "derivation" }, [
        markedTranslation(explanation.translation || "", terms),
      ]));
      if (added.length) {
        box.append(el("p", { className: "matched", text: "Also matched, from feedback: " + added.join(", ") }));
      }
    } else if (Array.isArray(explanation.matched)) { // DT: the query's 1-best translation
      box.append(el("p", { className: "derivation" }, [
        markedTranslation(explanation.translation || "", explanation.matched.map(String)),
      ]));
    } else if (explanation.terms && typeof explanation.terms === "object") { // PSQ
      const list = el("ul", { className: "psq-terms" });
      for (const [source, found] of Object.entries(explanation.terms)) {
        list.append(el("li", {}, [
          el("span", { className: "label", text: source + " → " }),
          Object.keys(found || {}).join(", "),
        ]));
      }
      box.append(list);
    }
    return box;
  }

  // What each listed hit was found by (id -> {explanation, score, query, method}), for the
  // document view: kept from the search, so going to a document and back needs no new search.
  const foundBy = new Map();

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
      ]),
      snippet,
      toggle,
      panel,
    ]);
  }

  function renderMeta(dl, rows) {
    clear(dl);
    for (const [term, value] of rows) {
      dl.append(el("dt", { text: term }), el("dd", { text: value }));
    }
  }

  function timingText(response) {
    const t = response.timings || {};
    return "decode " + fmt(t.decode_ms, 0) + " ms, rank " + fmt(t.rank_ms, 0) + " ms, total " +
      fmt(t.total_ms, 0) + " ms" + (response.cached ? " (translation from cache)" : "");
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
      const response = await callApi("POST", "/v1/search", body);
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

  function setupSearch() {
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
  }

  // ------------------------------------------------------------------ document view (#doc=…)

  const docState = { seq: 0, fromResults: false, lastId: null, pageTitle: document.title };

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

  function route() {
    const target = parseDocHash(window.location.hash);
    if (target) showDocView(target);
    else showMainView();
  }

  function setupDocView() {
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
    window.addEventListener("popstate", restoreSearch);
  }

  // ------------------------------------------------------------------ translator tab

  const suggestState = { seq: 0, shown: null };

  /** Suggestions for the sentence the address names (?tab=translate&s=…&lang=…). */
  function restoreSuggest(params) {
    const sentence = params.get("s");
    if (!sentence || sentence === suggestState.shown) return;
    byId("suggest-sentence").value = sentence;
    const lang = params.get("lang");
    const select = byId("suggest-lang");
    if (lang && Array.from(select.options).some(function (o) { return o.value === lang; })) select.value = lang;
    runSuggest(false);
  }

  function renderDiff(translation, reference) {
    const ops = wordDiff(translation, reference);
    const line = el("p", { className: "diff" });
    for (const run of diffRuns(ops)) {
      if (run.lead) line.append(run.lead);
      if (run.op === "same") {
        line.append(run.text);
      } else if (run.op === "ins") {
        line.append(el("ins", { className: "diff-ins" }, [srOnly("[added: "), run.text, srOnly("]")]));
      } else {
        line.append(el("del", { className: "diff-del" }, [srOnly("[removed: "), run.text, srOnly("]")]));
      }
    }
    return [line, el("p", { className: "diff-summary", text: diffSummary(ops) })];
  }

  function renderSuggestion(item, best) {
    const foundBy = Array.isArray(item.found_by) ? item.found_by : [];
    const details = el("details", { className: "found-by details" }, [
      el("summary", { text: "Details: found by " + foundBy.length + (foundBy.length === 1 ? " translation" : " translations") }),
      el("p", { className: "scores" }, [el("span", { className: "score", text: "Score " + fmt(item.score, 4) })]),
      el("ul", {}, foundBy.map(function (f) {
        return el("li", {
          text: "#" + f.rank + " “" + f.translation + "”: Pr(t|s) " + fmt(f.pr_t, 3) + ", cosine " +
            fmt(f.cosine, 3) + ", edit similarity " + fmt(f.levenshtein, 3) + ", Pr(d|t) " + fmt(f.pr_d_given_t, 4),
        });
      })),
    ]);
    // the sentence opens its page (where a translator reads it in context), else itself
    // on its page, the sentence's words are marked: the translator finds it in its context
    const target = item.page_id ? String(item.page_id) : String(item.id || "");
    const words = item.page_id ? String(item.text || "").split(/\s+/).filter(function (w) { return /[\p{L}\p{N}]/u.test(w); }) : [];
    const link = el("a", { className: "reference-link", href: docHash(target, words), text: String(item.text || "") });
    link.addEventListener("click", function (event) {
      if (event.button === 0 && !event.ctrlKey && !event.metaKey && !event.shiftKey) docState.fromResults = true;
    });
    return el("li", { className: "result suggestion" }, [
      el("p", { className: "reference" }, [link]),
      el("p", { className: "result-meta" }, [
        item.page_title ? el("span", { className: "page-title", text: "on “" + String(item.page_title) + "”" }) : null,
        item.page_title ? " · " : null,
        el("span", { className: "doc-id", text: String(item.id || "") }),
      ]),
      el("div", { className: "diff-box" }, [
        el("span", { className: "label", text: "Differences to the best translation:" }),
      ].concat(renderDiff(best, String(item.text || "")))),
      details,
    ]);
  }

  /** Remove every trace of the last suggestion (translations, legend, sentences, summary). */
  function clearSuggest() {
    clear(byId("suggest-results"));
    byId("suggest-summary").textContent = "";
    clear(byId("suggest-translations"));
    byId("suggest-translations").hidden = true;
    byId("suggest-legend").hidden = true;
    showDegraded("suggest-degraded", null);
  }

  async function runSuggest(record) {
    const seq = ++suggestState.seq;
    const sentence = byId("suggest-sentence").value;
    if (record !== false && sentence.trim()) { // the translator's sentence is an address too
      const params = new URLSearchParams({ tab: "translate", s: sentence, lang: byId("suggest-lang").value });
      const address = "?" + params.toString();
      if (window.location.search !== address) window.history.pushState(null, "", address);
    }
    suggestState.shown = sentence;
    if (!sentence.trim()) {
      clearSuggest();
      showAlert("Type a sentence first.");
      byId("suggest-sentence").focus();
      return;
    }
    const k = parseInt(byId("suggest-k").value, 10);
    const request = {
      query: sentence,
      lang: byId("suggest-lang").value,
      nbest: parseInt(byId("suggest-nbest").value, 10),
      k: Number.isFinite(k) ? k : 10,
      levenshtein: byId("suggest-levenshtein").checked,
    };
    const form = byId("suggest-form");
    const summary = byId("suggest-summary");
    const results = byId("suggest-results");
    hideAlert();
    form.setAttribute("aria-busy", "true");
    summary.textContent = "Looking for reference sentences…";
    try {
      const response = await callApi("POST", "/v1/suggest", request);
      if (seq !== suggestState.seq) return;
      showDegraded("suggest-degraded", response);
      const translations = Array.isArray(response.translations) ? response.translations : [];
      const best = translations.length ? String(translations[0].text) : "";
      const box = byId("suggest-translations");
      clear(box);
      box.append(
        el("h2", { className: "small-heading", text: "Translations used to search" }),
        el("ol", { className: "nbest" }, translations.map(function (t) {
          return el("li", {}, [el("span", { text: String(t.text) }), el("span", { className: "prob", text: " Pr " + fmt(t.pr_t, 3) })]);
        })),
        el("details", { className: "details" }, [
          el("summary", { text: "Details" }),
          el("p", { className: "timings", text: "Weights " + String(response.weights_version || "") + "; " + timingText(response) }),
          el("p", { className: "signature", text: "Scorer " + String(response.signature || "") }),
        ]),
      );
      box.hidden = false;
      const items = Array.isArray(response.results) ? response.results : [];
      clear(results);
      for (const item of items) results.append(renderSuggestion(item, best));
      byId("suggest-legend").hidden = items.length === 0;
      const lead = items.length
        ? items.length + (items.length === 1 ? " reference sentence" : " reference sentences") + " for “"
        : "No reference sentences for “";
      summary.replaceChildren(lead, queryEcho(sentence), "”");
    } catch (exc) {
      if (seq !== suggestState.seq) return;
      clearSuggest();
      showAlert(exc instanceof ApiError ? exc.message : "Unexpected error: " + exc);
    } finally {
      if (seq === suggestState.seq) form.removeAttribute("aria-busy");
    }
  }

  function setupSuggest() {
    byId("suggest-form").addEventListener("submit", function (event) {
      event.preventDefault();
      runSuggest(true);
    });
  }

  // ------------------------------------------------------------------ start

  window.ClirPage = Object.freeze({
    decodeEntities: decodeEntities,
    parseSnippet: parseSnippet,
    tokenize: tokenize,
    wordDiff: wordDiff,
    diffRuns: diffRuns,
    diffSummary: diffSummary,
    truncate: truncate,
    explanationTerms: explanationTerms,
    docHash: docHash,
    parseDocHash: parseDocHash,
    splitHighlights: splitHighlights,
  });

  function start() {
    setupTabs();
    setupSearch();
    setupSuggest();
    setupDocView();
    route(); // a #doc= link opened in a new tab or reloaded
    loadLanguages(0); // then the search the address names (restoreSearch)
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
