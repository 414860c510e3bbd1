"""Text processing: normalisation, tokenisation per language, sentence splitting, cleaning.

Hieber & Riezler 2015, §5 "Data and Systems" and §3 "Multi-Sentence Queries": the same
:func:`normalize` + tokenizer (:func:`preprocess`) is applied to both sides of the training
corpus and to queries; :func:`tokenize_en` is also the tokenizer of the document index, so a
target word of the grammar and an index term are the same string.
"""

from service.text.normalize import NormalizationCounts, clean_unicode, normalize
from service.text.sentences import split_sentences
from service.text.tokenize import (
    TOKENIZERS,
    ChineseTokenizer,
    MosesWordTokenizer,
    Tokenizer,
    get_tokenizer,
    preprocess,
    tokenize_en,
)

__all__ = [
    "TOKENIZERS",
    "ChineseTokenizer",
    "MosesWordTokenizer",
    "NormalizationCounts",
    "Tokenizer",
    "clean_unicode",
    "get_tokenizer",
    "normalize",
    "preprocess",
    "split_sentences",
    "tokenize_en",
]
