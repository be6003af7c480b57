"""Scores of predicted labels against hand labels: one definition of each, shared by training, validation and reports.

Usage::

    macro_f1(y, pred)                      # over all five classes
    classification_report(y, pred)         # per class precision/recall/F1, macro/weighted F1, confusion matrix
    subset_scores(y, pred, mask)           # macro-F1 over the classes the subset's labels hold, accuracy
    spread([0.61, 0.58, 0.66])             # mean, sd, min, max of a few scores (seeds)

Labels are indices into :data:`patterncnn.core.labels.LABELS`. scikit-learn is imported inside the functions: the
command line imports this module and should start quickly.
"""

from __future__ import annotations

import numpy as np

from .labels import LABELS


def macro_f1(y_true, y_pred) -> float:
    """Macro-F1 over all five classes (a class absent from both sides counts as 0)."""
    from sklearn.metrics import f1_score

    return float(f1_score(y_true, y_pred, average="macro", labels=range(len(LABELS)), zero_division=0))


def classification_report(y_true: np.ndarray, y_pred: np.ndarray) -> dict:
    """Per-class precision/recall/F1/support, macro and weighted F1, accuracy, confusion matrix."""
    from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_recall_fscore_support

    labels = list(range(len(LABELS)))
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=0)
    return {
        "per_class": {name: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]), "support": int(s[i])}
                      for i, name in enumerate(LABELS)},
        "macro_f1": float(f1_score(y_true, y_pred, average="macro", labels=labels, zero_division=0)),
        "weighted_f1": float(f1_score(y_true, y_pred, average="weighted", labels=labels, zero_division=0)),
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "confusion_matrix": confusion_matrix(y_true, y_pred, labels=labels).tolist(),
        "confusion_matrix_order": list(LABELS),
    }


def subset_scores(y: np.ndarray, pred: np.ndarray, mask: np.ndarray) -> dict | None:
    """Macro-F1 (over the classes the subset's labels hold), accuracy and per-class F1 of ``mask``; None if empty."""
    from sklearn.metrics import f1_score

    if not mask.any():
        return None
    yt, yp = y[mask], pred[mask]
    present = sorted(set(yt.tolist()))
    f1 = f1_score(yt, yp, labels=range(len(LABELS)), average=None, zero_division=0)
    return {"maps": int(mask.sum()), "macro_f1": float(np.mean(f1[present])), "accuracy": float(np.mean(yt == yp)),
            "per_class_f1": {name: (float(f1[k]) if k in present else None) for k, name in enumerate(LABELS)},
            "classes": [LABELS[k] for k in present]}


def spread(values) -> dict:
    """Mean, standard deviation (ddof 1; 0 for one value), min and max of a few scores."""
    v = np.asarray(values, dtype=float)
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
            "min": float(v.min()), "max": float(v.max()), "n": int(len(v))}
