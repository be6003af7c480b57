"""Synthetic attention maps with a known pattern, for tests that need maps but no encoder."""

import csv

import numpy as np

from patterncnn.core.labels import LABELS
from patterncnn.shares.calibrate import Rows


def pattern_map(kind: str, t: int = 12, sep: int | None = None, seed: int = 0) -> np.ndarray:
    """A (t, t) row-stochastic map of the given pattern, with a little noise."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.0, 0.02, size=(t, t))
    if kind in ("vertical", "vertical+diagonal"):
        a[:, 0] += 1.0
    if kind in ("diagonal", "vertical+diagonal"):
        a[np.arange(t), np.arange(t)] += 1.0
    if kind == "block":
        b = sep + 1
        a[:b, :b] += rng.uniform(0.2, 0.4, size=(b, b))
        a[b:, b:] += rng.uniform(0.2, 0.4, size=(t - b, t - b))
    if kind == "heterogeneous":
        a += rng.uniform(0, 1, size=(t, t)) ** 8
    return (a / a.sum(1, keepdims=True)).astype(np.float32)


def pattern_store(path, kinds, t: int = 12):
    """A map store with one map per kind; returns the store."""
    from patterncnn.core.maps import MapStore

    store = MapStore.create(path, info={"synthetic": True})
    sep = t // 2 - 1
    recs = []
    for i, kind in enumerate(kinds):
        tokens = (["[CLS]"] + [f"w{j}" for j in range(1, sep)] + ["[SEP]"] + [f"v{j}" for j in range(sep + 1, t - 1)]
                  + ["[SEP]"])
        meta = {"id": f"syn_{i:03d}_{kind}", "model": "synthetic", "task": "rte", "split": "dev", "example": i,
                "layer": i % 3, "head": i % 4, "T": t, "tokens": tokens, "seps": [sep, t - 1]}
        recs.append((meta, pattern_map(kind, t, sep, seed=i)))
    store.append(recs)
    return store


ANNOTATORS = ("annotator-a@patterncnn.local", "annotator-b@patterncnn.local", "annotator-c@patterncnn.local")


def family_set(root, per_class=6, shared=2, third=False, only=None, first=0):
    """A labelled set of maps of two encoder families (minilm incl. a fine-tune, mpnet; with ``third``, e5 too; with
    ``only``, just the families named), 3 annotators each, drawn "uniformly" (their metadata says so); returns the root.
    ``first``: added to every example number, for a set whose maps no other set of this function holds.

    The first ``shared`` examples of each class are seen by every family (the same input example).
    Annotator c disagrees on every third map; on every fifth map all three disagree.
    """
    recs, rows, anns = [], [], []
    tags = ("minilm-53aa5117", "minilm-sst2-0633eb25", "mpnet-78c0197b")
    fams = (("minilm", tags[:2]), ("mpnet", tags[2:])) + ((("e5", ("e5-cd1caf18",)),) if third or only else ())
    for k, kind in enumerate(LABELS):
        for f, (fam, tag_pair) in enumerate(fams):
            if only is not None and fam not in only:
                continue
            for i in range(per_class):
                tag = tag_pair[i % len(tag_pair)]
                ex = first + (1000 * k + i if i < shared else 1000 * k + i + 300 * f)
                t = 12 + (i * 5) % 20
                sep = t // 2 - 1
                mid = f"{tag}_rte_dev_{ex:05d}_L{i % 3:02d}_H{i % 4:02d}"
                recs.append(({"id": mid, "task": "rte", "split": "dev", "example": ex, "layer": i % 3,
                              "head": i % 4, "T": t, "seps": [sep, t - 1], "sampling": "uniform"},
                             pattern_map(kind, t, sep, seed=7 * k + i)))
                rows.append({"map_id": mid, "label": kind, "uncertain": "False"})
                n = len(recs)
                other = LABELS[(k + 1) % len(LABELS)]
                votes = [kind, kind, other if n % 3 == 0 else kind]
                if n % 5 == 0:
                    votes = [kind, other, LABELS[(k + 2) % len(LABELS)]]
                for a, (who, lab) in enumerate(zip(ANNOTATORS, votes)):
                    anns.append({"map_id": mid, "annotator": who, "label": lab, "skipped": "False",
                                 "created_at": f"2026-11-23T10:00:{a:02d}Z", "ls_annotation_id": str(10 * n + a)})
    write_labelled_set(root, recs, rows)
    with open(root / "votes.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(anns[0]))
        w.writeheader()
        w.writerows(anns)
    return root


def write_labelled_set(root, records, rows):
    """A labelled set in the `annotate pull` layout: ``maps/`` from (meta, map) records, ``labels.csv`` from rows."""
    import csv

    from patterncnn.core.maps import MapStore

    MapStore.create(root / "maps").append(records)
    with open(root / "labels.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["map_id", "label", "uncertain"])
        w.writeheader()
        w.writerows(rows)
    return root


# P(predicted j | label i): the classifier over-calls vertical+diagonal and heterogeneous, misses block.
CONFUSION = np.array([[.80, .04, .10, .01, .05],
                      [.05, .70, .15, .00, .10],
                      [.15, .10, .65, .00, .10],
                      [.05, .05, .00, .55, .35],
                      [.10, .10, .05, .10, .65]])


def write_votes(root, votes: dict, extra: list | None = None):
    """``root/votes.csv`` with annotators a, b, c, ... voting ``votes[map_id]`` (a tuple of labels, one per
    annotator) on each map, in creation order; ``extra``: more rows (map_id, annotator, label)."""
    import csv

    rows = [(m, who, lab) for m, labs in votes.items() for who, lab in zip("abcdefgh", labs)] + (extra or [])
    with open(root / "votes.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["map_id", "annotator", "label", "skipped", "created_at", "ls_annotation_id"])
        w.writerows([(m, who, lab, "False", f"2026-11-23T10:{i // 60:02d}:{i % 60:02d}Z", i)
                     for i, (m, who, lab) in enumerate(rows)])


def simulated_rows(shares, n, rng, encoder="enc-aaaa1111", single=False, uniform=True, fold=None,
                   task="rte", start=0) -> Rows:
    """Rows whose argmax follows CONFUSION: label ~ shares, prediction ~ CONFUSION[label]."""
    y = rng.choice(len(LABELS), size=n, p=shares)
    pred = np.array([rng.choice(len(LABELS), p=CONFUSION[i]) for i in y])
    probs = rng.dirichlet(np.ones(len(LABELS)), size=n) * 0.3
    probs[np.arange(n), pred] += 0.7
    ex = np.arange(start, start + n)
    return Rows(np.array([f"{encoder}_{task}_dev_{i:05d}_L00_H00" for i in ex]), y, probs,
                ex % 5 if fold is None else np.full(n, fold), np.full(n, encoder), np.full(n, task),
                np.array([f"{task}/dev/{i}" for i in ex]), np.full(n, uniform), np.full(n, single))


def concat_rows(*parts):
    """Several Rows as one."""
    from patterncnn.shares.calibrate import FIELDS, Rows

    return Rows(*(np.concatenate([getattr(p, f) for p in parts]) for f in FIELDS))


def sequence_classifier(folder, out, num_labels: int = 2):
    """A randomly initialised task head on a tiny encoder, saved to ``out`` (what `patterncnn finetune` would write).

    Returns:
        (model, tokenizer, out).
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(1)
    model = AutoModelForSequenceClassification.from_pretrained(str(folder), num_labels=num_labels,
                                                               attn_implementation="eager")
    model.save_pretrained(out)
    tok = AutoTokenizer.from_pretrained(str(folder))
    tok.save_pretrained(out)
    model.eval()
    return model, tok, out
