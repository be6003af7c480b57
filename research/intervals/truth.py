"""The truth the census-interval simulations draw from (a confusion matrix per segment kind, and per-task true shares
from an encoder's hand labels), and the draws they share: predictions from the confusion, calibration rows redrawn
from it, a simulated census of one task (imported by sim_adjusted.py, sim_adjusted_own.py, sim_count_band.py and
sim_task_band.py)."""
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


def draw_predictions(rng, R: dict, y: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """Argmax predictions of maps with hand labels ``y`` and segment kinds ``kinds`` (True: single), each drawn from
    its label's row of ``R`` (:func:`confusion_by_kind`); the single-segment maps first."""
    out = np.empty(len(y), dtype=int)
    for kind in (True, False):
        s = kinds == kind
        cum = R[kind][y[s]].cumsum(1)
        out[s] = (rng.random(s.sum())[:, None] > cum).sum(1).clip(0, 4)
    return out


def redrawn_rows(rng, R: dict, rows):
    """``rows`` (calibration rows) with their predictions redrawn from ``R``: probabilities 0.96 on the drawn label,
    block 0 on single-segment rows, so that a calibration fitted on them is an independent draw from the truth."""
    from patterncnn.shares.calibrate import Rows

    q = draw_predictions(rng, R, rows.y, rows.single)
    probs = np.full((len(q), 5), 0.01)
    probs[np.arange(len(q)), q] = 0.96
    probs[rows.single, 3] = 0.0
    probs /= probs.sum(1, keepdims=True)
    return Rows(rows.ids, rows.y, probs, rows.fold, rows.encoder, rows.task, rows.group, rows.uniform, rows.single)


def census_labels(rng, R_kind: np.ndarray, p: np.ndarray, n: int, m: int, alpha: float = 30.0) -> np.ndarray:
    """(n, m) argmax labels of a simulated census of one task: n examples, each with its own mix of the true shares
    ``p`` (Dirichlet, ``alpha``: maps of one sentence correlate), m maps each, predictions from ``R_kind`` (the
    confusion of the task's segment kind)."""
    theta = rng.dirichlet(alpha * p + 1e-6, size=n)
    y_counts = np.array([rng.multinomial(m, th) for th in theta])
    pc = np.zeros((n, 5), dtype=int)
    for k in range(5):
        pc += np.array([rng.multinomial(c, R_kind[k]) for c in y_counts[:, k]])
    return np.stack([np.repeat(np.arange(5), row) for row in pc])
