"""The truth both census-interval simulations draw from: a confusion matrix per segment kind, and per-task true
shares from an encoder's hand labels (imported by sim_adjusted.py and sim_count_band.py)."""
import numpy as np


def confusion_by_kind(rows) -> dict:
    """{single-segment?: row-normalised 5x5 confusion (hand label -> argmax prediction)} of ``rows`` (calibration
    rows), with a 0.5 pseudo-count on the diagonal; block never occurs nor is predicted on single-segment inputs."""
    pred = rows.probs.argmax(1)
    R = {}
    for kind in (True, False):
        s = rows.single == kind
        C = np.zeros((5, 5))
        np.add.at(C, (rows.y[s], pred[s]), 1)
        C += 0.5 * np.eye(5)
        if kind:
            C[3] = 0
            C[:, 3] = 0
            C[3, 3] = 1
        R[kind] = C / C.sum(1, keepdims=True)
    return R


def true_shares(hand) -> tuple[list, dict, dict]:
    """(tasks, {task: single-segment?}, {task: true shares}) from an encoder's hand-labelled rows ``hand``: each
    task's label shares, with 1 % block on pair tasks."""
    tasks = sorted(set(hand.task.tolist()))
    single = {t: bool(hand.single[hand.task == t][0]) for t in tasks}
    p_true = {}
    for t in tasks:
        p = np.bincount(hand.y[hand.task == t], minlength=5) / (hand.task == t).sum()
        if not single[t]:
            p = 0.99 * p + 0.01 * np.eye(5)[3]  # a little block on pair tasks
        p_true[t] = p
    return tasks, single, p_true
