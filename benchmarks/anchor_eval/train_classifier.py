"""Train the anchor's prose classifier on the tuning half of the blind sentence labels.

Reads ``sentences/labels.jsonl`` (text rebuilt from the shared runs with ``extract.sentences``;
every sha1 is checked), ``sentences/zh_sentences.jsonl`` and ``sentences/en_extra.jsonl``. Fits a
multinomial logistic regression (numpy, full-batch Adam, fixed settings: deterministic) over
``compactor.anchor.prose_model.features`` on the TUNE half only, chooses the L2 strength and the
way the model and the cue patterns are combined by 5-fold cross-validation on the tune half
(folds by run; the written sentences by sha1), writes the quantised weights to
``compactor/anchor/prose_weights.json``, and then - only then - prints per-label precision,
recall and F1 on the TEST half for the cues alone, the model alone and the combined labeller,
with confusion matrices.

Usage::

    PYTHONPATH=. python benchmarks/anchor_eval/train_classifier.py [--root ../shared] [--out PATH]
    PYTHONPATH=. python benchmarks/anchor_eval/train_classifier.py --evaluate   # test report only

Exit 2 with one line per problem when a label's sentence cannot be rebuilt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SENT = os.path.join(HERE, "sentences")
sys.path.insert(0, SENT)
import extract  # noqa: E402

from compactor.anchor import prose_model  # noqa: E402
from compactor.anchor.cues import cue_label  # noqa: E402
from compactor.anchor.prose_model import LABELS, features  # noqa: E402

K = len(LABELS)
LIDX = {lab: i for i, lab in enumerate(LABELS)}
FOLDS = 5
ITERS = 300
LR = 0.05
L2_GRID = (3e-5, 1e-4, 3e-4)
THRESHOLDS = (0.0, 0.4, 0.5, 0.6)
QMAX = 127  # weights are quantised to integers in [-QMAX, QMAX]


# ---------------------------------------------------------------- data

def load_items(root: str) -> tuple[list[dict], list[str]]:
    """Every labelled sentence with text, role, last, label, half and CV group."""
    items, problems, cache = [], [], {}
    path = os.path.join(SENT, "labels.jsonl")
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            o = json.loads(line)
            run = o["run"]
            if run not in cache:
                try:
                    sents = extract.sentences(root, run)
                except OSError as exc:
                    problems.append(f"{path}:{lineno}: {run}: cannot read ({exc})")
                    cache[run] = None
                    continue
                last = {}
                for s in sents:
                    last[s["msg"]] = max(last.get(s["msg"], -1), s["sent"])
                cache[run] = ({(s["msg"], s["sent"]): s for s in sents}, last)
            if cache[run] is None:
                continue
            by_loc, last = cache[run]
            s = by_loc.get((o["msg"], o["sent"]))
            if s is None or s["sha1"] != o["sha1"]:
                problems.append(f"{path}:{lineno}: {run} msg {o['msg']} sent {o['sent']}: "
                                + ("does not exist" if s is None else "text changed"))
                continue
            items.append({"text": s["text"], "role": o["role"], "last": o["sent"] == last[o["msg"]],
                          "label": o["label"], "half": o["half"], "group": run})
    for name in ("zh_sentences.jsonl", "en_extra.jsonl"):
        p = os.path.join(SENT, name)
        with open(p, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                o = json.loads(line)
                if extract.sha1(o["text"]) != o["sha1"]:
                    problems.append(f"{p}:{lineno}: sha1 does not match the text")
                    continue
                items.append({"text": o["text"], "role": o["role"], "last": None, "label": o["label"],
                              "half": o["half"], "group": name + ":" + o["sha1"]})
    for it in items:
        if it["label"] not in LIDX:
            problems.append(f"unknown label {it['label']!r}")
        ctx = {"role": it["role"]}
        if it["last"] is not None:
            ctx["last"] = it["last"]
        it["cue"] = cue_label(it["text"], ctx)
        it["fold"] = zlib.crc32(it["group"].encode()) % FOLDS
    return items, problems


# ---------------------------------------------------------------- logistic regression (numpy)

class Design:
    """Sparse rows (feature ids, value 1/sqrt(n features)) for a fixed vocabulary."""

    def __init__(self, items: list[dict], vocab: dict[str, int]):
        rows, cols, vals = [], [], []
        for r, it in enumerate(items):
            feats = features(it["text"], it["role"], it["last"], it["cue"])
            v = 1.0 / np.sqrt(len(feats))
            for f in feats:
                j = vocab.get(f)
                if j is not None:
                    rows.append(r)
                    cols.append(j)
                    vals.append(v)
        self.n = len(items)
        self.rows = np.array(rows, dtype=np.int64)
        self.cols = np.array(cols, dtype=np.int64)
        self.vals = np.array(vals, dtype=np.float64)

    def dot(self, W: np.ndarray) -> np.ndarray:
        out = np.zeros((self.n, W.shape[1]))
        contrib = W[self.cols] * self.vals[:, None]
        for k in range(W.shape[1]):
            out[:, k] = np.bincount(self.rows, weights=contrib[:, k], minlength=self.n)
        return out

    def tdot(self, G: np.ndarray, V: int) -> np.ndarray:
        out = np.zeros((V, G.shape[1]))
        g = G[self.rows] * self.vals[:, None]
        for k in range(G.shape[1]):
            out[:, k] = np.bincount(self.cols, weights=g[:, k], minlength=V)
        return out


def build_vocab(items: list[dict]) -> dict[str, int]:
    """Features seen in at least two tuning sentences (context features always), in sorted order."""
    df: dict[str, int] = {}
    for it in items:
        for f in set(features(it["text"], it["role"], it["last"], it["cue"])):
            df[f] = df.get(f, 0) + 1
    keep = sorted(f for f, c in df.items() if c >= 2 or f.startswith("\x03"))
    return {f: i for i, f in enumerate(keep)}


def fit(items: list[dict], l2: float) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    vocab = build_vocab(items)
    X = Design(items, vocab)
    y = np.array([LIDX[it["label"]] for it in items])
    Y = np.eye(K)[y]
    counts = np.bincount(y, minlength=K).astype(float)
    cw = np.sqrt(len(y) / (K * np.maximum(counts, 1.0)))  # softened inverse frequency
    sw = cw[y] / cw[y].sum()
    V = len(vocab)
    W, b = np.zeros((V, K)), np.zeros(K)
    mW, vW, mb, vb = np.zeros_like(W), np.zeros_like(W), np.zeros(K), np.zeros(K)
    for t in range(1, ITERS + 1):
        Z = X.dot(W) + b
        Z -= Z.max(axis=1, keepdims=True)
        P = np.exp(Z)
        P /= P.sum(axis=1, keepdims=True)
        G = (P - Y) * sw[:, None]
        gW = X.tdot(G, V) + l2 * W
        gb = G.sum(axis=0)
        for p, g, m, v in ((W, gW, mW, vW), (b, gb, mb, vb)):
            m *= 0.9
            m += 0.1 * g
            v *= 0.999
            v += 0.001 * g * g
            p -= LR * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return vocab, W, b


def quantise(vocab: dict[str, int], W: np.ndarray, b: np.ndarray) -> dict:
    scale = float(np.abs(W).max()) / QMAX
    Q = np.rint(W / scale).astype(np.int64)
    keep = {f: [int(v) for v in Q[i]] for f, i in vocab.items() if np.any(Q[i] != 0)}
    return {"format": prose_model.FORMAT, "labels": list(LABELS), "scale": float(f"{scale:.9g}"),
            "bias": [float(f"{v:.6f}") for v in b], **prose_model.encode(keep)}


def as_model(data: dict) -> prose_model.Model:
    return prose_model.Model(json.loads(json.dumps(data)), "<memory>")


# ---------------------------------------------------------------- combining and scoring

def combine(cue: str, label: str, p: float, rule: dict) -> str:
    if cue in rule["cue_labels"] or p < rule["threshold"]:
        return cue
    return label


def prf(gold: list[str], pred: list[str]) -> dict[str, tuple[float, float, float, int]]:
    out = {}
    for lab in LABELS:
        tp = sum(1 for g, p in zip(gold, pred) if g == lab and p == lab)
        np_ = sum(1 for p in pred if p == lab)
        ng = sum(1 for g in gold if g == lab)
        pr = tp / np_ if np_ else 0.0
        rc = tp / ng if ng else 0.0
        f1 = 2 * pr * rc / (pr + rc) if pr + rc else 0.0
        out[lab] = (pr, rc, f1, ng)
    return out


def macro_f1(gold: list[str], pred: list[str]) -> float:
    return sum(v[2] for v in prf(gold, pred).values()) / K


def choose_rule(gold, cues, preds) -> dict:
    """Greedy: add to ``cue_labels`` the label whose addition most improves macro F1, then the threshold."""
    rule = {"cue_labels": [], "threshold": 0.0}
    score = macro_f1(gold, [combine(c, lab, p, rule) for c, (lab, p) in zip(cues, preds)])
    while True:
        best = None
        for lab in LABELS:
            if lab in rule["cue_labels"]:
                continue
            r = {"cue_labels": sorted(rule["cue_labels"] + [lab]), "threshold": rule["threshold"]}
            s = macro_f1(gold, [combine(c, la, p, r) for c, (la, p) in zip(cues, preds)])
            if s > score + 1e-9 and (best is None or s > best[0]):
                best = (s, r)
        if best is None:
            break
        score, rule = best
    for t in THRESHOLDS:
        r = {"cue_labels": rule["cue_labels"], "threshold": t}
        s = macro_f1(gold, [combine(c, la, p, r) for c, (la, p) in zip(cues, preds)])
        if s > score + 1e-9:
            score, rule = s, r
    return rule


def report(title: str, gold: list[str], cols: dict[str, list[str]]) -> None:
    print(f"\n## {title} ({len(gold)} sentences)\n")
    names = list(cols)
    scores = {n: prf(gold, p) for n, p in cols.items()}
    head = "| label | n | " + " | ".join(f"{n} P | {n} R | {n} F1" for n in names) + " |"
    print(head)
    print("|" + "---|" * (2 + 3 * len(names)))
    for lab in LABELS:
        cells = []
        for n in names:
            pr, rc, f1, ng = scores[n][lab]
            cells += [f"{pr:.2f}", f"{rc:.2f}", f"{f1:.2f}"]
        print(f"| {lab} | {scores[names[0]][lab][3]} | " + " | ".join(cells) + " |")
    cells = []
    for n in names:
        acc = sum(1 for g, p in zip(gold, cols[n]) if g == p) / len(gold)
        cells += ["", f"acc {acc:.3f}", f"macro {macro_f1(gold, cols[n]):.3f}"]
    print("| all | | " + " | ".join(cells) + " |")


def confusion(title: str, gold: list[str], pred: list[str]) -> None:
    print(f"\n{title} (rows gold, columns predicted)\n")
    short = [lab[:5] for lab in LABELS]
    print("| gold \\ pred | " + " | ".join(short) + " |")
    print("|" + "---|" * (K + 1))
    for g in LABELS:
        row = [sum(1 for a, b in zip(gold, pred) if a == g and b == p) for p in LABELS]
        print(f"| {g} | " + " | ".join(str(v) for v in row) + " |")


def predict_all(m: prose_model.Model, items: list[dict]) -> list[tuple[str, float]]:
    return [m.predict(it["text"], it["role"], it["last"], it["cue"]) for it in items]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=extract.default_root())
    ap.add_argument("--out", default=prose_model.WEIGHTS_PATH)
    ap.add_argument("--evaluate", action="store_true", help="do not train: report the shipped weights on the test half")
    a = ap.parse_args(argv)
    items, problems = load_items(a.root)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 2
    tune = [it for it in items if it["half"] == "tune"]
    test = [it for it in items if it["half"] == "test"]
    print(f"sentences: {len(tune)} tune, {len(test)} test")

    if not a.evaluate:
        # cross-validation on the tune half: L2 strength, then the combination rule
        gold = [it["label"] for it in tune]
        cues = [it["cue"] for it in tune]
        best = None
        oof_by_l2 = {}
        for l2 in L2_GRID:
            oof: list = [None] * len(tune)
            for f in range(FOLDS):
                tr = [it for it in tune if it["fold"] != f]
                idx = [i for i, it in enumerate(tune) if it["fold"] == f]
                m = as_model(quantise(*fit(tr, l2)))
                for i, pr in zip(idx, predict_all(m, [tune[i] for i in idx])):
                    oof[i] = pr
            oof_by_l2[l2] = oof
            s = macro_f1(gold, [lab for lab, _ in oof])
            print(f"cv l2={l2:g}: model macro F1 {s:.3f}", file=sys.stderr)
            if best is None or s > best[0] + 1e-9:
                best = (s, l2)
        l2 = best[1]
        oof = oof_by_l2[l2]
        rule = choose_rule(gold, cues, oof)
        report("cross-validated on the TUNE half", gold, {
            "cues": cues, "model": [lab for lab, _ in oof],
            "combined": [combine(c, lab, p, rule) for c, (lab, p) in zip(cues, oof)]})
        print(f"\nchosen: l2={l2:g}, combination {json.dumps(rule)}")
        data = quantise(*fit(tune, l2))
        data["combine"] = rule
        data["trained_on"] = {"sentences": len(tune), "l2": l2, "iters": ITERS, "folds": FOLDS,
                              "cv_macro_f1": {"model": round(best[0], 4)}}
        text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
        print(f"wrote {a.out}: {len(data['features'])} features, {len(text.encode()) / 1e6:.2f} MB")
        m = as_model(data)
    else:
        m = prose_model.load(a.out)
        rule = m.meta.get("combine", {"cue_labels": [], "threshold": 0.0})

    gold = [it["label"] for it in test]
    cues = [it["cue"] for it in test]
    preds = predict_all(m, test)
    model_lab = [lab for lab, _ in preds]
    comb = [combine(c, lab, p, rule) for c, (lab, p) in zip(cues, preds)]
    if os.path.abspath(a.out) == os.path.abspath(prose_model.WEIGHTS_PATH):
        # the combined column must be what the anchor's labeller returns with the shipped weights
        from compactor.anchor.cues import label_sentence

        prose_model._MODEL.clear()
        live = [label_sentence(it["text"], {"role": it["role"], **({} if it["last"] is None else {"last": it["last"]})})
                for it in test]
        differ = sum(1 for x, y in zip(live, comb) if x != y)
        print(f"label_sentence agrees with the combined column on {len(test) - differ}/{len(test)} test sentences")
        if differ:
            return 1
    report("TEST half", gold, {"cues": cues, "model": model_lab, "combined": comb})
    for name, sub in (("runs", [i for i, it in enumerate(test) if it["last"] is not None]),
                      ("written zh+en sets", [i for i, it in enumerate(test) if it["last"] is None])):
        report(f"TEST half, {name}", [gold[i] for i in sub],
               {"cues": [cues[i] for i in sub], "model": [model_lab[i] for i in sub], "combined": [comb[i] for i in sub]})
    confusion("Confusion, TEST half, cues", gold, cues)
    confusion("Confusion, TEST half, model", gold, model_lab)
    confusion("Confusion, TEST half, combined", gold, comb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
