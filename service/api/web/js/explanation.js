/*
 * A hit's explanation (service/retrieval/explain.py, one shape per method: BOW-FD's
 * per-sentence derivations, DT's 1-best translation, PSQ's term translations, the feedback
 * expansion): its matched terms, and its rendering with numbers (Details) or without (the
 * document view).
 */

import { el, fmt } from "./dom.js";

/**
 * The English terms a hit's explanation says matched the document, each once, in order
 * (the page's copy of the records' matched_terms in service/retrieval/explain.py): DT's
 * "matched", BOW-FD's per-sentence "matched" terms, PSQ's translations found in the document.
 */
export function explanationTerms(explanation) {
  const out = [];
  if (!explanation || typeof explanation !== "object") return out;
  if (explanation.feedback && Array.isArray(explanation.matched)) { // feedback: {term, weight}
    for (const t of explanationTerms(explanation.first)) out.push(t); // the method's own
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
export function renderExplanation(explanation) {
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
    if (explanation.first) { // mixed: the method's own explanation, then the expanded query's
      box.append(renderExplanation(explanation.first));
      box.append(el("p", { className: "matched", text: "Matched words of the expanded query: " + (words.length ? words.join(", ") : "none") }));
      return box;
    }
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
export function renderFoundTranslation(explanation) {
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
    if (explanation.first) box.append(renderFoundTranslation(explanation.first));
    else box.append(el("p", { className: "derivation" }, [markedTranslation(explanation.translation || "", terms)]));
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
