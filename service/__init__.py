"""Cross-lingual retrieval service: SCFG translation forests, bag-of-words forced decoding
(Hieber & Riezler 2015, ``../shared/papers/001_625ca12d9b1f565c.txt``), and translation
retrieval for translators (``002_8198c4b36f086708.txt``)."""

__version__ = "0.1.0"
