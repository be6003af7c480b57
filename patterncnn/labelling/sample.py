"""Sample attention maps for annotation: random (example, layer, head) triples, stratified by layer.

Usage (what ``patterncnn sample`` runs)::

    enc = load_encoder("minilm")
    splits = [load_split("rte", "dev", glue_dir), load_split("sst2", "dev", glue_dir)]
    summary = sample_maps(enc, splits, per_task=50, seed=0, out="exports/demo")

For each task, ``per_task`` maps are drawn: layers are dealt out evenly (each layer gets
``per_task // L`` maps and a random ``per_task % L`` layers one more), examples are drawn
without replacement while the split has enough of them, heads uniformly; no triple repeats.
Only the drawn examples go through the encoder. The output folder is a map store
(:mod:`patterncnn.core.maps`) with one PNG per map in ``png/``.
"""

from __future__ import annotations

import logging
import re
import shutil
import zlib
from pathlib import Path
from typing import Callable

import numpy as np

from ..classifier.render import render_png
from ..core.fileio import interrupts_held, output_folder, public_fingerprint, public_source, write_bytes
from ..core.glue import GlueSplit
from ..core.maps import MapFormatError, MapStore, map_record
from ..core.version import __version__
from ..core.work import progress_bar
from ..encoders.load import Encoder

log = logging.getLogger(__name__)


def plan_samples(n_examples: int, num_layers: int, num_heads: int, n: int, rng: np.random.Generator,
                 exclude: frozenset | set = frozenset()) -> list[tuple[int, int, int]]:
    """Draw ``n`` distinct (example position, layer, head) triples, every layer represented.

    Args:
        exclude: triples not to draw (maps already labelled): a draw that hits one is drawn again, so
            without exclusions the sample is the one the seed always gave.

    Raises:
        ValueError: when ``n`` exceeds the number of distinct triples (left).
    """
    if n < 1:
        raise ValueError(f"--per-task must be at least 1 (got {n})")
    if n > n_examples * num_layers * num_heads:
        raise ValueError(f"--per-task {n} exceeds the {n_examples * num_layers * num_heads} maps of the split")
    base, extra = divmod(n, num_layers)
    layers = np.repeat(np.arange(num_layers), base)
    layers = np.concatenate([layers, rng.permutation(num_layers)[:extra]])
    rng.shuffle(layers)
    left = n_examples * num_heads - np.bincount(np.array([t[1] for t in exclude], dtype=int), minlength=num_layers)
    short = np.flatnonzero(np.bincount(layers, minlength=num_layers) > left)
    if len(short):
        raise ValueError(f"--per-task {n}: layer {short[0]} has only {left[short[0]]} map(s) not labelled yet; "
                         f"ask for fewer")
    pool = rng.permutation(n_examples)  # distinct examples while they last
    seen: set[tuple[int, int, int]] = set(exclude)
    triples = []
    for i, layer in enumerate(layers.tolist()):
        ex = int(pool[i]) if i < n_examples else int(rng.integers(n_examples))
        head = int(rng.integers(num_heads))
        while (ex, layer, head) in seen:  # terminates: no layer gets more than n_examples * num_heads
            ex, head = int(rng.integers(n_examples)), int(rng.integers(num_heads))
        seen.add((ex, layer, head))
        triples.append((ex, layer, head))
    return triples


def uniform_samples(n_examples: int, num_layers: int, num_heads: int, n: int, rng: np.random.Generator,
                    exclude: frozenset | set = frozenset()) -> list[tuple[int, int, int]]:
    """Draw ``n`` distinct (example position, layer, head) triples uniformly at random over all of them.

    Such a sample is what the census counts (every map of every example weighs the same), so the
    share of each hand label in it estimates the task's true pattern shares without bias.

    Args:
        exclude: triples not to draw (maps already labelled): those drawn are replaced by a uniform draw
            from the triples left, so the sample stays uniform over the maps not excluded, and without
            exclusions it is the one the seed always gave.

    Raises:
        ValueError: when ``n`` exceeds the number of distinct triples (left).
    """
    total = n_examples * num_layers * num_heads
    if n < 1:
        raise ValueError(f"--per-task must be at least 1 (got {n})")
    if n > total - len(exclude):
        raise ValueError(f"--per-task {n} exceeds the {total - len(exclude)} maps of the split"
                         + (" not labelled yet" if exclude else ""))
    flat = rng.choice(total, size=n, replace=False)
    if exclude:
        gone = {e * num_layers * num_heads + layer * num_heads + head for e, layer, head in exclude}
        hit = np.isin(flat, list(gone))
        if hit.any():
            left = np.setdiff1d(np.arange(total), np.concatenate([flat, np.fromiter(gone, dtype=np.int64)]))
            flat = flat.copy()
            flat[hit] = rng.choice(left, size=int(hit.sum()), replace=False)
    return [(int(k // (num_layers * num_heads)), int(k // num_heads % num_layers), int(k % num_heads)) for k in flat]


DESIGNS = {"stratified": plan_samples, "uniform": uniform_samples}


def _labelled_triples(tag: str, split: GlueSplit, labelled) -> dict[tuple[int, int, int], str]:
    """(example position, layer, head) -> map id, for the maps of this encoder and split that ``labelled`` holds."""
    position = {ex.index: pos for pos, ex in enumerate(split.examples)}
    prefix = f"{tag}_{split.task.name}_{split.split}_"
    out = {}
    for m in labelled:
        found = re.fullmatch(r"(\d+)_L(\d+)_H(\d+)", m[len(prefix):]) if m.startswith(prefix) else None
        if found and int(found.group(1)) in position:
            out[(position[int(found.group(1))], int(found.group(2)), int(found.group(3)))] = m
    return out


def sample_maps(
    encoder: Encoder,
    splits: list[GlueSplit],
    per_task: int,
    seed: int,
    out: str | Path,
    batch_size: int = 16,
    pngs: bool = True,
    progress: Callable | None = None,
    design: str = "stratified",
    overwrite: bool = False,
    labelled: set[str] | frozenset = frozenset(),
    skip_labelled: bool = False,
) -> dict:
    """Sample, extract and write maps from each split into the map store ``out``.

    Args:
        progress: optional ``tqdm``-like factory ``progress(total=..., desc=...)``.
        overwrite: replace a map store already in ``out`` (:func:`patterncnn.core.fileio.output_folder`).
        design: ``stratified`` (every layer represented, examples distinct while they last: for
            annotation rounds) or ``uniform`` (uniform over all (example, layer, head) triples: a
            sample whose label shares estimate the census's shares). Each map records it as ``sampling``.
        labelled: map ids already labelled in the set the new labels will join (e.g. ``annotations/``).
        skip_labelled: draw other maps in their place (else they are drawn, and reported).

    Returns:
        A summary: maps written per task, truncations, the store path, the drawn maps that ``labelled``
        holds (``already_labelled``; with ``skip_labelled``, none).
    """
    plans = []  # every split's maps are drawn before anything is written: a refused sample leaves nothing behind
    for split in splits:
        # A per-task seed: adding a task does not change the sample of the others.
        rng = np.random.default_rng([seed, zlib.crc32(split.task.name.encode())])
        taken = _labelled_triples(encoder.tag, split, labelled)
        triples = DESIGNS[design](len(split.examples), encoder.num_layers, encoder.num_heads, per_task, rng,
                                  set(taken) if skip_labelled else frozenset())
        plans.append((split, taken, triples))
    made = [p for p in (Path(out) / "png", Path(out)) if not p.exists()]  # the folders this call makes
    out = output_folder(out, ("store.json",), overwrite)
    if overwrite:
        shutil.rmtree(out / "png", ignore_errors=True)
    strays = sorted(p.name for p in out.glob("part-*")) if not (out / "store.json").exists() else []
    if strays:  # parts without a header: MapStore.create would take them in, and a failed sample remove them
        raise MapFormatError(f"{out} holds map-store parts ({strays[0]}, ...) but no store.json: a damaged store; "
                             f"remove them, or choose another --out")
    before = set(out.glob("part-*"))  # with --overwrite, the old store's parts (create removes them)
    written: list[str] = []
    try:
        return _write_sample(encoder, plans, out, written, batch_size, pngs, progress, design, overwrite, {
            "model": public_fingerprint(encoder.fingerprint), "max_length": encoder.max_length, "seed": seed,
            "per_task": per_task, "design": design,
            "tasks": {s.task.name: {"split": s.split, "source": public_source(s.source), "examples": s.total}
                      for s in splits},
            "layers": encoder.num_layers, "heads": encoder.num_heads})
    except BaseException:  # interrupted or failed: a store missing tasks its header lists must not stay behind
        _discard(out, before, written, made)
        raise


def _discard(out: Path, before: set[Path], written: list[str], made: list[Path]) -> None:
    """Remove the map store this call began in ``out``: its header, the parts it wrote (not ``before``'s), the
    PNGs of its maps and the folders it ``made``, once empty; say so when there was something to remove."""
    mine = [p for p in out.glob("part-*") if p not in before] + [out / "store.json"] * (out / "store.json").exists()
    for f in mine:
        f.unlink(missing_ok=True)
    for map_id in written:
        (out / "png" / f"{map_id}.png").unlink(missing_ok=True)
    for folder in made:  # png/ first, then out
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    if mine:
        log.warning("the unfinished map store in %s was removed: run the same command again", out)


def _write_sample(encoder: Encoder, plans: list, out: Path, written: list[str], batch_size: int, pngs: bool,
                  progress: Callable | None, design: str, overwrite: bool, info: dict) -> dict:
    """Extract the planned maps of each split and write them, with their PNGs, into a new map store ``out``;
    ``written`` collects the ids written (for :func:`_discard`)."""
    store = MapStore.create(out, replace=overwrite, info=info)
    summary = {"store": str(out), "tasks": {}, "truncated": 0, "patterncnn": __version__, "already_labelled": []}
    for split, taken, triples in plans:
        summary["already_labelled"] += sorted(taken[t] for t in triples if t in taken)
        wanted: dict[int, list[tuple[int, int]]] = {}  # example index -> (layer, head)s
        for pos, layer, head in triples:
            wanted.setdefault(split.examples[pos].index, []).append((layer, head))
        chosen = [ex for ex in split.examples if ex.index in wanted]
        records = []
        before = encoder.truncations
        with progress_bar(progress, len(chosen), f"export {split.task.name}", "ex") as bar:
            for ea in encoder.iter_attentions(chosen, batch_size=batch_size):
                for layer, head in sorted(wanted[ea.example.index]):
                    meta = map_record(encoder, split.task.name, split.split, ea, layer, head)
                    records.append(({**meta, "sampling": design}, ea.maps[layer, head]))
                if bar:
                    bar.update(1)
        records.sort(key=lambda r: r[0]["id"])
        store.append(records)
        if pngs:
            for meta, arr in records:
                # Ctrl-C held to the end of each picture: raised inside one of matplotlib's weakref callbacks, it was
                # printed and dropped, and the sample ran on to the end (4 of 5 tries, helper 100's review)
                with interrupts_held():
                    written.append(meta["id"])
                    write_bytes(out / "png" / f"{meta['id']}.png", render_png(
                        arr, meta["tokens"], meta["seps"], title=meta["id"],
                        subtitle=f"{encoder.name} | {meta['task']} {meta['split']} #{meta['example']} | "
                                 f"layer {meta['layer']} head {meta['head']} | T={meta['T']}"))
        summary["tasks"][split.task.name] = len(records)
        summary["truncated"] += encoder.truncations - before
    return summary
