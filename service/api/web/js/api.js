/*
 * The REST API of the same origin: one call with its errors as ApiError, each error
 * message written for a searcher (the page's own field labels, too long, busy).
 */

export class ApiError extends Error {
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
  if ((response.status === 503 || response.status === 429) && response.headers.get("Retry-After")) {
    return "The service is busy: try again in a few seconds.";
  }
  const detail = formatDetail(data) || response.statusText || "no details";
  return "Error " + response.status + ": " + detail;
}

// The server's limits that error messages quote (languages.js sets them from /readyz).
export const pageLimits = {
  maxQueryChars: null,
  feedback: { offered: true, default: false },
  dense: { offered: false, default: false }, // the dense reader: where the index has vectors
};

// A busy service (503 or 429 with Retry-After) is asked again this many times, after the wait
// it names (at most BUSY_MAX_WAIT_S): a searcher should not have to press the button again.
const BUSY_RETRIES = 2;
const BUSY_MAX_WAIT_S = 10;

/** The seconds a busy answer asks to wait before trying again (null: not busy, or too long). */
export function busyWait(response) {
  if (response.status !== 503 && response.status !== 429) return null;
  const seconds = Number(response.headers.get("Retry-After"));
  return Number.isFinite(seconds) && seconds >= 0 && seconds <= BUSY_MAX_WAIT_S ? seconds : null;
}

/** What the page says while it waits for a busy service. */
export function busyText(seconds) {
  return "The service is busy: trying again in " + Math.max(1, Math.ceil(seconds)) + " s…";
}

/** Call the API; ``onBusy(seconds)`` is told before each wait when the service is busy and
 * the call is tried again (the caller shows it: "busy, trying again in 2 s"). */
export async function callApi(method, path, body, onBusy) {
  const init = { method: method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  for (let attempt = 0; ; attempt++) {
    try {
      response = await fetch(path, init);
    } catch (exc) {
      throw new ApiError(0, "The service cannot be reached (" + exc.message + "). Is it running?");
    }
    const wait = busyWait(response);
    if (wait === null || attempt >= BUSY_RETRIES) break;
    if (onBusy) onBusy(wait);
    await new Promise(function (resolve) { setTimeout(resolve, wait * 1000); });
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
