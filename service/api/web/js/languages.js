/*
 * What /readyz says is loaded: the language menus, the service status line and the inputs'
 * maxlength (max_query_chars); retried while the service is still loading.
 */

import { pageLimits } from "./api.js";
import { byId, clear, el, showAlert } from "./dom.js";
import { restoreSearch } from "./search.js";

const LANGUAGE_NAMES = { de: "German", zh: "Chinese", en: "English" };

/** The query inputs take at most the server's max_query_chars (index.html has a default). */
function setMaxQueryChars(limit) {
  if (!Number.isInteger(limit) || limit < 1) return;
  pageLimits.maxQueryChars = limit;
  for (const id of ["search-query", "suggest-sentence"]) byId(id).maxLength = limit;
}

/** The feedback switch: hidden where the service offers no feedback, else its default. */
function setFeedback(feedback) {
  if (!feedback || typeof feedback !== "object") return;
  pageLimits.feedback = { offered: feedback.offered !== false, default: feedback.default === true };
  byId("search-feedback").closest(".field").hidden = !pageLimits.feedback.offered;
  byId("search-feedback").checked = pageLimits.feedback.default;
}

/** The dense reader's switch: shown where the index has vectors, else hidden and off. */
function setDense(dense) {
  const offered = !!dense && typeof dense === "object" && dense.available === true;
  pageLimits.dense = { offered: offered, default: offered && dense.default === true };
  byId("search-dense").closest(".field").hidden = !offered;
  byId("search-dense").checked = pageLimits.dense.default;
}

export async function loadLanguages(attempt) {
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
  setFeedback(body.feedback);
  setDense(body.dense);
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
