"""The trained prose classifier: one sentence in, scores for the seven prose labels out.

A multinomial logistic regression over a sentence's word uni- and bigrams, its character 2-4
grams (which carry Chinese as well as English), a few context features (the speaker, whether the
sentence ends its message, whether it ends with a question mark, its first word) and the label
the cue patterns give it. It is trained offline by ``benchmarks/anchor_eval/train_classifier.py``
on the tuning half of the blind sentence labels; the weights ship beside this module as
``prose_weights.json`` and are read once, on first use.

Inference is pure Python and byte-identical across runs and ``PYTHONHASHSEED``: a feature is
looked up by its own text in the weights' vocabulary (no hash trick, so no Python ``hash()`` and
no collisions), weights are integers (quantised at training; sums of integers are exact), and the
best label is the highest score with ties going to the label earlier in ``LABELS``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
from itertools import repeat

from ..errors import RuleError

LABELS = ("decision", "rejected", "constraint", "question", "plan", "status", "noise")
WEIGHTS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prose_weights.json")
FORMAT = 2
MAX_CHARS = 600  # the labelled sentences are cut here; longer text is featurised by its start

_DIGITS = re.compile(r"\d")
_WORD = re.compile(r"\w+|[?？!！:：]")
_WORD_P, _BIGRAM_P, _CTX_P = "\x01", "\x02", "\x03"


def features(text: str, role: str = "assistant", last: bool | None = None, cue: str | None = None) -> list[str]:
    """The features of one sentence, as strings (repeats count).

    ``role``: who wrote it (``user`` or ``assistant``); ``last``: it ends its message (None when
    not known: no feature); ``cue``: the label the cue patterns give it (None: no feature).
    """
    low = _DIGITS.sub("0", " ".join(text[:MAX_CHARS].lower().split()))
    padded = f" {low} "
    n = len(padded)
    feats = [padded[i:i + 2] for i in range(n - 1)]
    feats += [padded[i:i + 3] for i in range(n - 2)]
    feats += [padded[i:i + 4] for i in range(n - 3)]
    words = _WORD.findall(low)
    feats += [_WORD_P + w for w in words]
    feats += [_BIGRAM_P + a + " " + b for a, b in zip(words, words[1:])]
    role = "user" if role == "user" else "assistant"
    feats.append(_CTX_P + "role=" + role)
    if last is not None:
        feats.append(_CTX_P + ("last" if last else "notlast"))
    if low.endswith(("?", "？")):
        feats.append(_CTX_P + "endq=" + role)
    if words:
        feats.append(_CTX_P + "first=" + words[0])
        if len(words) > 1:
            feats.append(_CTX_P + "first2=" + words[0] + " " + words[1])
    if cue is not None:
        feats.append(_CTX_P + "cue=" + cue)
        feats.append(_CTX_P + "cue=" + cue + "/" + role)
    return feats


# A feature's seven integer weights are packed into one Python int, each shifted by _OFFSET into
# a non-negative field of _BITS bits, with a count bit on top: one ``sum`` over a sentence's
# features adds all seven columns at once (exactly: integers), and the count undoes the offset.
# The weights file stores the packed rows as fixed-width hex (ROW_HEX digits a feature), so
# loading it is one JSON parse and one ``int(..., 16)`` a feature.
_BITS = 24
_OFFSET = 128
_MASK = (1 << _BITS) - 1
_COUNT_SHIFT = _BITS * len(LABELS)
ROW_HEX = (_COUNT_SHIFT + 1 + 3) // 4
_MAX_FEATURES = _MASK // (2 * _OFFSET)  # features a sentence may have before a field could carry over
assert 4 * MAX_CHARS + 64 < _MAX_FEATURES  # MAX_CHARS bounds the features of a sentence


def pack(row: list[int]) -> int:
    """One feature's weights (integers in [-128, 127], in ``LABELS`` order) as one int."""
    if len(row) != len(LABELS) or not all(type(w) is int and -_OFFSET <= w < _OFFSET for w in row):
        raise ValueError(f"{len(LABELS)} integers in [{-_OFFSET}, {_OFFSET}) expected, got {row!r}")
    v = 1 << _COUNT_SHIFT
    for k, w in enumerate(row):
        v |= (w + _OFFSET) << (_BITS * k)
    return v


def encode(vocab: dict[str, list[int]]) -> dict:
    """The ``features``, ``weights`` and ``sha1`` entries of a weights file for ``vocab``."""
    feats = sorted(vocab)
    if any("\n" in f for f in feats):
        raise ValueError("a feature holds a line break")
    weights = "".join(format(pack(vocab[f]), f"0{ROW_HEX}x") for f in feats)
    return {"features": feats, "weights": weights, "sha1": _digest(feats, weights)}


def _digest(feats: list[str], weights: str) -> str:
    return hashlib.sha1(("\n".join(feats) + "\n" + weights).encode("utf-8")).hexdigest()


class Model:
    """Weights read from a ``prose_weights.json``: per feature, seven packed integer weights."""

    __slots__ = ("labels", "scale", "bias", "packed", "meta")

    def __init__(self, data: dict, source: str):
        try:
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
            labels = tuple(data["labels"])
            if labels != LABELS:
                raise ValueError(f"labels {list(labels)}, expected {list(LABELS)}")
            scale = float(data["scale"])
            bias = [float(b) for b in data["bias"]]
            feats, weights = data["features"], data["weights"]
            if len(bias) != len(LABELS) or not feats or not isinstance(weights, str):
                raise ValueError("bias, features or weights missing")
            if len(weights) != ROW_HEX * len(feats):
                raise ValueError(f"{len(feats)} features but {len(weights) / ROW_HEX:g} rows of weights")
            if _digest(feats, weights) != data["sha1"]:
                raise ValueError("checksum mismatch")
            packed = dict(zip(feats, [int(weights[i:i + ROW_HEX], 16) for i in range(0, len(weights), ROW_HEX)]))
            if len(packed) != len(feats) or sum(packed.values()) >> _COUNT_SHIFT != len(feats):
                raise ValueError("repeated features or malformed rows")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise RuleError(f"the prose classifier's weights are corrupt ({exc}); reinstall compactor",
                            source=source) from None
        self.labels, self.scale, self.bias, self.packed = labels, scale, bias, packed
        self.meta = {k: v for k, v in data.items() if k not in ("features", "weights", "bias")}

    def scores(self, text: str, role: str = "assistant", last: bool | None = None,
               cue: str | None = None) -> list[float]:
        """The label scores (log-odds up to a constant), in ``LABELS`` order."""
        feats = features(text, role, last, cue)
        total = sum(map(self.packed.get, feats, repeat(0)))
        count = total >> _COUNT_SHIFT
        norm = self.scale / math.sqrt(len(feats))
        return [b + norm * (((total >> (_BITS * k)) & _MASK) - _OFFSET * count) for k, b in enumerate(self.bias)]

    def predict(self, text: str, role: str = "assistant", last: bool | None = None,
                cue: str | None = None) -> tuple[str, float]:
        """The best label and its probability (softmax over the scores)."""
        s = self.scores(text, role, last, cue)
        best = 0
        for k in range(1, len(s)):
            if s[k] > s[best]:  # ties keep the earlier label
                best = k
        top = s[best]
        p = 1.0 / sum(math.exp(v - top) for v in s)
        return LABELS[best], p


_MODEL: list[Model] = []
_LOCK = threading.Lock()


def load(path: str = WEIGHTS_PATH) -> Model:
    """Read a weights file (a clear :class:`RuleError` naming it when missing or corrupt)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise RuleError("the prose classifier's weights are missing; reinstall compactor", source=path) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RuleError(f"the prose classifier's weights cannot be read ({exc}); reinstall compactor",
                        source=path) from None
    if not isinstance(data, dict):
        raise RuleError("the prose classifier's weights are corrupt (not an object); reinstall compactor", source=path)
    return Model(data, path)


def model() -> Model:
    """The shipped model, read on first use and kept."""
    if not _MODEL:
        with _LOCK:
            if not _MODEL:
                _MODEL.append(load())
    return _MODEL[0]
