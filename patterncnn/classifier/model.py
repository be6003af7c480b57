"""The 8-layer ReLU CNN of Kovaleva et al. (2019), and the one preprocessing function it uses.

Usage::

    cfg = CNNConfig(grid=32, representation="area", segment_channel=True)
    model = PatternCNN(cfg)
    x = preprocess(maps, seps, cfg)      # maps: (N, T, T) -> x: (N, C, grid, grid)
    logits = model(x)                    # (N, 5), classes in LABELS order
    model = build_model(CNNConfig(members=3))   # the mean of three such CNNs (PatternEnsemble)

**Preprocessing** turns a T×T map (T from ~5 to 512) into a fixed grid:

* ``area``: adaptive average pooling to grid×grid. It preserves mass (each cell is the mean of
  the map cells it covers), so a one-token diagonal or column survives downsampling as a faint
  line instead of vanishing between samples; small maps are replicated up, not smoothed.
* ``bilinear``: bilinear interpolation to grid×grid (antialiased when shrinking).

Then each map is scaled by its own maximum (as a person looks at it: 0 to the map's max; with
``intensity="sqrt"`` the square root of that, so one very bright cell does not hide the rest), and,
with ``segment_channel``, a second channel marks the two segment squares (split after the first
run of separators, :mod:`patterncnn.core.segments`; all ones for a single segment), so block can be told
from diffuse haze; with ``structure_channels``, two more mark the band |i - j| <= 1 and the
``[CLS]``/``[SEP]`` columns: the same structural facts the hand-crafted features use, handed to
the CNN as pictures. With ``mass_channel``, one more channel carries log2 of each cell's mass
relative to a uniform row (``T * a``, clipped to [1/16, 64]): scaling by the maximum says *where*
the mass is, this says how concentrated it is (a [CLS] column holding 90 % of every row vs a faint
one over haze). With ``column_channel``, one more carries the ``[CLS]`` and ``[SEP]`` columns' cells, each
against its row's maximum (clarification 7: a column counts where it stands out in a row's own background),
averaged over the rows of a grid cell but *not* over its columns (max-pooled across them): a one-token column
of a long map keeps its strength instead of being averaged with the 3-8 tokens beside it.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..core.errors import ClassifierError
from ..core.labels import LABELS
from ..core.segments import same_segment, valid_seps

REPRESENTATIONS = ("area", "bilinear")


@dataclasses.dataclass
class CNNConfig:
    grid: int = 16
    representation: str = "area"
    segment_channel: bool = True
    structure_channels: bool = True  # + diagonal band (|i-j|<=1) and [CLS]/[SEP] column masks
    intensity: str = "linear"  # or "sqrt": compresses a bright [CLS] corner so faint structure stays visible
    mass_channel: bool = True  # + log of the mass relative to uniform (T * a): how concentrated, not only where
    row_channel: bool = False  # + each row scaled by its own maximum (the guide: judge a column row by row)
    column_channel: bool = False  # + the [CLS]/[SEP] columns' strength in each row against its maximum, undiluted
    widths: tuple[int, ...] = (8, 8, 16, 16, 32, 32, 64, 64)  # exactly 8 conv layers
    pool_after: tuple[int, ...] = (1, 3, 5)  # 2x2 max-pool after these conv layers (0-based)
    dropout: float = 0.2
    head: str = "avg"  # "avg": global average pool; "flatten": keep the final (grid/8)^2 positions
    n_classes: int = len(LABELS)
    # How many such CNNs the classifier averages (their softmax), each trained alone with its own seed.
    # One fit's predictions move with its seed (initialisation, batches, the early-stopping epoch); the
    # average of a few moves less and is right more often (README, `patterncnn train`: "An opt-in ensemble").
    members: int = 1

    def __post_init__(self):
        if len(self.widths) != 8:
            raise ValueError(f"the paper's CNN has 8 convolutional layers; got {len(self.widths)} widths")
        if self.head not in ("avg", "flatten"):
            raise ValueError(f"unknown head {self.head!r}; use 'avg' or 'flatten'")
        if self.intensity not in ("linear", "sqrt"):
            raise ValueError(f"unknown intensity {self.intensity!r}; use 'linear' or 'sqrt'")
        if self.representation not in REPRESENTATIONS:
            raise ValueError(f"unknown representation {self.representation!r}; use one of {REPRESENTATIONS}")
        if not isinstance(self.members, int) or self.members < 1:
            raise ValueError(f"members must be a whole number >= 1, got {self.members!r}")
        if self.grid % (2 ** len(self.pool_after)):
            raise ValueError(f"grid {self.grid} must be divisible by {2 ** len(self.pool_after)}")
        self.widths = tuple(self.widths)
        self.pool_after = tuple(self.pool_after)

    @property
    def in_channels(self) -> int:
        return (1 + int(self.mass_channel) + int(self.row_channel) + int(self.column_channel) + int(self.segment_channel)
                + 2 * int(self.structure_channels))


def segment_masks(t: int, seps: list[list[int] | None]) -> torch.Tensor:
    """(N, T, T) float masks of the segment squares (ones everywhere for single segments)."""
    return torch.from_numpy(np.stack([same_segment(t, s) for s in seps])).float()


def band_mask(t: int) -> torch.Tensor:
    """(T, T) float: the band |i - j| <= 1 (the diagonal and its two neighbours)."""
    band = torch.zeros((t, t))
    for k in (-1, 0, 1):
        band.diagonal(k).fill_(1.0)
    return band


def column_masks(t: int, seps: list[list[int] | None]) -> torch.Tensor:
    """(N, T) float: 1 at the column of [CLS] (0) and of every separator."""
    cols = torch.zeros((len(seps), t))
    cols[:, 0] = 1
    for n, s in enumerate(seps):
        cols[n, valid_seps(t, s)] = 1
    return cols


def structure_masks(t: int, seps: list[list[int] | None]) -> torch.Tensor:
    """(N, 2, T, T): the band |i - j| <= 1, and the columns of [CLS] (0) and every separator."""
    band = band_mask(t).expand(len(seps), t, t)
    cols = column_masks(t, seps)
    return torch.stack([band, cols[:, None, :].expand(len(seps), t, t)], dim=1)


def _mask_planes(t: int, seps: list[list[int] | None], cfg: "CNNConfig"):
    """The mask channels of :func:`preprocess`, one at a time, each (n or 1, 1, T, T) (n = len(seps)).

    One channel at a time, and the band once for all maps: a T = 8192 map then needs one T × T
    mask beside it, not three stacked (2.8 GB peak before). Resizing works per plane, so the
    result equals resizing the stacked channels, bit for bit.
    """
    if cfg.segment_channel:
        yield segment_masks(t, seps).unsqueeze(1)
    if cfg.structure_channels:
        yield band_mask(t)[None, None]
        yield column_masks(t, seps)[:, None, None, :].expand(len(seps), 1, t, t)


def column_strength(x: torch.Tensor, cols: torch.Tensor, grid: int) -> torch.Tensor:
    """(N, 1, T, T) maps and (N or 1, T) column masks -> (N, 1, grid, grid): each masked column's cells against their
    row's maximum, averaged over the rows of each grid row and max-pooled over the columns of each grid column.

    Only the masked columns are gathered (K of them, the [CLS] and separators of any map), so the extra memory is
    (N, T, K) and (N, grid, T), not another (N, T, T)."""
    n, t = x.shape[0], x.shape[-1]
    idx = cols.any(dim=0).nonzero().flatten()  # (K,) every column masked in any map
    rel = x[..., idx] / x.amax(dim=3, keepdim=True).clamp_min(1e-12) * cols[:, None, None, idx]  # (N, 1, T, K)
    placed = x.new_zeros((n, 1, grid, t))
    placed[..., idx] = F.adaptive_avg_pool2d(rel, (grid, len(idx)))  # rows pooled; each column its own
    return F.adaptive_max_pool2d(placed, grid)


def resize(x: torch.Tensor, grid: int, representation: str) -> torch.Tensor:
    """(N, C, T, T) -> (N, C, grid, grid)."""
    if representation == "area":
        return F.adaptive_avg_pool2d(x, grid)
    return F.interpolate(x, size=(grid, grid), mode="bilinear", align_corners=False, antialias=x.shape[-1] > grid)


def preprocess(maps: torch.Tensor, seps: list[list[int] | None], cfg: CNNConfig,
               resample_to: int | None = None) -> torch.Tensor:
    """The single preprocessing function of training and inference.

    Args:
        maps: (N, T, T) attention maps of one length T (float).
        seps: N lists of separator positions (or None).
        cfg: the model config (grid, representation, segment_channel).
        resample_to: training augmentation only: first resample the map (and mask) to this T
            with nearest-neighbour, as if the input had had another length.

    Returns:
        (N, C, grid, grid) float32: channel 0 the map scaled to [0, 1] by its own maximum; then,
        as configured, the log mass relative to uniform, the map with each row scaled by its own
        maximum, the [CLS]/[SEP] columns' strength (:func:`column_strength`), the segment mask,
        the diagonal band and the [CLS]/[SEP] columns.
    """
    x = maps.float().unsqueeze(1)  # (N, 1, T, T)
    t, n = maps.shape[-1], maps.shape[0]
    # The census passes all L*H maps of one example with the same seps: build and resize the
    # masks once (resizing is per channel, so this equals resizing the stacked channels).
    same = all(s == seps[0] for s in seps)
    masks_for = seps[:1] if same else seps
    if resample_to is not None and resample_to != t:
        x = F.interpolate(x, size=(resample_to, resample_to), mode="nearest")
    strength = None
    if cfg.column_channel:
        cols = column_masks(t, masks_for)  # (n or 1, T), resampled as the map's columns are
        if resample_to is not None and resample_to != t:
            cols = F.interpolate(cols[:, None], size=resample_to, mode="nearest")[:, 0]
        strength = column_strength(x, cols, cfg.grid)
    planes = []
    for plane in _mask_planes(t, masks_for, cfg):  # (n or 1, 1, T, T) each
        if resample_to is not None and resample_to != t:
            plane = F.interpolate(plane, size=(resample_to, resample_to), mode="nearest")
        planes.append(resize(plane, cfg.grid, cfg.representation).expand(len(masks_for), -1, -1, -1))
        del plane
    m = torch.cat(planes, dim=1) if planes else None  # (n or 1, C_masks, G, G)
    # Each row against its own maximum (guide clarification 7: a column counts where it stands out in a row's own
    # background), pooled like the map: a column that is the brightest cell of most rows stays bright here.
    rows = resize(x / x.amax(dim=3, keepdim=True).clamp_min(1e-12), cfg.grid, cfg.representation) \
        if cfg.row_channel else None
    x = resize(x, cfg.grid, cfg.representation)  # (N, 1, G, G)
    # log2 of each cell's mass relative to a uniform row (1/T), clipped to [-4, 6] and scaled to ~[-1, 1.5]
    rel = (x * t).clamp_min(2 ** -4).log2().clamp_max(6.0) / 4.0 if cfg.mass_channel else None
    x = x / x.amax(dim=(2, 3), keepdim=True).clamp_min(1e-12)
    if cfg.intensity == "sqrt":
        x = x.sqrt()
    x = torch.cat([x, *(c for c in (rel, rows, strength) if c is not None)], dim=1)
    if m is None:
        return x.contiguous()
    return torch.cat([x, m.expand(n, -1, -1, -1) if same else m], dim=1).contiguous()


class PatternCNN(nn.Module):
    """8 × (conv3x3 -> BatchNorm -> ReLU), max-pools between, then global average pool or flatten, linear head."""

    def __init__(self, cfg: CNNConfig):
        super().__init__()
        self.cfg = cfg
        layers: list[nn.Module] = []
        c = cfg.in_channels
        for i, w in enumerate(cfg.widths):
            layers += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
            if i in cfg.pool_after:
                layers.append(nn.MaxPool2d(2))
            c = w
        self.features = nn.Sequential(*layers)
        side = cfg.grid // 2 ** len(cfg.pool_after)
        n_in = c * side * side if cfg.head == "flatten" else c
        self.head = nn.Sequential(nn.Dropout(cfg.dropout), nn.Linear(n_in, cfg.n_classes))

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """(N, C, G, G) -> (N, F) features: pooled (avg head) or flattened with their positions."""
        f = self.features(x)  # (N, widths[-1], G/8, G/8)
        return f.flatten(1) if self.cfg.head == "flatten" else f.mean(dim=(2, 3))

    def forward_head(self, f: torch.Tensor) -> torch.Tensor:
        return self.head(f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, C, G, G) -> (N, n_classes) logits."""
        return self.forward_head(self.forward_features(x))


# Member s of an ensemble is fitted with the single CNN's seed + MEMBER_SEED_STEP * s: member 0 is the single
# CNN's fit, and no member's seed is another fold's, another leave-one-encoder-out fit's or another member's.
MEMBER_SEED_STEP = 1000


class PatternEnsemble(nn.Module):
    """Several :class:`PatternCNN` of one config; the output is the log of their mean softmax.

    So ``softmax(ensemble(x))`` is exactly the mean of the members' probabilities, and every caller that
    softmaxes a model's output (training's scoring, the ONNX classifier) treats one CNN and an ensemble alike.
    """

    def __init__(self, cfg: CNNConfig, members: list[PatternCNN] | None = None):
        super().__init__()
        self.cfg = cfg
        one = member_config(cfg)
        self.members = nn.ModuleList(members if members is not None else [PatternCNN(one) for _ in range(cfg.members)])
        if len(self.members) != cfg.members:
            raise ValueError(f"config says {cfg.members} members, got {len(self.members)}")
        if any(m.cfg != one for m in self.members):
            raise ValueError("every member must be a single CNN of the ensemble's config")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, C, G, G) -> (N, n_classes) log mean probabilities (usable as logits; finite, as log-sum-exp)."""
        logp = torch.stack([F.log_softmax(m(x), dim=1) for m in self.members])
        return torch.logsumexp(logp, dim=0) - math.log(len(self.members))


def member_config(cfg: CNNConfig) -> CNNConfig:
    """The config of one member of the classifier ``cfg`` describes (the same CNN, one member)."""
    return dataclasses.replace(cfg, members=1)


def build_model(cfg: CNNConfig, members: list[PatternCNN] | None = None) -> nn.Module:
    """The classifier ``cfg`` describes: one CNN, or an ensemble of ``cfg.members``; of ``members`` when given."""
    if cfg.members == 1:
        return members[0] if members else PatternCNN(cfg)
    return PatternEnsemble(cfg, members)


def count_conv_layers(model: nn.Module) -> int:
    """Convolutional layers of one CNN (of the first member of an ensemble)."""
    if isinstance(model, PatternEnsemble):
        model = model.members[0]
    return sum(isinstance(m, nn.Conv2d) for m in model.modules())


def model_config_dict(cfg: CNNConfig) -> dict:
    """The config as plain JSON types (for the checkpoint and the ONNX metadata)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(cfg).items()}


def config_from_dict(d: dict) -> CNNConfig:
    d = {"mass_channel": False, "members": 1, **d}  # checkpoints written before these fields existed
    return CNNConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


# The two kinds of ``.pt`` file patterncnn writes: what each is called, and where a right one comes from.
CHECKPOINTS = {
    "classifier": ("a classifier checkpoint (patterncnn.pt from `patterncnn train`)",
                   "give the patterncnn.pt that `patterncnn train` or `adapt finish` wrote (the shipped one: "
                   "models/patterncnn.pt)"),
    "pretrained": ("a pretraining checkpoint (from `patterncnn pretrain`)",
                   "give one of `patterncnn pretrain` (the shipped one: models/pretrained-synthetic.pt), or make one "
                   "with `patterncnn pretrain --out models/pretrained.pt`"),
}


def read_checkpoint(path: str | Path, kind: str = "classifier") -> dict:
    """The checkpoint in ``path``, a ``.pt`` file of ``kind`` (:data:`CHECKPOINTS`): a classifier's (``train``,
    ``adapt``) or a pretrained CNN's (``pretrain``, which records ``pretrained_on``).

    Raises:
        ClassifierError: one line: the file is missing, is no checkpoint of patterncnn (torch's own message runs over
            many lines, and is left out), or is of the other kind; it names what to give instead.
    """
    what, fix = CHECKPOINTS[kind]
    path = Path(path)
    if not path.is_file():
        raise ClassifierError(f"{path}: no such file; "
                              + (f"make one with `patterncnn pretrain --out {path}`" if kind == "pretrained" else fix))
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        config_from_dict(ckpt["model_config"])
        ckpt["state_dict"].items()
    except Exception:  # not a torch file, not a dict, no config or weights: it is not one of ours, whatever it is
        raise ClassifierError(f"{path} is not {what}; {fix}") from None
    other = "pretrained" if isinstance(ckpt.get("pretrained_on"), dict) else "classifier"
    if other != kind:
        found = "a trained classifier" if other == "classifier" else "a CNN pretrained by `patterncnn pretrain`"
        raise ClassifierError(f"{path} is {found}, not {what}; {fix}")
    return ckpt


def load_checkpoint(path: str | Path) -> tuple[nn.Module, dict]:
    """Rebuild the model from ``patterncnn.pt`` (state dict + config); returns (model in eval mode, checkpoint).

    Raises:
        ClassifierError: ``path`` is not a classifier's checkpoint (:func:`read_checkpoint`)."""
    ckpt = read_checkpoint(path)
    model = build_model(config_from_dict(ckpt["model_config"]))
    model.load_state_dict(ckpt["state_dict"])
    return model.eval(), ckpt
