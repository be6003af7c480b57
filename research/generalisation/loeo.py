"""Leave one encoder family out, over seeds: the measure of issue 30 for one classifier configuration.

    python research/generalisation/loeo.py NAME [--row] [--init CKPT] [--lr LR] [--mix N] [--adabn] [--freeze-bn]
        [--flip P] [--lp] [--tta] [--em] [--seeds 5] [--save-probs DIR]

For each family F of the labelled set(s): train on every other family's maps (maps whose input example is also
among F's maps dropped, early stopping on a grouped fifth of the training maps, as `patterncnn train`'s leave one
encoder out), test on all of F's maps. One JSON line per (test family, seed) is appended to results.jsonl beside
this script: accuracy, four-class macro-F1 (the maps not labelled block, classes vertical, diagonal,
vertical+diagonal, heterogeneous), the same on maps where two annotators agree, and the confusion.

--init starts every fit from a pretrained CNN's weights (`patterncnn pretrain`); --adabn also scores the
same fit after re-estimating its BatchNorm statistics on the test family's own maps, unlabelled (test-time
adaptation), as adabn_all / adabn_agreed. --mix N adds N synthetic maps (synthetic.py, drawn with the fit's seed,
classes balanced) to every fit's training part, never to its early-stopping part; --lr sets the learning rate
(default: train's, 3e-4 from --init, else 3e-3); --flip P reverses the token order of a training map with
probability P (both axes of every input channel: a column moves to the other edge; a diagonal, a band, the two
squares and a haze stay what they were, so the class is kept; its own random stream, seeded 7).
--freeze-bn keeps the --init checkpoint's BatchNorm running statistics (from the synthetic maps) through the
fine-tuning, as `train --freeze-bn` (the 2026-11-26 `pre1m-ft-lr3e-4-freezebn` rows ran with an equivalent patch
of BatchNorm's train mode, before TrainConfig had the option); the BatchNorm scales and shifts still learn.
--lp (with --init) first refits the pretrained CNN's linear head alone on its frozen features of the training part
(a linear probe: L2-regularised multinomial logistic regression, C 1, on standardised features of each map and two
augmented views, classes weighted as `train` weighs them), then fine-tunes everything from there (LP-FT, Kumar et
al. 2022: the head's large first gradients no longer distort the pretrained features); the linear probe alone is
scored too, as lp_all / lp_agreed. Only with --freeze-bn: the probe's features are normalised with the pretrained
statistics, which the fine-tuning must then keep for the head to see the features it was fitted on; not with --soft
or --flip (the probe fits hard labels on unflipped views).
--tta also scores the same fit with test-time augmentation, as tta_all / tta_agreed: the softmax averaged over five
views of each test map, the map itself, resampled to 0.8 and 1.25 times its length (nearest), and its intensity to
the power 0.8 and 1.25 (within the ranges of train's augmentation); before --adabn's re-estimation when both are
given.
--em also scores the same fit after label-shift adaptation to the held-out family (test-time, its maps unlabelled),
as em_all / em_agreed, with bias-corrected temperature scaling alone as bcts_all / bcts_agreed: BCTS (a temperature
and a bias per class, by NLL on the fit's own early-stopping maps; Alexandari et al. 2020), then the EM of Saerens et
al. 2002 from the mean calibrated posterior of those maps (the source prior) to the held-out family's prior; each
map's prediction is its adjusted posterior's argmax. ``shares`` records the resolved labels' shares of the test maps,
the plain count's, BCTS's count (``bcts_count``; not in the first --em run, `shipped-recipe-em`) and EM's prior (the share estimate).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch

from patterncnn.classifier.model import CNNConfig, PatternCNN, config_from_dict, preprocess
from patterncnn.core.fileio import public_path, sha256_file
from patterncnn.core.labels import LABELS
from patterncnn.core.maps import families
from patterncnn.labelling.sets import load_labelled
from patterncnn.shares.calibrate import temper
from patterncnn.training.evaluate import _split_train, load_votes
from patterncnn.training.fit import (
    INIT_LR,
    TrainConfig,
    bcts,
    class_weights,
    fit_members,
    model_inputs,
    predict_proba,
    shifted,
    torch_threads,
)

HERE = Path(__file__).resolve().parent
BLOCK = LABELS.index("block")


def held_out(data, fams: np.ndarray, family: str) -> tuple[np.ndarray, np.ndarray]:
    """(training pool, test maps) of holding ``family`` out: the other families' maps, less those whose input example
    ``family`` also has (as `patterncnn train`'s leave one encoder out), and all of ``family``'s maps."""
    test = fams == family
    shared = ~test & np.isin(data.groups, data.groups[test])
    return np.flatnonzero(~test & ~shared), np.flatnonzero(test)


def load_sets(sets) -> tuple:
    """(the labelled maps of ``sets``, each map's family, the annotators' votes)."""
    data = load_labelled(sets)
    return data, families(data.ids), load_votes(sets, data.ids, data.y)


def load_pretrained(path) -> tuple:
    """(CNN config, state dict) of a pretrained checkpoint (`patterncnn pretrain`)."""
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    return config_from_dict(ckpt["model_config"]), ckpt["state_dict"]


def directions(data, fams: np.ndarray, only: str | None = None):
    """(family, its mask, training pool, test maps) for each family held out in turn (``only``: that one)."""
    for b in sorted(set(fams.tolist())):
        if not only or b == only:
            pool, te = held_out(data, fams, b)
            yield b, fams == b, pool, te


def adabn(model: torch.nn.Module, x: torch.Tensor, batch: int = 256) -> None:
    """Re-estimate every BatchNorm's running statistics on ``x`` (cumulative average), weights unchanged."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for s in range(0, len(x), batch):
            model(x[s : s + batch])
    model.eval()


def flip_training_maps(p: float) -> None:
    """Make every augmented training batch of :mod:`patterncnn.training.fit` reverse each map's token order with
    probability ``p`` (research only: a patch of ``fit.model_inputs``, drawn from its own generator)."""
    from patterncnn.training import fit as fit_mod

    plain, rng = fit_mod.model_inputs, np.random.default_rng(7)

    def flipped(maps, seps, idx, cfg, aug=None, tcfg=None):
        x = plain(maps, seps, idx, cfg, aug, tcfg)
        if aug is not None:  # training only
            which = torch.from_numpy(rng.random(len(x)) < p)
            x[which] = x[which].flip((2, 3))
        return x

    fit_mod.model_inputs = flipped


def with_synthetic(data, n: int, seed: int):
    """``data`` with ``n`` synthetic maps appended (family ``synthetic``, each its own input example), and their
    indices."""
    from patterncnn.training import synthetic

    samples = synthetic.batch(n, np.random.default_rng(50_000 + seed))
    k = len(data.ids)
    joined = dataclasses.replace(
        data, ids=data.ids + [f"synthetic:{seed}:{i}" for i in range(n)], maps=data.maps + [s.map for s in samples],
        seps=data.seps + [list(s.seps) for s in samples],
        y=np.concatenate([data.y, [s.label for s in samples]]).astype(data.y.dtype),
        groups=np.concatenate([data.groups, [f"synthetic:{seed}:{i}" for i in range(n)]]),
        uncertain=np.concatenate([data.uncertain, np.zeros(n, dtype=bool)]),
        meta=data.meta + [{"sampling": "synthetic"}] * n)
    return joined, np.arange(k, k + n)


def linear_probe(cfg, init: dict, data, tr: np.ndarray, tcfg: TrainConfig, seed: int) -> dict:
    """``init`` with its linear head refitted on its frozen features of ``data``'s maps ``tr`` (see --lp)."""
    from sklearn.linear_model import LogisticRegression

    model = PatternCNN(cfg)
    model.load_state_dict(init)
    model.eval()
    rng = np.random.default_rng(60_000 + seed)
    idx = np.concatenate([tr, tr, tr])
    x = torch.cat([model_inputs(data.maps, data.seps, tr, cfg),
                   *(model_inputs(data.maps, data.seps, tr, cfg, rng, tcfg) for _ in range(2))])
    with torch.inference_mode():
        f = model.forward_features(x).numpy().astype(np.float64)
    mu, sd = f.mean(0), f.std(0)
    sd = np.where(sd > 0, sd, 1.0)  # a feature that never fires stays out of the fit
    weight = class_weights(data.y[tr], tcfg.class_weight_power)
    lr = LogisticRegression(C=1.0, max_iter=3000).fit((f - mu) / sd, data.y[idx], sample_weight=weight[data.y[idx]])
    if len(lr.classes_) < 3:  # binary: one row of coefficients, not one per class
        raise SystemExit(f"--lp: the training part holds {len(lr.classes_)} classes; a probe needs at least 3")
    w, b = dict(init)["head.1.weight"].clone(), dict(init)["head.1.bias"].clone()
    for row, k in enumerate(lr.classes_):  # a class absent from the training part keeps its pretrained row
        w[k] = torch.as_tensor(lr.coef_[row] / sd, dtype=w.dtype)
        b[k] = float(lr.intercept_[row] - (lr.coef_[row] * mu / sd).sum())
    return {**init, "head.1.weight": w, "head.1.bias": b}


TTA_VIEWS = ((1.0, 1.0), (0.8, 1.0), (1.25, 1.0), (1.0, 0.8), (1.0, 1.25))  # (length factor, intensity power)


def tta_proba(model: torch.nn.Module, data, idx: np.ndarray, cfg) -> np.ndarray:
    """The softmax of ``model`` averaged over TTA_VIEWS of each map ``idx`` (see --tta)."""
    out = np.zeros((len(idx), len(LABELS)))
    with torch.inference_mode():
        for j, i in enumerate(idx):
            t = data.maps[i].shape[0]
            views = []
            for factor, power in TTA_VIEWS:
                x = preprocess(torch.from_numpy(data.maps[i])[None], [data.seps[i]], cfg,
                               resample_to=None if factor == 1.0 else max(4, int(round(t * factor))))
                x[:, 0] = x[:, 0] ** power
                views.append(x)
            out[j] = torch.softmax(model(torch.cat(views)), dim=1).mean(0).numpy()
    return out


def calibrated(probs: np.ndarray, t: float, b: np.ndarray) -> np.ndarray:
    """``probs`` after BCTS with temperature ``t`` and biases ``b``: softmax(log p / t + b)."""
    return shifted(temper(probs, t), b)


def em_prior(probs: np.ndarray, source: np.ndarray, tol: float = 1e-8, steps: int = 1000) -> tuple:
    """(posteriors adjusted to the target prior, that prior) by the EM of Saerens et al. 2002: ``probs`` are calibrated
    posteriors under the ``source`` prior; the target prior starts at ``source``."""
    def adjusted(q: np.ndarray) -> np.ndarray:
        a = probs * (q / source)
        return a / a.sum(1, keepdims=True)

    q = source
    for _ in range(steps):
        new = adjusted(q).mean(0)
        done = np.abs(new - q).max() < tol
        q = new
        if done:
            break
    return adjusted(q), q


def label_shift(p_va: np.ndarray, y_va: np.ndarray, p_te: np.ndarray) -> dict:
    """BCTS on the early-stopping maps, then EM on the test maps (see --em): calibrated and adjusted test posteriors,
    the estimated prior and the calibration."""
    t, b = bcts(p_va, y_va)
    source = calibrated(p_va, t, b).mean(0)
    cal = calibrated(p_te, t, b)
    adj, prior = em_prior(cal, source)
    return {"calibrated": cal, "adjusted": adj, "prior": prior, "temperature": t, "biases": b, "source": source}


def scores(y: np.ndarray, pred: np.ndarray, mask: np.ndarray) -> dict:
    from sklearn.metrics import f1_score

    four = mask & (y != BLOCK)
    f1 = f1_score(y[four], pred[four], labels=[k for k in range(len(LABELS)) if k != BLOCK], average="macro",
                  zero_division=0)
    return {"maps": int(mask.sum()), "accuracy": float((y[mask] == pred[mask]).mean()), "macro_f1_4": float(f1)}


def confusion(y: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """The confusion matrix of labels ``y`` and predictions ``pred`` (rows: the label, columns: the prediction, in
    LABELS order)."""
    return np.bincount(y * len(LABELS) + pred, minlength=len(LABELS) ** 2).reshape(len(LABELS), -1)


def shares_of(y: np.ndarray) -> list[float]:
    """The share of each pattern among labels (or predictions) ``y``."""
    return (np.bincount(y, minlength=len(LABELS)) / len(y)).tolist()


def share_error(est, truth) -> float:
    """Mean absolute share error per pattern, in points."""
    return float(100 * np.abs(np.asarray(est) - np.asarray(truth)).mean())


def label_shift_scored(data, votes, test: np.ndarray, te: np.ndarray, p_va: np.ndarray, y_va: np.ndarray,
                       probs: np.ndarray, pred: np.ndarray) -> tuple[dict, dict]:
    """(the --em scores of a fit: bcts_all/bcts_agreed, em_all/em_agreed, the shares and the calibration; the label
    shift itself, :func:`label_shift`) from its posteriors on its early-stopping maps ``p_va`` (labels ``y_va``) and
    on the test maps ``probs`` (plain predictions ``pred``)."""
    ls = label_shift(p_va, y_va, probs)
    adapted = scored(data, votes, test, te, ls["calibrated"], "bcts_")[1]
    adapted |= scored(data, votes, test, te, ls["adjusted"], "em_")[1]
    adapted["shares"] = {"labels": shares_of(data.y[te]), "count": shares_of(pred[te]),
                         "bcts_count": shares_of(ls["calibrated"].argmax(1)), "em": ls["prior"].tolist()}
    adapted["bcts"] = {"temperature": ls["temperature"], "biases": ls["biases"].tolist(),
                       "source_prior": ls["source"].tolist()}
    return adapted, ls


def score_fit(data, votes, test: np.ndarray, te: np.ndarray, va: np.ndarray, model, cfg, em: bool) -> tuple:
    """A fitted model scored on the held-out family: (its test posteriors, predictions, plain scores, the --em scores
    (empty without ``em``), the label shift or None). ``va``: the fit's early-stopping maps, which BCTS is fitted on."""
    probs = predict_proba(model, data, te, cfg)
    pred, plain = scored(data, votes, test, te, probs)
    adapted, ls = {}, None
    if em:
        adapted, ls = label_shift_scored(data, votes, test, te, predict_proba(model, data, va, cfg), data.y[va],
                                         probs, pred)
    return probs, pred, plain, adapted, ls


def em_summary(adapted: dict) -> str:
    """The --em part of a fit's printed line."""
    sh = adapted["shares"]
    return (f" em acc {adapted['em_all']['accuracy']:.3f} share error count "
            f"{share_error(sh['count'], sh['labels']):.1f} em {share_error(sh['em'], sh['labels']):.1f}")


def save_fit_probs(folder: str, family: str, seed: int, data, te: np.ndarray, probs: np.ndarray,
                   ls: dict | None) -> None:
    """Write a fit's test posteriors (and, after --em, the BCTS-calibrated ones) to FOLDER/FAMILY-seedS.npz, with
    the test maps' ids and labels (--save-probs)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    np.savez_compressed(Path(folder) / f"{family}-seed{seed}.npz", ids=np.asarray(data.ids)[te], y=data.y[te],
                        probs=probs, **({"bcts": ls["calibrated"]} if ls is not None else {}))


def scored(data, votes, test: np.ndarray, te: np.ndarray, probs: np.ndarray, prefix: str = "") -> tuple:
    """(the predictions over all maps, -1 outside the test family ``te``; their scores on every test map and on
    those two annotators agree on, as PREFIXall / PREFIXagreed)."""
    pred = np.full(len(data.y), -1)
    pred[te] = probs.argmax(1)
    return pred, {f"{prefix}all": scores(data.y, pred, test),
                  f"{prefix}agreed": scores(data.y, pred, test & votes.agreed)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("--sets", nargs="+", default=["annotations", "annotations/round8-e5-uniform"])
    ap.add_argument("--row", action="store_true", help="the row-scaled input channel")
    ap.add_argument("--init", help="pretrained weights (a .pt with state_dict and model_config)")
    ap.add_argument("--adabn", action="store_true")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--max-epochs", type=int, default=40)
    ap.add_argument("--only", help="test family to run (default: each in turn)")
    ap.add_argument("--lr", type=float, help="learning rate (default: 3e-4 with --init, else 3e-3, as train)")
    ap.add_argument("--soft", action="store_true", help="the annotators' vote shares as targets")
    ap.add_argument("--flip", type=float, default=0.0, help="probability of the token-order reversal augmentation")
    ap.add_argument("--freeze-bn", action="store_true",
                    help="keep the --init checkpoint's BatchNorm statistics while fine-tuning")
    ap.add_argument("--mix", type=int, default=0, help="synthetic maps added to each fit's training part")
    ap.add_argument("--tta", action="store_true", help="also score with test-time augmentation (five views)")
    ap.add_argument("--lp", action="store_true", help="with --init: a linear probe of the head first (LP-FT)")
    ap.add_argument("--em", action="store_true", help="also score after label-shift adaptation (BCTS + EM)")
    ap.add_argument("--save-probs", metavar="DIR",
                    help="also write each fit's test posteriors (plain, and BCTS-calibrated with --em) to "
                         "DIR/FAMILY-seedS.npz, with the test maps' ids")
    args = ap.parse_args()
    if args.lp and not (args.init and args.freeze_bn) or args.lp and (args.soft or args.flip):
        ap.error("--lp refits a pretrained CNN's head on its features under the pretrained BatchNorm statistics: it "
                 "needs --init and --freeze-bn, and takes neither --soft nor --flip")
    data, fams, votes = load_sets(args.sets)
    cfg, init = load_pretrained(args.init) if args.init else (CNNConfig(row_channel=args.row), None)
    # the fine-tuning rate of `train --init` (INIT_LR) when starting from a checkpoint, as train would use
    tcfg = TrainConfig(max_epochs=args.max_epochs, lr=args.lr or (INIT_LR if args.init else None),
                       freeze_bn=args.freeze_bn)
    if args.flip:
        flip_training_maps(args.flip)
    with torch_threads(2), open(HERE / "results.jsonl", "a") as out:
        for b, test, pool, te in directions(data, fams, args.only):
            x_te = model_inputs(data.maps, data.seps, te, cfg) if args.adabn else None
            for seed in range(args.seeds):
                t0 = time.time()
                tr, va = _split_train(data, pool, seed)
                fitdata, targets = data, (votes.shares if args.soft else None)
                if args.mix:
                    fitdata, extra = with_synthetic(data, args.mix, seed)
                    tr = np.concatenate([tr, extra])
                    if targets is not None:  # a synthetic map's target is its class, by construction
                        targets = np.concatenate([targets, np.eye(len(LABELS))[fitdata.y[extra]]])
                start, probed = init, {}
                if args.lp:
                    start = linear_probe(cfg, init, fitdata, tr, tcfg, seed)
                    lp = PatternCNN(cfg)
                    lp.load_state_dict(start)
                    probed = scored(data, votes, test, te, predict_proba(lp.eval(), data, te, cfg), "lp_")[1]
                model, epochs = fit_members(fitdata, tr, va, cfg, tcfg, seed=seed, init=start, targets=targets)
                probs, pred, plain, adapted, ls = score_fit(data, votes, test, te, va, model, cfg, args.em)
                if args.tta:
                    adapted |= scored(data, votes, test, te, tta_proba(model, data, te, cfg), "tta_")[1]
                if args.adabn:  # the same fit, its BatchNorm statistics re-estimated on the test family
                    adabn(model, x_te)
                    adapted |= scored(data, votes, test, te, predict_proba(model, data, te, cfg), "adabn_")[1]
                rec = {"name": args.name, "test": b, "train": sorted(set(fams[pool].tolist())), "seed": seed,
                       "train_maps": int(len(pool)), "best_epoch": int(np.median(epochs)), **plain,
                       "confusion": confusion(data.y[te], pred[te]).tolist(), **adapted, **probed,
                       "seconds": round(time.time() - t0, 1),
                       "args": {**vars(args), "init": public_path(args.init),
                                "save_probs": public_path(args.save_probs)},
                       **({"init_sha256": sha256_file(args.init)} if args.init else {})}
                out.write(json.dumps(rec) + "\n")
                out.flush()
                if args.save_probs:
                    save_fit_probs(args.save_probs, b, seed, data, te, probs, ls)
                extra = f" tta acc {adapted['tta_all']['accuracy']:.3f}" if args.tta else ""
                extra += f" adabn acc {adapted['adabn_all']['accuracy']:.3f}" if args.adabn else ""
                extra += f" lp acc {probed['lp_all']['accuracy']:.3f}" if probed else ""
                if args.em:
                    extra += em_summary(adapted)
                print(f"{args.name} test {b} seed {seed}: acc {rec['all']['accuracy']:.3f} "
                      f"F1-4 {rec['all']['macro_f1_4']:.3f}{extra} ({rec['seconds']} s)", flush=True)


if __name__ == "__main__":
    main()
