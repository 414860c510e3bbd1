"""German how-to questions searched as the instructions that answer them.

A searcher asks "Wie füge ich eine Tabelle ein?"; the help page that answers says "Fügen Sie
eine Tabelle ein" ("Insert a table"). The grammar learnt its German from such instructions and
from UI strings ("Tabelle einfügen"), hardly ever from the first person singular of a question:
"füge" alone is translated "add", and no rule links "füge … ein" to "insert" (not one of the
300 best translations of that question has it), while "Fügen Sie eine Tabelle ein." is
translated "insert a table .". Hieber & Riezler (2015, §1) treat the query's translation as a
means to retrieval, not an end; so for search (not for ``/v1/translate``), a German question
of the form

* ``wie``/``wo`` V₁ ``ich``/``man`` REST ``?`` — V₁ a verb in the first or third person
  singular — is searched as V-inf ``sie`` REST ``.`` (the formal imperative, which is the
  infinitive: "wie füge ich X ein ?" → "fügen sie X ein ."; a separable particle stays at the
  end, where the imperative has it too; "wo aktiviere ich X ?" → "aktivieren sie X .");
* ``wie``/``wo`` MODAL ``ich``/``man`` REST ``?`` ("wie kann ich X einfügen ?"), and the
  yes/no question MODAL ``ich``/``man`` REST ``?`` ("kann ich X einfügen ?"), are searched as
  REST ``.`` ("X einfügen .", the form of a UI string).

First-person possessives become the formal ones ("meine" → "ihre"). The infinitive is chosen
among the regular forms of V₁ ("füge" → "fügen", "ändere" → "ändern", "wechsle" →
"wechseln", "fügt" → "fügen", "arbeitet" → "arbeiten") as the one the grammar knows and the
lexical table counts most; a question whose verb has no known infinitive (≥ ``min_count``
links) is left as it is, and so is every other sentence. Tokens are the lowercased output of
:func:`service.text.tokenize.preprocess`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

QUESTION_WORDS = frozenset({"wie", "wo"})
MODALS = frozenset({"kann", "könnte", "muss", "soll", "sollte", "darf"})
SUBJECTS = frozenset({"ich", "man"})
POSSESSIVES = {
    "mein": "ihr", "meine": "ihre", "meinen": "ihren", "meinem": "ihrem", "meiner": "ihrer",
    "meines": "ihres",
}  # fmt: skip


def infinitive_candidates(verb: str, subject: str) -> list[str]:
    """The regular infinitives a present-tense ``verb`` of ``subject`` ("ich": first person,
    "man": third person singular) may come from, most common pattern first."""
    out: list[str] = []
    if subject == "ich" and verb.endswith("e") and len(verb) > 2:
        out.append(verb + "n")  # füge → fügen
        if verb.endswith(("ere", "ele")):
            out.append(verb[:-1] + "n")  # ändere → ändern
        if verb.endswith(("le", "re")):
            out.append(verb[:-2] + ("eln" if verb.endswith("le") else "ern"))  # wechsle
    elif subject == "man" and verb.endswith("t") and len(verb) > 2:
        out.append(verb[:-1] + "en")  # fügt → fügen
        out.append(verb[:-1] + "n")  # ändert → ändern
        if verb.endswith("et"):
            out.append(verb[:-2] + "en")  # arbeitet → arbeiten
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class QuestionRewriter:
    """Rewrites German how-to questions into instructions (see the module docstring).

    ``count(word)``: how often the model saw ``word`` as a source word (0 if the grammar does
    not know it); an infinitive must reach ``min_count``.
    """

    count: Callable[[str], int]
    min_count: int = 10

    def infinitive(self, verb: str, subject: str) -> str | None:
        """The known infinitive of ``verb`` (the most counted candidate), or None."""
        best, best_count = None, self.min_count - 1
        for cand in infinitive_candidates(verb, subject):
            c = self.count(cand)
            if c > best_count:
                best, best_count = cand, c
        return best

    def rewrite(self, tokens: Sequence[str]) -> list[str] | None:
        """The instruction form of question ``tokens``, or None if they are not such a
        question (or its verb is unknown)."""
        if len(tokens) >= 3 and tokens[0] in MODALS and tokens[1] in SUBJECTS:
            tokens = ["wie", *tokens]  # "kann ich X V ?" asks what "wie kann ich X V ?" asks
        if len(tokens) < 4 or tokens[0] not in QUESTION_WORDS or tokens[2] not in SUBJECTS:
            return None
        verb, subject = tokens[1], tokens[2]
        rest = [POSSESSIVES.get(t, t) for t in tokens[3:]]
        while rest and rest[-1] in ("?", "."):
            rest.pop()
        if not rest:
            return None
        if verb in MODALS:
            return [*rest, "."]
        inf = self.infinitive(verb, subject)
        if inf is None:
            return None
        return [inf, "sie", *rest, "."]

    def __call__(self, tokens: Sequence[str]) -> list[str]:
        """``tokens`` rewritten if they are such a question, else as they are."""
        out = self.rewrite(tokens)
        return list(tokens) if out is None else out


# Source languages whose questions are rewritten (Chinese questions need no rewrite: their
# question words, 如何/怎么, are translated "how", an English stopword).
QUESTION_LANGS = frozenset({"de"})
