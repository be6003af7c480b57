"""Fine-tuning with one more loss term than train's, measured by leaving one encoder family out: semi-supervised
on unlabelled maps (FixMatch or a mean teacher), domain-adversarial (DANN), or mixup.

    python research/generalisation/semisup.py NAME --init CKPT [--unlabelled STORE [STORE ...]] [--seeds 5]
        [--method fixmatch|mean-teacher|dann|mixup] [--freeze-bn] [--only FAMILY] [--threshold 0.85] [--mu 2]
        [--lambda-u 1] [--ema 0.99] [--rampup 5] [--gamma 10] [--alpha 0.2] [--transductive] [--em]
        [--save-probs DIR]

The same leave-one-family-out fits as `loeo.py` (its `held_out` split, early stopping on a grouped fifth of the
training maps, the pretrained CNN as the start, train's fine-tuning rate; --freeze-bn as train's), with one more
loss term. For fixmatch, mean-teacher and dann it is on unlabelled maps: every labelled batch of B maps comes with
mu * B of them.

* --method fixmatch (Sohn et al. 2020): the model's prediction on an unaugmented view is the pseudo-label wherever
  its probability reaches --threshold, and the loss asks the same prediction (cross-entropy) of a strongly
  augmented view of that map.
* --method mean-teacher (Tarvainen & Valpola 2017): a teacher whose weights are the exponential moving average
  (decay --ema) of the student's; the loss asks the student's softmax on a strong view to match the teacher's on a
  weakly augmented view (train's augmentation): the squared difference summed over classes, averaged over maps,
  weighted --lambda-u (default 10: the CIFAR-10 weight of the paper's reference code, CuriousAI/mean-teacher, 100
  on the sum over classes divided by its 10 classes) times exp(-5 (1 - t)^2), t rising from 0 to 1 over the first
  --rampup epochs. Early stopping and scoring use the teacher. The teacher's BatchNorm running statistics are the
  student's, copied after every step; with --freeze-bn both keep the pretrained ones.
* --method dann (Ganin et al. 2016, domain-adversarial training): a domain classifier (features -> 100 -> ReLU ->
  one logit per encoder family) learns from the CNN's pooled features which family a map comes from, through a
  gradient reversal layer, so the CNN's features learn to hide it. The families are those of the labelled batch
  (the training families) and of its unlabelled maps (train's weak augmentation); with --transductive the held-out
  family's unlabelled maps join as one more family. The reversal's coefficient rises as Ganin et al.'s,
  2 / (1 + exp(-gamma p)) - 1 with --gamma 10, p the share of the --max-epochs' steps done; the domain loss is
  cross-entropy over families, weighted 1. The domain classifier learns at ten times the fit's rate (a new head
  beside a fine-tuned network, as the Transfer-Learning-Library's DANN). The record keeps the domain classifier's
  accuracy over each fit's last epoch (chance: the commonest family's share of its maps).
* --method mixup (Zhang et al. 2018): each labelled batch is replaced by its convex mix with a permutation of
  itself, inputs and loss alike, lam ~ Beta(--alpha, --alpha) per batch (0.2: their ImageNet setting); the loss is
  lam CE(y) + (1 - lam) CE(y permuted), each with train's class weights and label smoothing. No unlabelled maps.

--em also scores each fit after bias-corrected temperature scaling and EM, as `loeo.py --em` (bcts_all, em_all, the
shares); --save-probs DIR writes its posteriors as `loeo.py --save-probs` (for `by_votes.py`).

The strong view keeps the class:

* dropping 10-30 % of the ordinary tokens (never [CLS], a separator, or a token whose column stands out: its
  column mean above 1.5 / T), the rows renormalised;
* a temperature: each row to the power 1 / tau, tau in [0.7, 1.4], renormalised (sharper or flatter rows);
* resampling the length (x 0.6 - 1.6, nearest) and the intensity gamma (as train's augmentation).

The unlabelled maps come from map stores (`patterncnn sample --design uniform --no-png`). By default a fit sees only
the unlabelled maps of the families it trains on (what a shipped classifier can have seen); --transductive adds the
held-out family's own unlabelled maps (what a census could do on the user's encoder before classifying it). The
stores are drawn from GLUE *train* splits, the labelled maps from dev splits, so no input example is on both sides.
One JSON line per (held-out family, seed) is appended to results.jsonl, as loeo.py's. (Until 2026-11-26 this
script was fixmatch.py, FixMatch only; its rows have no "method".)
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from patterncnn.classifier.model import PatternCNN, member_config, preprocess
from patterncnn.core.fileio import public_path, sha256_file
from patterncnn.core.maps import MapStore, classifier_input, encoder_family
from patterncnn.core.scores import macro_f1
from patterncnn.training.evaluate import _split_train
from patterncnn.training.fit import (
    INIT_LR,
    TrainConfig,
    class_weights,
    model_inputs,
    torch_threads,
    train_mode,
)

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):
    import sys

    sys.path.insert(0, str(HERE))
from loeo import (  # noqa: E402
    confusion,
    directions,
    em_summary,
    load_pretrained,
    load_sets,
    save_fit_probs,
    score_fit,
)


def load_unlabelled(stores: list[str]) -> tuple[list[np.ndarray], list[list[int] | None], np.ndarray]:
    """(maps, seps, family of each) of every map in the stores."""
    maps, seps, fams = [], [], []
    for root in stores:
        store = MapStore(root)
        for meta in store.meta:
            arr, errors, _ = classifier_input(store.get(meta["id"]), seps=meta.get("seps"))
            if errors:
                raise ValueError(f"{root}: {meta['id']}: {errors[0]}")
            maps.append(arr)
            seps.append(meta.get("seps"))
            fams.append(encoder_family(meta["id"]))
    return maps, seps, np.array(fams)


def strong_view(a: np.ndarray, seps: list[int] | None, rng: np.random.Generator) -> tuple[np.ndarray, list[int]]:
    """A class-keeping strong augmentation of one map: token dropping and a temperature (see the module doc)."""
    t = a.shape[0]
    seps = [s for s in (seps or []) if 0 <= s < t]
    special = {0, *seps}
    col = a.mean(axis=0)
    droppable = [i for i in range(1, t) if i not in special and col[i] <= 1.5 / t]
    k = min(len(droppable), int(round(t * rng.uniform(0.1, 0.3))), max(0, t - 4))
    if k:
        drop = set(rng.choice(droppable, size=k, replace=False).tolist())
        keep = np.array([i for i in range(t) if i not in drop])
        a = a[np.ix_(keep, keep)]
        new_pos = {old: new for new, old in enumerate(keep.tolist())}
        seps = [new_pos[s] for s in seps]
    tau = rng.uniform(0.7, 1.4)
    a = np.power(np.maximum(a, 1e-12), 1.0 / tau)
    a = (a / a.sum(axis=1, keepdims=True)).astype(np.float32)
    return a, seps


def strong_inputs(maps, seps, idx, cfg, rng: np.random.Generator) -> torch.Tensor:
    out = []
    for i in idx:
        a, s = strong_view(maps[i], seps[i], rng)
        t = a.shape[0]
        resample = max(4, int(round(t * rng.uniform(0.6, 1.6)))) if rng.random() < 0.7 else None
        x = preprocess(torch.from_numpy(a)[None], [s], cfg, resample_to=resample)
        x[:, 0] = x[:, 0] ** float(rng.uniform(0.7, 1.4))
        out.append(x)
    return torch.cat(out)


class _Reverse(torch.autograd.Function):
    """The gradient reversal layer (Ganin et al. 2016): the identity forward, the gradient times -coefficient back."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, coefficient: float) -> torch.Tensor:
        ctx.coefficient = coefficient
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return -ctx.coefficient * grad, None


def reversal_coefficient(progress: float, gamma: float) -> float:
    """DANN's schedule for the reversal's coefficient: 2 / (1 + exp(-gamma p)) - 1, from 0 at p = 0 towards 1."""
    return float(2.0 / (1.0 + np.exp(-gamma * progress)) - 1.0)


def fit_semisup(data, train_idx, val_idx, cfg, tcfg: TrainConfig, seed: int, init: dict, unl_maps, unl_seps,
                unl_idx: np.ndarray, x_unl_plain: torch.Tensor | None, args, domains: tuple | None = None):
    """fit.fit's loop (labelled loss, class weights, label smoothing, cosine rate, early stopping on the
    validation macro-F1, --freeze-bn) with the term of ``args.method`` added (see the module doc). ``domains``
    (dann): (the family index of every labelled map, of every unlabelled map, the number of families).
    Returns (the model scored: the student, or the mean teacher; best epoch; a diagnostic: FixMatch's rate of maps
    passing the threshold, DANN's domain accuracy over the last epoch, or None)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    urng = np.random.default_rng(10_000 + seed)
    model = PatternCNN(member_config(cfg))
    model.load_state_dict(init)
    teacher, discriminator = None, None
    if args.method == "mean-teacher":
        teacher = copy.deepcopy(model).eval()
        for q in teacher.parameters():
            q.requires_grad_(False)
    scored = teacher if teacher is not None else model
    groups = [{"params": model.parameters()}]
    if args.method == "dann":
        lab_dom, unl_dom, n_dom = (torch.as_tensor(d) if i < 2 else d for i, d in enumerate(domains))
        with torch.no_grad():  # in eval mode: a forward pass in train mode would move the BatchNorm statistics
            n_features = model.eval().forward_features(x_unl_plain[:2]).shape[1]
        discriminator = nn.Sequential(nn.Linear(n_features, 100), nn.ReLU(), nn.Linear(100, n_dom))
        groups.append({"params": discriminator.parameters(), "lr": 10 * tcfg.lr})
    opt = torch.optim.AdamW(groups, lr=tcfg.lr, weight_decay=tcfg.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=tcfg.max_epochs)
    y = torch.as_tensor(data.y)
    weights = torch.tensor(class_weights(data.y[train_idx], tcfg.class_weight_power), dtype=torch.float32)
    x_val = model_inputs(data.maps, data.seps, val_idx, cfg)
    best, stale, kept = (-1.0, 0, None), 0, []
    # the starts of an epoch's batches: every batch of two maps or more (BatchNorm needs two)
    starts = [s for s in range(0, len(train_idx), tcfg.batch_size) if min(tcfg.batch_size, len(train_idx) - s) >= 2]
    step, total_steps = 0, tcfg.max_epochs * len(starts)

    def labelled_loss(logits, targets):
        return F.cross_entropy(logits, targets, weight=weights, label_smoothing=tcfg.label_smoothing)

    for epoch in range(1, tcfg.max_epochs + 1):
        train_mode(model, tcfg.freeze_bn)
        if discriminator is not None:
            discriminator.train()
            domain_hits = []
        order = rng.permutation(train_idx)
        x_all = model_inputs(data.maps, data.seps, order, cfg, rng, tcfg)
        for s in starts:
            xb, yb = x_all[s : s + tcfg.batch_size], y[order[s : s + tcfg.batch_size]]
            if args.method == "mixup":
                lam = float(urng.beta(args.alpha, args.alpha))
                perm = torch.from_numpy(urng.permutation(len(yb)))
                logits = model(lam * xb + (1.0 - lam) * xb[perm])
                loss = lam * labelled_loss(logits, yb) + (1.0 - lam) * labelled_loss(logits, yb[perm])
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
                continue
            u = unl_idx[urng.choice(len(unl_idx), size=args.mu * len(yb), replace=False)]
            if discriminator is not None:  # DANN: the families told apart through the reversed gradient
                xu = model_inputs(unl_maps, unl_seps, u, cfg, urng, tcfg)
                feats = model.forward_features(torch.cat([xb, xu]))
                lb = model.forward_head(feats[: len(yb)])
                coefficient = reversal_coefficient(step / total_steps, args.gamma)
                dom_logits = discriminator(_Reverse.apply(feats, coefficient))
                dom = torch.cat([lab_dom[order[s : s + tcfg.batch_size]], unl_dom[u]])
                loss = labelled_loss(lb, yb) + F.cross_entropy(dom_logits, dom)
                domain_hits.append((dom_logits.argmax(1) == dom).float().mean().item())
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
                continue
            xs = strong_inputs(unl_maps, unl_seps, u, cfg, urng)
            if teacher is None:  # FixMatch: pseudo-labels from the student's own unaugmented view
                logits = model(torch.cat([xb, x_unl_plain[u], xs]))
                lb, lw, ls = logits[: len(yb)], logits[len(yb) : len(yb) + len(u)], logits[len(yb) + len(u) :]
                with torch.no_grad():
                    conf, pseudo = torch.softmax(lw.detach(), dim=1).max(dim=1)
                    mask = (conf >= args.threshold).float()
                kept.append(float(mask.mean()))
                unl = (F.cross_entropy(ls, pseudo, reduction="none") * mask).mean()
                weight = args.lambda_u
            else:  # mean teacher: the teacher's softmax on a weak view, asked of the student's on a strong one
                logits = model(torch.cat([xb, xs]))
                lb, ls = logits[: len(yb)], logits[len(yb) :]
                with torch.no_grad():
                    target = torch.softmax(teacher(model_inputs(unl_maps, unl_seps, u, cfg, urng, tcfg)), dim=1)
                unl = ((torch.softmax(ls, dim=1) - target) ** 2).sum(dim=1).mean()
                t = min(1.0, step / (args.rampup * len(starts))) if args.rampup else 1.0
                weight = args.lambda_u * float(np.exp(-5.0 * (1.0 - t) ** 2))
            loss = F.cross_entropy(lb, yb, weight=weights, label_smoothing=tcfg.label_smoothing) + weight * unl
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if teacher is not None:
                with torch.no_grad():
                    for qt, qs in zip(teacher.parameters(), model.parameters(), strict=True):
                        qt.mul_(args.ema).add_(qs.detach(), alpha=1.0 - args.ema)
                    for bt, bs in zip(teacher.buffers(), model.buffers(), strict=True):
                        bt.copy_(bs)  # BatchNorm statistics: the student's (the kept ones with --freeze-bn)
        sched.step()
        model.eval()
        with torch.inference_mode():
            f1 = macro_f1(data.y[val_idx], scored(x_val).argmax(1).numpy())
        if f1 > best[0]:
            best, stale = (f1, epoch, copy.deepcopy(scored.state_dict())), 0
        else:
            stale += 1
        if stale >= tcfg.patience:
            break
    scored.load_state_dict(best[2])
    if discriminator is not None:
        return scored.eval(), best[1], float(np.mean(domain_hits))
    return scored.eval(), best[1], (float(np.mean(kept)) if kept else None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("--sets", nargs="+", default=["annotations", "annotations/round8-e5-uniform"])
    ap.add_argument("--init", required=True, help="pretrained weights (`patterncnn pretrain`)")
    ap.add_argument("--unlabelled", nargs="+", default=[], help="map stores of unlabelled maps (all but mixup)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--max-epochs", type=int, default=40)
    ap.add_argument("--only", help="held-out family to run (default: each in turn)")
    ap.add_argument("--threshold", type=float, default=0.85)
    ap.add_argument("--mu", type=int, default=2, help="unlabelled maps per labelled map in a batch")
    ap.add_argument("--lambda-u", type=float,
                    help="the unlabelled term's weight (default: 1 for fixmatch, 10 for mean-teacher)")
    ap.add_argument("--method", choices=["fixmatch", "mean-teacher", "dann", "mixup"], default="fixmatch")
    ap.add_argument("--gamma", type=float, default=10.0, help="dann: the steepness of the reversal's schedule")
    ap.add_argument("--alpha", type=float, default=0.2, help="mixup: lam ~ Beta(alpha, alpha)")
    ap.add_argument("--ema", type=float, default=0.99, help="mean teacher: the teacher's decay per step")
    ap.add_argument("--rampup", type=int, default=5, help="mean teacher: epochs over which the weight rises")
    ap.add_argument("--freeze-bn", action="store_true",
                    help="keep the --init checkpoint's BatchNorm statistics while fine-tuning (train --freeze-bn)")
    ap.add_argument("--transductive", action="store_true",
                    help="also the held-out family's own unlabelled maps (never its labelled ones)")
    ap.add_argument("--em", action="store_true", help="also score after label-shift adaptation (BCTS + EM)")
    ap.add_argument("--save-probs", metavar="DIR", help="also write each fit's test posteriors, as loeo.py's")
    args = ap.parse_args()
    if (args.method == "mixup") == bool(args.unlabelled) or args.method == "mixup" and args.transductive:
        ap.error("--unlabelled map stores are needed by fixmatch, mean-teacher and dann, and taken by no other "
                 "method (nor --transductive)")
    if args.lambda_u is None:
        args.lambda_u = 10.0 if args.method == "mean-teacher" else 1.0
    data, fams, votes = load_sets(args.sets)
    cfg, init = load_pretrained(args.init)
    tcfg = TrainConfig(max_epochs=args.max_epochs, lr=INIT_LR, freeze_bn=args.freeze_bn)
    unl_maps, unl_seps, unl_fams = load_unlabelled(args.unlabelled)
    x_unl_plain = None
    if unl_maps:
        with torch_threads(2):
            x_unl_plain = model_inputs(unl_maps, unl_seps, np.arange(len(unl_maps)), cfg)
    with torch_threads(2), open(HERE / "results.jsonl", "a") as out:
        for b, test, pool, te in directions(data, fams, args.only):
            unl_idx = np.flatnonzero((unl_fams != b) | args.transductive)
            domains, names = None, None
            if args.method == "dann":  # every family of the fit, labelled or not, one domain each
                names = sorted(set(fams[pool].tolist()) | set(unl_fams[unl_idx].tolist()))
                index = {f: k for k, f in enumerate(names)}
                domains = (np.array([index.get(f, -1) for f in fams]), np.array([index.get(f, -1) for f in unl_fams]),
                           len(names))
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                t0 = time.time()
                tr, va = _split_train(data, pool, seed)
                model, epoch, kept = fit_semisup(data, tr, va, cfg, tcfg, seed, init, unl_maps, unl_seps, unl_idx,
                                                 x_unl_plain, args, domains)
                probs, pred, plain, adapted, ls = score_fit(data, votes, test, te, va, model, cfg, args.em)
                if args.save_probs:
                    save_fit_probs(args.save_probs, b, seed, data, te, probs, ls)
                rec = {"name": args.name, "test": b, "train": sorted(set(fams[pool].tolist())), "seed": seed,
                       "train_maps": int(len(pool)), "unlabelled_maps": int(len(unl_idx)),
                       "unlabelled_families": sorted(set(unl_fams[unl_idx].tolist())), "best_epoch": epoch,
                       "method": args.method,
                       **({"domains": names, "domain_accuracy": round(kept, 3)} if names else
                          {"pseudo_label_rate": None if kept is None else round(kept, 3)}),
                       **plain,
                       "confusion": confusion(data.y[te], pred[te]).tolist(), **adapted,
                       "seconds": round(time.time() - t0, 1),
                       "args": {**vars(args), "init": public_path(args.init),
                                "unlabelled": [public_path(u) for u in args.unlabelled],
                                "save_probs": public_path(args.save_probs)},
                       "init_sha256": sha256_file(args.init)}
                out.write(json.dumps(rec) + "\n")
                out.flush()
                diagnostic = f" domain acc {kept:.2f}" if names else f" pseudo {'-' if kept is None else f'{kept:.2f}'}"
                extra = em_summary(adapted) if args.em else ""
                bcts_acc = f" bcts acc {adapted['bcts_all']['accuracy']:.3f}" if args.em else ""
                print(f"{args.name} test {b} seed {seed}: acc {rec['all']['accuracy']:.3f} "
                      f"F1-4 {rec['all']['macro_f1_4']:.3f}{bcts_acc}{extra}{diagnostic} epoch {epoch} "
                      f"({rec['seconds']} s)", flush=True)


if __name__ == "__main__":
    main()
