/*
 * The translator tab (POST /v1/suggest, translation retrieval): reference sentences from
 * the pool, each with its word-level differences to the query's 1-best translation; the
 * sentence is part of the address (?tab=translate&s=…&lang=…).
 */

import { ApiError, busyText, callApi } from "./api.js";
import { diffRuns, diffSummary, wordDiff } from "./diff.js";
import { docHash, docState } from "./docview.js";
import {
  byId,
  clear,
  el,
  fmt,
  hideAlert,
  queryEcho,
  showAlert,
  showDegraded,
  srOnly,
  timingText,
} from "./dom.js";

const suggestState = { seq: 0, shown: null };

/** Suggestions for the sentence the address names (?tab=translate&s=…&lang=…). */
export function restoreSuggest(params) {
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
    el("p", { className: "scores" }, [
      el("span", { className: "score", text: "Score " + fmt(item.score, 4) }),
      // the dense reader's reading of the best translation against the sentence (when it reread it)
      typeof item.dense === "number" ? el("span", { className: "dense", text: " · meaning similarity " + fmt(item.dense, 3) }) : null,
    ]),
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
    dense: byId("suggest-dense").checked,
  };
  const form = byId("suggest-form");
  const summary = byId("suggest-summary");
  const results = byId("suggest-results");
  hideAlert();
  form.setAttribute("aria-busy", "true");
  summary.textContent = "Looking for reference sentences…";
  try {
    const response = await callApi("POST", "/v1/suggest", request, function (seconds) {
      if (seq === suggestState.seq) summary.textContent = busyText(seconds);
    });
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

export function setupSuggest() {
  byId("suggest-form").addEventListener("submit", function (event) {
    event.preventDefault();
    runSuggest(true);
  });
}
