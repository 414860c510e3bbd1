/*
 * The word-level diff of a translation and a reference sentence (the translator tab):
 * tokens, a longest common subsequence over them, runs of one kind, and a summary.
 */

const TOKEN = /[\p{L}\p{M}\p{N}]+(?:['’][\p{L}\p{M}\p{N}]+)*|[^\s\p{L}\p{M}\p{N}]/gu;

/**
 * Words and single punctuation marks of `text`, each {text, norm, space}: norm is the
 * NFKC lower-cased form that the diff compares, space says whether whitespace preceded it.
 */
export function tokenize(text) {
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
export function wordDiff(before, after) {
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
export function diffRuns(ops) {
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
export function diffSummary(ops) {
  const added = ops.filter(function (o) { return o.op === "ins"; }).length;
  const removed = ops.filter(function (o) { return o.op === "del"; }).length;
  if (added === 0 && removed === 0) return "Same words as the translation.";
  const words = function (k) { return k + (k === 1 ? " word" : " words"); };
  const parts = [];
  if (added > 0) parts.push(words(added) + " added");
  if (removed > 0) parts.push(words(removed) + " removed");
  return parts.join(", ") + " compared with the translation.";
}
