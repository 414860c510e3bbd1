"""Cross-lingual retrieval service: SCFG translation forests, bag-of-words forced decoding
(Hieber & Riezler 2015), and translation retrieval for translators (the TR paper;
docs/references.md lists the papers)."""

__version__ = "0.1.0"
