"""Pretrain the pattern CNN on synthetic maps labelled by construction (streamed, never stored).

    python research/generalisation/pretrain.py OUT.pt [--maps 1000000] [--row] [--seed 0] [--batch 128]

Maps come from synthetic.py (a procedural generator that follows ANNOTATION_GUIDE.md 1.1), a pool of 4,096 at a
time, through the classifier's own preprocessing with the training augmentation (length resampling, gamma), into
the 8-layer CNN; AdamW with a cosine schedule over the whole stream. Writes a checkpoint with ``state_dict`` and
``model_config`` that loeo.py --init and ``patterncnn.training.fit.fit(init=...)`` start from, and prints the
accuracy on a fixed held-out synthetic batch as it goes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import synthetic
import torch
import torch.nn.functional as F

from patterncnn.classifier.model import CNNConfig, PatternCNN, model_config_dict, preprocess
from patterncnn.training.fit import TrainConfig, torch_threads


def inputs(samples, cfg: CNNConfig, rng: np.random.Generator | None, tcfg: TrainConfig) -> torch.Tensor:
    """Model inputs of a list of synthetic samples, in their order; maps of one T are preprocessed together (one
    length resampling drawn per T group, a gamma per map), which is what makes millions of maps affordable."""
    by_t: dict[int, list[int]] = {}
    for i, s in enumerate(samples):
        by_t.setdefault(s.map.shape[0], []).append(i)
    out = [None] * len(samples)
    for t, idx in by_t.items():
        resample = None
        if rng is not None and rng.random() < tcfg.resample_p:
            resample = max(4, int(round(t * rng.uniform(*tcfg.resample_range))))
        maps = torch.from_numpy(np.stack([samples[i].map for i in idx]))
        x = preprocess(maps, [samples[i].seps for i in idx], cfg, resample_to=resample)
        if rng is not None:
            x[:, 0] = x[:, 0] ** torch.from_numpy(rng.uniform(*tcfg.gamma_range, size=len(idx))).float()[:, None, None]
        for k, i in enumerate(idx):
            out[i] = x[k]
    return torch.stack(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--maps", type=int, default=1_000_000)
    ap.add_argument("--row", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--max-t", type=int, default=256)
    args = ap.parse_args()
    cfg, tcfg = CNNConfig(row_channel=args.row), TrainConfig()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    held = synthetic.batch(2000, np.random.default_rng(10_000 + args.seed), max_t=args.max_t)
    x_held, y_held = inputs(held, cfg, None, tcfg), torch.tensor([s.label for s in held])
    model = PatternCNN(cfg)
    steps = args.maps // args.batch
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=tcfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps, pct_start=0.05)
    stream = synthetic.iter_batches(args.batch, rng, max_t=args.max_t)
    t0, seen, loss_sum = time.time(), 0, 0.0
    with torch_threads(2):
        for step in range(steps):
            samples = next(stream)
            x, y = inputs(samples, cfg, rng, tcfg), torch.tensor([s.label for s in samples])
            model.train()
            loss = F.cross_entropy(model(x), y, label_smoothing=tcfg.label_smoothing)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            seen += len(samples)
            loss_sum += loss.item()
            if (step + 1) % 500 == 0 or step + 1 == steps:
                model.eval()
                with torch.inference_mode():
                    acc = float((model(x_held).argmax(1) == y_held).float().mean())
                print(f"{seen} maps, {time.time() - t0:.0f} s, loss {loss_sum / 500:.3f}, held-out synthetic "
                      f"accuracy {acc:.3f}", flush=True)
                loss_sum = 0.0
                torch.save({"state_dict": model.state_dict(), "model_config": model_config_dict(cfg),
                            "pretrained_on": {"synthetic_maps": seen, "seed": args.seed, "max_t": args.max_t}},
                           args.out)


if __name__ == "__main__":
    main()
