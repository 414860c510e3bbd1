/*
 * The CLIR web page: a search tab (POST /v1/search, Hieber & Riezler 2015, §3: BOW-FD, DT,
 * PSQ with the derivation that retrieved each document) and a translator tab (POST /v1/suggest,
 * TR paper: reference sentences from the pool, each with its word-level differences to the query's
 * 1-best translation). This module starts the page; index.html loads it as the one module
 * script, and it imports the rest:
 *
 *   text.js         entity decoding, snippet parsing, truncation, highlight splitting (pure)
 *   diff.js         tokenising and the word diff (pure)
 *   dom.js          building the DOM from text; the alert and degraded notices
 *   api.js          calls to the REST API and their errors, in a searcher's words
 *   explanation.js  a hit's matched terms and its explanation, with or without numbers
 *   tabs.js         the search and translator tabs
 *   languages.js    what /readyz says is loaded: the language menus, the inputs' maxlength
 *   search.js       the search tab, and the search as the page's address (?q=…)
 *   translator.js   the translator tab (?tab=translate&s=…)
 *   docview.js      the document view (#doc=<id>&term=…) and the links to it
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
 * Test hook: the pure helpers (entity decoding, snippet parsing, tokenising, the word diff,
 * truncation, the explanation's terms, the #doc= links and the highlight splitting) are
 * exposed, frozen, as window.ClirPage so that the browser test (tests/api/test_page.py) can
 * check them on hand-computed examples through execute_script. Nothing on the page uses it.
 */

import { diffRuns, diffSummary, tokenize, wordDiff } from "./diff.js";
import { docHash, parseDocHash, route, setupDocView } from "./docview.js";
import { explanationTerms } from "./explanation.js";
import { loadLanguages } from "./languages.js";
import { setupSearch } from "./search.js";
import { setupTabs } from "./tabs.js";
import { decodeEntities, parseSnippet, splitHighlights, truncate } from "./text.js";
import { setupSuggest } from "./translator.js";

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
