"""How many labelled maps adapting to a new encoder family takes: a learning curve on a held-out family.

    python research/generalisation/adapt_curve.py CHECKPOINT NAME [--ks 0 25 50 100 200] [--seeds 5] [--seed-start 0]
    python research/generalisation/adapt_curve.py --hold FAMILY PRETRAINED NAME [--ks ...]

CHECKPOINT is a classifier trained without the held-out family (the shipped one never saw E5). The held-out
family's labelled maps (annotations/round8-e5-uniform: 360 uniformly drawn E5 maps) are split once, by input
example, into a test third and a pool. For each k and seed: k maps drawn from the pool, the classifier fine-tuned
on the base set plus them as ``patterncnn adapt`` does (patterncnn.training.adapt), and scored on the test maps:
accuracy, four-class macro-F1, and count's share error per pattern against the hand labels of the same maps
(tasks pooled with equal weight, as a census). k = 0 is the classifier as it is. One JSON line per (k, seed) is
appended to adapt_curve.jsonl beside this script.

--hold FAMILY (minilm, mpnet, e5) holds out one family of all the labelled sets (--base and --new together) instead:
CHECKPOINT is then a pretrained CNN (`patterncnn pretrain`), from which a classifier is first fitted on the other
families' maps as `train`'s leave one encoder out fits one (`train --init`'s rate 3e-4, early stopping on a grouped
fifth, seed 0; maps whose input example the held-out family also has are left out), except that it may run 80
epochs where train's leave-one-out stops at 40: the classifier that family would meet. The held-out family's maps
are then split and adapted to as above. With --refit (only with --hold), each k instead refits from the pretrained
CNN itself (3e-4, --epochs epochs) on the other families' maps plus the k new ones (repeated to a quarter of each
epoch, or each once when they are more, as adapt): close to what `train --init` with the user's labels added would
give, without its cross-validation.

--freeze-bn (with --hold) fits the classifier without the family with the pretrained CNN's BatchNorm statistics kept,
as the shipped recipe does (`train --freeze-bn`), and so does --refit. --adapt-bn names how the adapting fits treat
the BatchNorm statistics: `re-estimate` (on the adapting batches), `keep` (AdaptConfig.freeze_bn), or both, each
scored on the same k maps drawn for a seed; the record's ``adapt_bn`` says which (lines without it re-estimated),
and ``base_freeze_bn`` that the classifier without the family was fitted with --freeze-bn. A record's ``seconds`` is
the fit's own time (0 for k = 0); lines written before 2026-11-26 timed the scoring too. Each run fits the classifier
without the family afresh (seed 0, or --base-seed: its fit and early-stopping split; recorded as ``base_seed`` when
not 0); the record's ``base_sha256`` names its weights (lines before 2026-11-26 10:30 have
none).

--bias-correction (with --hold) corrects the classifier without the family as `train --bias-correction`'s leave one
encoder out does: a logit shift fitted on its early-stopping maps (patterncnn.training.fit.correct_on), in its head.
--adapt-shift names what the adapting fits do with that shift: `as-is` (start from the corrected classifier and fit;
what `adapt` did until 2026-11-26 22:26 UTC), `reapply` (start from it with the shift taken out of the head, fit,
put the shift back). A `reapply` fit is also scored before the shift goes back in (``adapt_shift`` "none": what
adapting an uncorrected classifier gives, the lines of runs without --bias-correction; its ``seconds`` are the
`reapply` fit's, the same fit). k = 0 is scored with the shift ("as-is") and without ("none"). The record's
``base_shift`` is the shift; ``base_sha256`` names the weights before it.

--seen (with --hold and --ks 0) fits that classifier with the family's pool maps among its training maps (the family
seen; of the other families' maps only those sharing an input example with the test third are left out; early
stopping and the --bias-correction shift on a grouped fifth of all of them), and scores it on the same test third
at k = 0 (as-is and, with --bias-correction, none): the seen level the adapted classifiers are compared with, fitted
by the shipped recipe (records carry ``seen``). The ``*-fbn-refit`` rows' seen level instead refitted
from the pretrained CNN for 20 epochs without early stopping or correction.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import torch
from loeo import held_out

from patterncnn.classifier.model import PatternCNN, config_from_dict
from patterncnn.core.maps import families
from patterncnn.core.segments import rule_out_block
from patterncnn.labelling.sets import join_labelled, load_labelled
from patterncnn.training.adapt import AdaptConfig, _fit, _scores, _train_index
from patterncnn.training.evaluate import _split_train, share_error
from patterncnn.training.fit import (
    INIT_LR,
    TrainConfig,
    correct_on,
    fit_members,
    predict_proba,
    shift_head,
    torch_threads,
)

HERE = Path(__file__).resolve().parent


def state_sha256(state: dict) -> str:
    """A hash of a state dict's tensors (names and bytes), to tell whether two runs fitted the same classifier."""
    h = hashlib.sha256()
    for name, t in sorted(state.items()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def split_new(data, new_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(test third, pool) of the new family's maps ``new_idx``: split once by input example (seed 1234)."""
    groups = sorted(set(data.groups[new_idx].tolist()))
    split = np.random.default_rng(1234).permutation(len(groups))
    test_groups = {groups[i] for i in split[: len(groups) // 3]}
    return (np.array([i for i in new_idx if data.groups[i] in test_groups]),
            np.array([i for i in new_idx if data.groups[i] not in test_groups]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("name")
    ap.add_argument("--base", nargs="+", default=["annotations"])
    ap.add_argument("--new", default="annotations/round8-e5-uniform")
    ap.add_argument("--ks", nargs="+", type=int, default=[0, 25, 50, 100, 200])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--seed-start", type=int, default=0, help="the first seed (to add seeds to an earlier run)")
    ap.add_argument("--base-seed", type=int, default=0,
                    help="with --hold: the seed of the classifier without the family (its early-stopping split too)")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--lr", type=float, help="the adapting rate (default: AdaptConfig's)")
    ap.add_argument("--refit", action="store_true", help="with --hold: refit from the pretrained CNN for every k")
    ap.add_argument("--seen", action="store_true",
                    help="with --hold: fit the classifier with the family's pool maps too, score it at k = 0 only")
    ap.add_argument("--hold", help="the family to hold out of --base and --new together (CHECKPOINT: a pretrained CNN)")
    ap.add_argument("--freeze-bn", action="store_true",
                    help="with --hold: fit (and --refit) with the pretrained BatchNorm statistics kept")
    ap.add_argument("--adapt-bn", nargs="+", choices=["re-estimate", "keep"], default=["re-estimate"],
                    help="the adapting fits' BatchNorm statistics (default: %(default)s)")
    ap.add_argument("--bias-correction", action="store_true",
                    help="with --hold: correct the classifier without the family on its early-stopping maps")
    ap.add_argument("--adapt-shift", nargs="+", choices=["as-is", "reapply"], default=["as-is"],
                    help="with --bias-correction: what the adapting fits do with its shift (default: %(default)s)")
    args = ap.parse_args()
    if args.refit and not args.hold:
        ap.error("--refit refits from a pretrained CNN: it needs --hold FAMILY")
    if args.refit and "keep" in args.adapt_bn:
        ap.error("--refit refits from the pretrained CNN; its BatchNorm statistics follow --freeze-bn, not --adapt-bn")
    if args.bias_correction and (not args.hold or args.refit):
        ap.error("--bias-correction corrects the classifier without the family: it needs --hold FAMILY, not --refit")
    if args.seen and (not args.hold or args.refit or args.ks != [0]):
        ap.error("--seen fits the classifier with the held-out family's pool maps: it needs --hold FAMILY and --ks 0, "
                 "not --refit")
    if args.freeze_bn and not args.hold:
        ap.error("--freeze-bn is how the classifier without the family is fitted: it needs --hold FAMILY")
    ckpt = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
    cfg = config_from_dict(ckpt["model_config"])
    if args.hold:
        data = load_labelled([*args.base, args.new])
        fams = families(data.ids)
        if args.hold not in fams:
            raise SystemExit(f"--hold {args.hold}: no such family among {sorted(set(fams.tolist()))}")
        base_idx, new_idx = held_out(data, fams, args.hold)
        test, pool = split_new(data, new_idx)
        pretrained, base_sha, base_shift, unshifted = ckpt["state_dict"], None, None, None
        if not args.refit or 0 in args.ks:  # a refit starts from the pretrained CNN: only k = 0 needs the classifier
            # --seen: the family's pool maps are training maps too (the family seen), and only the other families'
            # maps that share an input example with its test third are left out; the test third is never trained on
            fit_idx = np.concatenate([np.flatnonzero((fams != args.hold) & ~np.isin(data.groups, data.groups[test])),
                                      pool]) if args.seen else base_idx
            tr, va = _split_train(data, fit_idx, args.base_seed)
            t0 = time.time()
            with torch_threads(2):
                model, _ = fit_members(data, tr, va, cfg, TrainConfig(init=args.checkpoint, freeze_bn=args.freeze_bn),
                                       seed=args.base_seed, init=pretrained)
            base_sha = state_sha256(model.state_dict())  # the fit itself, before any correction
            unshifted = {k: v.clone() for k, v in model.state_dict().items()}
            if args.bias_correction:
                base_shift = correct_on(model, data, va, cfg)
            ckpt = {"model_config": ckpt["model_config"], "state_dict": model.state_dict()}
            print(f"classifier {'with' if args.seen else 'without'} {args.hold}{' pool' if args.seen else ''}: "
                  f"{len(tr) + len(va)} maps (base seed {args.base_seed}), {time.time() - t0:.0f} s"
                  + (f", shift {np.round(base_shift, 3).tolist()}" if base_shift is not None else ""), flush=True)
    else:
        base_sha, base_shift, unshifted = None, None, None
        base, new = load_labelled(args.base), load_labelled(args.new)
        data = join_labelled([base, new], ["base", "new"])
        base_idx, new_idx = np.arange(len(base.y)), np.arange(len(base.y), len(data.y))
        test, pool = split_new(data, new_idx)
    mask = np.zeros(len(data.y), dtype=bool)
    mask[test] = True
    with torch_threads(2), open(HERE / "adapt_curve.jsonl", "a") as out:
        for k in args.ks:
            for seed in range(args.seed_start, args.seed_start + (args.seeds if k else 1)):
                rng = np.random.default_rng(seed)
                if k == 0:
                    fits = []
                    for how, state in [("as-is", ckpt["state_dict"]), ("none", unshifted)][
                            :2 if base_shift is not None else 1]:
                        model = PatternCNN(cfg)
                        model.load_state_dict(state)
                        fits.append((None, model.eval(), 0.0, None, how if base_shift is not None else None))
                else:
                    chosen = rng.choice(pool, size=min(k, len(pool)), replace=False)
                    train = _train_index(base_idx, chosen, AdaptConfig.new_share, rng)
                    fits = []
                    for bn in args.adapt_bn:
                        for how in args.adapt_shift if base_shift is not None else [None]:
                            acfg = AdaptConfig(epochs=args.epochs, seed=seed, freeze_bn=bn == "keep",
                                               **({"lr": args.lr} if args.lr else {}))
                            start = unshifted if how == "reapply" else ckpt["state_dict"]
                            if args.refit:
                                acfg, start = dataclasses.replace(acfg, lr=args.lr or INIT_LR,
                                                                  freeze_bn=args.freeze_bn), pretrained
                            t0 = time.time()
                            model = _fit(data, train, cfg, start, acfg, seed)
                            seconds = time.time() - t0
                            if how == "reapply":
                                fits.append((bn, model, seconds, acfg.lr, "none"))
                                model = PatternCNN(cfg)
                                model.load_state_dict(fits[-1][1].state_dict())
                                shift_head(model, base_shift)
                                model.eval()
                            fits.append((bn, model, seconds, acfg.lr, how))
                        if args.refit:
                            break  # a refit's statistics follow --freeze-bn
                for bn, model, seconds, lr, how in fits:
                    probs = rule_out_block(predict_proba(model, data, test, cfg).astype(np.float64),
                                           [data.seps[i] for i in test])
                    pred = np.full(len(data.y), -1)
                    pred[test] = probs.argmax(1)
                    err = share_error(data, pred, mask)
                    rec = {"name": args.name, "k": k, "seed": seed, "test_maps": int(len(test)),
                           "pool": int(len(pool)), **_scores(data, test, probs.argmax(1)), "share_error": err,
                           "mean_abs_share_error": float(np.mean([abs(v) for key, v in err.items()
                                                                  if key not in ("maps", "tasks")])),
                           "seconds": round(seconds, 1), "checkpoint": Path(args.checkpoint).name,
                           **({"held_out": args.hold} if args.hold else {}), **({"lr": lr} if k else {}),
                           **({"refit": True} if args.refit else {}),
                           **({"base_freeze_bn": True} if args.freeze_bn else {}),
                           **({"base_sha256": base_sha} if base_sha else {}),
                           **({"base_seed": args.base_seed} if args.base_seed else {}),
                           **({"seen": True} if args.seen else {}),
                           **({"adapt_bn": bn} if bn and not args.refit else {}),
                           **({"adapt_shift": how, "base_shift": base_shift.tolist()} if how else {})}
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
                    how = (f" {bn}" if "adapt_bn" in rec else "") + (f" shift {how}" if how else "")
                    print(f"{args.name} k={k} seed {seed}{how}: acc {rec['accuracy']:.3f} "
                          f"F1-4 {rec['four_class_macro_f1']:.3f} "
                          f"share error {100 * rec['mean_abs_share_error']:.1f} points ({rec['seconds']} s)",
                          flush=True)


if __name__ == "__main__":
    main()
