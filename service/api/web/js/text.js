/*
 * Text helpers without the DOM: the character references of HTML-escaped text, the
 * snippet's <mark> parts, truncation, and a document's paragraphs split at the server's
 * highlight spans.
 */

const NAMED_ENTITIES = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'" };

/** Decode the character references of HTML-escaped text (what Python's html.escape makes). */
export function decodeEntities(text) {
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
export function parseSnippet(snippet) {
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

/** `text` with its whitespace runs collapsed, cut at `max` characters (code points) with "…". */
export function truncate(text, max) {
  const chars = Array.from(String(text).replace(/\s+/g, " ").trim());
  if (chars.length <= max) return chars.join("");
  return chars.slice(0, max).join("").trimEnd() + "…";
}

/**
 * The paragraphs of `text` (one per "\n"; blank ones dropped), each a list of {text, mark}
 * parts, marked where `spans` ([start, end) offsets in code points, as the API sends them)
 * say.
 */
export function splitHighlights(text, spans) {
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
