"""The ``patterncnn`` command: one subcommand per pipeline step. The only module that reads argv or env.

    patterncnn export --task rte --task sst2 --per-task 50 --glue-dir glue_data --out exports/demo
    patterncnn finetune --task sst2 --glue-dir glue_data --out models/minilm-sst2 --max-train-examples 4000

Run ``patterncnn COMMAND --help`` for each command's options.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from . import __version__

log = logging.getLogger("patterncnn")


def _progress():
    from tqdm.auto import tqdm

    return tqdm


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="minilm",
                   help="Hugging Face encoder: hub id (bert-base-uncased), local folder, or an embedded one that "
                        "works offline: 'minilm' (all-MiniLM-L6-v2) or 'mpnet' (all-mpnet-base-v2, the extra "
                        "patterncnn[mpnet]) (default: %(default)s)")
    p.add_argument("--max-length", type=int, default=128,
                   help="cap on tokens per input; longer inputs are truncated and counted (default: %(default)s)")


def _add_glue_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--glue-dir", default=None,
                   help="a glue_data folder (SST-2/dev.tsv, ...); default: $GLUE_DIR, else the Hugging Face "
                        "dataset nyu-mll/glue through `datasets` (needs internet)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default: %(default)s)")


def _add_classifier_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--classifier", default=None, help="ONNX classifier (default: the shipped models/patterncnn.onnx)")
    p.add_argument("--threads", type=int, default=2, help="onnxruntime (and torch) threads (default: %(default)s)")


def _glue_dir(args) -> str | None:
    return args.glue_dir or os.environ.get("GLUE_DIR") or None


def cmd_export(args) -> int:
    from .encoder import load_encoder
    from .export import export_maps
    from .glue import get_task, load_split

    tasks = [get_task(t) for t in args.task]  # fail on a bad name before loading anything
    if os.path.exists(os.path.join(args.out, "store.json")):
        raise FileExistsError(f"{args.out} already holds a map store; choose another --out or remove it")
    splits = [load_split(t, args.split, _glue_dir(args)) for t in tasks]
    enc = load_encoder(args.model, max_length=args.max_length)
    log.info("encoder %s: %d layers x %d heads (%s)", args.model, enc.num_layers, enc.num_heads, enc.tag)
    summary = export_maps(enc, splits, args.per_task, args.seed, args.out, batch_size=args.batch_size,
                          pngs=not args.no_png, progress=_progress())
    n = sum(summary["tasks"].values())
    print(f"wrote {n} maps ({', '.join(f'{k}: {v}' for k, v in summary['tasks'].items())}) to {args.out}"
          + ("" if args.no_png else f", PNGs in {os.path.join(args.out, 'png')}"))
    if summary["truncated"]:
        print(f"note: {summary['truncated']} input(s) were longer than --max-length {enc.max_length} and truncated")
    return 0


def cmd_finetune(args) -> int:
    from .finetune import FinetuneConfig, finetune

    cfg = FinetuneConfig(batch_size=args.batch_size, epochs=args.epochs, learning_rate=args.learning_rate,
                         max_length=args.max_length, max_train_examples=args.max_train_examples,
                         max_dev_examples=args.max_dev_examples, seed=args.seed)
    t0 = time.time()
    manifest = finetune(args.model, args.task, _glue_dir(args), args.out, cfg)
    dev = ", ".join(f"{k} {v:.4f}" for k, v in manifest["dev"].items())
    print(f"fine-tuned {args.model} on {manifest['task']} ({manifest['train']['examples']} train examples) in "
          f"{time.time() - t0:.0f}s; dev ({manifest['dev_data']['examples']} examples): {dev}")
    print(f"saved to {args.out} (use it as --model {args.out})")
    return 0


def _ls_client(args):
    from .annotate import connect

    return connect(args.url or os.environ.get("LABEL_STUDIO_URL"),
                   args.api_key or os.environ.get("LABEL_STUDIO_API_KEY"))


def _predictor(args):
    from .annotate import RulePredictor

    if args.classifier:
        from .infer import OnnxClassifier

        return OnnxClassifier(args.classifier)
    return RulePredictor() if args.pre == "rule" else None


def cmd_annotate_config(args) -> int:
    from .annotate import label_config

    print(label_config())
    return 0


def cmd_annotate_push(args) -> int:
    from .annotate import ensure_project, push
    from .maps import open_maps

    maps = open_maps(args.maps)
    client = _ls_client(args)
    project = ensure_project(client, args.project)
    result = push(client, project, maps, predictor=_predictor(args), order=args.order, limit=args.limit)
    print(f"pushed {result['pushed']} map(s) to project {project.id} ({project.title!r}); "
          f"{result['skipped_existing']} already there")
    print(f"label them at {client._patterncnn_url}/projects/{project.id}/data")
    return 0


def cmd_annotate_sheets(args) -> int:
    from pathlib import Path

    from .fileio import write_bytes
    from .maps import MultiStore, open_maps
    from .render import labelled_sheet

    maps = MultiStore([open_maps(m) for m in args.maps])
    metas = maps.meta
    if args.shuffle is not None:
        import random

        metas = list(metas)
        random.Random(args.shuffle).shuffle(metas)
    out = Path(args.out)
    index = []
    for s, start in enumerate(range(0, len(metas), args.per_sheet)):
        chunk = metas[start : start + args.per_sheet]
        captions = [f"#{start + k}  T={maps.get(m['id']).shape[0]}" for k, m in enumerate(chunk)]
        write_bytes(out / f"sheet-{s:03d}.png", labelled_sheet([maps.get(m["id"]) for m in chunk],
                                                               [m.get("seps") for m in chunk], captions))
        index += [{"n": start + k, "sheet": s, "id": m["id"]} for k, m in enumerate(chunk)]
    from .fileio import write_json

    write_json(out / "index.json", index)
    print(f"wrote {s + 1} sheet(s) of up to {args.per_sheet} maps to {out} (index.json maps #n to map ids)")
    return 0


def cmd_annotate_pull(args) -> int:
    import json as _json

    from .annotate import AnnotateError, annotator_names, fetch_export, find_project, tidy, write_labelled_set
    from .maps import MultiStore, open_maps

    maps = MultiStore([open_maps(m) for m in args.maps]) if args.maps else None
    if args.from_file:
        with open(args.from_file, "rb") as f:
            raw = f.read()
        names = {}
    else:
        if args.project is None:
            raise AnnotateError("pass --project (title or id) to pull from a server, or --from-file EXPORT.json")
        client = _ls_client(args)
        project = find_project(client, args.project)
        if project is None:
            raise AnnotateError(f"no Label Studio project titled {args.project!r}; check the title or pass its id")
        raw = fetch_export(client, project)
        names = annotator_names(client)
    try:
        export = _json.loads(raw)
    except ValueError:
        raise AnnotateError("the export is not JSON: export the project as JSON (not CSV/COCO/...)") from None
    rows, report = tidy(export, maps, names)
    if not rows:
        raise AnnotateError(f"no labelled maps in the export ({report['tasks']} task(s), {report['cancelled']} "
                            f"skipped, {report['unlabelled']} unlabelled); nothing written to {args.out}")
    result = write_labelled_set(args.out, raw, rows, report, maps)
    counts = ", ".join(f"{k} {v}" for k, v in result["labels"].items())
    print(f"{len(rows)} labelled map(s) written to {args.out} ({counts}); {report['cancelled']} skipped/cancelled "
          f"and {report['unlabelled']} unlabelled task(s) left out; {len(report['disagreements'])} with disagreeing "
          f"annotations (resolved by majority, then most recent)")
    return 0


def cmd_train(args) -> int:
    from .model import CNNConfig
    from .release import train_and_ship
    from .train import TrainConfig

    cfg = CNNConfig(grid=args.grid, representation=args.representation, segment_channel=not args.no_segment_channel,
                    structure_channels=not args.no_structure_channels, mass_channel=not args.no_mass_channel)
    tcfg = TrainConfig(folds=args.folds, seed=args.seed, max_epochs=args.max_epochs)
    m = train_and_ship(args.annotations, args.out, cfg, tcfg, compare=args.compare, progress=_progress())
    cv = m["cv"]
    print(f"{m['data']['maps']} maps, {tcfg.folds}-fold grouped CV: macro-F1 {cv['macro_f1']:.3f} "
          f"(folds {cv['fold_macro_f1_mean']:.3f} ± {cv['fold_macro_f1_std']:.3f}), weighted-F1 {cv['weighted_f1']:.3f}")
    for name, b in m["baselines"].items():
        print(f"  baseline {name}: macro-F1 {b['macro_f1']:.3f}")
    print(("CNN beats" if m["cnn_beats_best_baseline"] else "CNN does NOT beat") + f" the best baseline "
          f"({m['best_baseline']}); ONNX parity max |dp| {m['onnx_parity_max_abs_diff']:.1e}")
    print(f"wrote {args.out}/patterncnn.pt, patterncnn.onnx, metrics.json, README.md")
    return 0


def cmd_classify(args) -> int:
    import json as _json

    from .fileio import atomic_open
    from .infer import DEFAULT_CLASSIFIER, OnnxClassifier
    from .labels import LABELS
    from .maps import check_map, open_maps

    maps = open_maps(args.maps)
    clf = OnnxClassifier(args.classifier or DEFAULT_CLASSIFIER, threads=args.threads)
    good, errors, flagged = [], 0, 0
    with atomic_open(args.out, "w", encoding="utf-8") as f:
        metas = maps.meta
        for start in range(0, len(metas), 1024):
            chunk = metas[start : start + 1024]
            arrs, ok = [], []
            for m in chunk:
                arr = maps.get(m["id"])
                errs, warns = check_map(arr)
                if errs:
                    errors += 1
                    print(f"{m['id']}: skipped: {errs[0]}", file=sys.stderr)
                    f.write(_json.dumps({"id": m["id"], "error": errs[0]}) + "\n")
                    continue
                ok.append((m, warns))
                arrs.append(arr.astype("float32"))
            probs = clf.predict(arrs, [m.get("seps") for m, _ in ok]) if arrs else []
            for (m, warns), p in zip(ok, probs):
                rec = {"id": m["id"], "label": LABELS[int(p.argmax())],
                       "probs": {name: round(float(x), 6) for name, x in zip(LABELS, p)}}
                if warns:
                    flagged += 1
                    rec["warning"] = warns[0]
                f.write(_json.dumps(rec) + "\n")
                good.append(rec["label"])
    from collections import Counter

    c = Counter(good)
    print(f"classified {len(good)} map(s) -> {args.out} ({', '.join(f'{k} {c.get(k, 0)}' for k in LABELS)}); "
          f"{errors} rejected, {flagged} flagged (rows not summing to 1)")
    return 1 if errors and not good else 0


def cmd_census(args) -> int:
    import json as _json

    from .census import compare, run_census, table
    from .encoder import load_encoder
    from .glue import TASKS, get_task, load_split
    from .infer import DEFAULT_CLASSIFIER, OnnxClassifier

    if args.compare:
        a, b = (_json.load(open(p if p.endswith(".json") else os.path.join(p, "census.json"))) for p in args.compare)
        text, _ = compare(a, b)
        print(text)
        return 0
    if not args.task:
        raise ValueError("pass --task (e.g. --task sst2, repeatable, or --task all), or --compare A B")
    names = list(dict.fromkeys(t for spec in args.task for t in (
        [n for n in TASKS if n != "mnli-mm"] if spec == "all" else [get_task(spec).name])))
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be at least 1 (got {args.limit})")
    clf = OnnxClassifier(args.classifier or DEFAULT_CLASSIFIER, threads=args.threads)
    splits = [load_split(t, "dev", _glue_dir(args), limit=args.limit, seed=args.seed) for t in names]
    models = args.model or ["minilm"]
    for model in models:
        enc = load_encoder(model, max_length=args.max_length)
        out = args.out if len(models) == 1 else os.path.join(args.out, enc.tag)
        try:
            result = run_census(enc, clf, splits, out, args.limit, args.seed, args.batch_size, _progress(),
                                save_maps=args.save_maps, overwrite=args.overwrite)
        except KeyboardInterrupt:
            print(f"interrupted: finished windows are saved in {out}/.work; run the same command again to resume",
                  file=sys.stderr)
            return 130
        print(f"\n{model} ({enc.tag}): share of (example, layer, head) maps, 95% bootstrap CI over examples")
        print(table(result))
        trunc = sum(s["truncated"] for s in result["tasks"].values())
        if trunc:
            print(f"note: {trunc} input(s) longer than --max-length {enc.max_length} were truncated")
        print(f"wrote {out}/census.json, census.csv, heads.csv, census.png, heads.png")
    if len(models) == 2:
        a, b = (os.path.join(args.out, load_encoder(m, max_length=args.max_length).tag, "census.json") for m in models)
        print("\n" + compare(_json.load(open(a)), _json.load(open(b)))[0])
    return 0


def cmd_analyze(args) -> int:
    from .census import analyze, grid_text
    from .encoder import load_encoder
    from .infer import DEFAULT_CLASSIFIER, OnnxClassifier

    texts = tuple(t for t in args.text if t)
    if not texts or len(texts) > 2:
        raise ValueError("give one sentence, or two for a pair")
    clf = OnnxClassifier(args.classifier or DEFAULT_CLASSIFIER, threads=args.threads)
    enc = load_encoder(args.model, max_length=args.max_length)
    res = analyze(enc, clf, texts)
    print(f"{len(res['tokens'])} tokens: {' '.join(res['tokens'])}")
    if res["truncated"]:
        print(f"note: the input was truncated to --max-length {enc.max_length} tokens")
    print(grid_text(res["labels"]))
    from collections import Counter

    c = Counter(x for row in res["labels"] for x in row)
    n = sum(c.values())
    print("shares: " + ", ".join(f"{k} {100 * c.get(k, 0) / n:.0f}%" for k in
                                 ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")))
    if args.out:
        from .fileio import write_bytes
        from .plots import analyze_figure

        write_bytes(args.out, analyze_figure(res["probs"], f"{args.model}: pattern per head (shade = confidence)"))
        print(f"wrote {args.out}")
    return 0


def cmd_serve(args) -> int:
    import torch
    import uvicorn

    from .encoder import load_encoder
    from .infer import DEFAULT_CLASSIFIER, OnnxClassifier
    from .serve import ServeSettings, create_app

    token = args.api_token or os.environ.get("PATTERNCNN_API_TOKEN") or None
    if args.host not in ("127.0.0.1", "localhost", "::1") and not token:
        log.warning("serving on %s without an API token: anyone who can reach it can use it", args.host)
    torch.set_num_threads(args.threads)  # bounded, like onnxruntime's
    settings = ServeSettings(api_token=token, max_t=args.max_t, max_batch=args.max_batch,
                             max_body_bytes=args.max_body_mb * 1024 * 1024, cors_origins=tuple(args.cors_origin or ()),
                             workers=args.workers)
    clf = OnnxClassifier(args.classifier or DEFAULT_CLASSIFIER, threads=args.threads)
    enc = None if args.no_encoder else load_encoder(args.model, max_length=args.max_length)
    app = create_app(settings, clf, enc)
    print(f"patterncnn serving on http://{args.host}:{args.port} (docs: /docs; token {'required' if token else 'off'})")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="patterncnn",
        description="Classify BERT-family self-attention maps into the five patterns of Kovaleva et al. (2019): "
                    "vertical, diagonal, vertical+diagonal, block, heterogeneous.")
    parser.add_argument("--version", action="version", version=f"patterncnn {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("export", help="sample attention maps from GLUE inputs for annotation (map store + PNGs)",
                       description="Sample random (example, layer, head) maps from GLUE dev inputs, stratified so "
                                   "every layer is represented; write a map store and one PNG per map.")
    p.add_argument("--task", action="append", required=True,
                   help="GLUE task (repeat for several): cola, sst2, mrpc, stsb, qqp, mnli, mnli-mm, qnli, rte, wnli")
    p.add_argument("--per-task", type=int, default=50, help="maps per task (default: %(default)s)")
    p.add_argument("--out", required=True, help="output folder (must not hold a map store yet)")
    p.add_argument("--split", default="dev", choices=("dev", "train"), help="GLUE split (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=16, help="encoder batch size (default: %(default)s)")
    p.add_argument("--no-png", action="store_true", help="skip the PNG per map")
    _add_model_args(p)
    _add_glue_args(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("finetune", help="fine-tune an encoder on a GLUE task (transformers Trainer)",
                       description="Fine-tune an encoder on a GLUE task's train split with a classification head "
                                   "(regression for STS-B), report the GLUE dev metric, save a folder --model "
                                   "accepts. Defaults are the paper's: batch 32, 3 epochs, lr 2e-5.")
    p.add_argument("--task", required=True, help="GLUE task, e.g. sst2, rte, stsb")
    p.add_argument("--out", required=True, help="folder to write the fine-tuned model to (must not exist)")
    p.add_argument("--batch-size", type=int, default=32, help="(default: %(default)s)")
    p.add_argument("--epochs", type=float, default=3.0, help="(default: %(default)s)")
    p.add_argument("--learning-rate", type=float, default=2e-5, help="(default: %(default)s)")
    p.add_argument("--max-train-examples", type=int, default=None,
                   help="train on a seeded random sample of this many examples (to fit a CPU's time budget)")
    p.add_argument("--max-dev-examples", type=int, default=None, help="score on at most this many dev examples")
    _add_model_args(p)
    _add_glue_args(p)
    p.set_defaults(func=cmd_finetune, seed=42)

    p = sub.add_parser("annotate", help="label maps in Label Studio: config, push, pull",
                       description="Round trip with a Label Studio server (label-studio-sdk 2.x). Connection from "
                                   "--url/--api-key or LABEL_STUDIO_URL/LABEL_STUDIO_API_KEY.")
    asub = p.add_subparsers(dest="annotate_command", metavar="ACTION", required=True)

    def conn(q):
        q.add_argument("--url", help="Label Studio URL (default: $LABEL_STUDIO_URL)")
        q.add_argument("--api-key", help="Label Studio API token (default: $LABEL_STUDIO_API_KEY)")

    q = asub.add_parser("config", help="print the labeling config (XML) generated from the five labels")
    q.set_defaults(func=cmd_annotate_config)
    q = asub.add_parser("push", help="import maps as tasks (idempotent), with optional pre-annotations",
                        description="Create or reuse a project and import maps from a map store (or plain .npz) as "
                                    "tasks; map ids already in the project are skipped. Images are embedded in the "
                                    "tasks as PNG data URIs, so a stock server needs no storage setup.")
    q.add_argument("maps", help="map store folder (from `patterncnn export`) or a plain .npz")
    q.add_argument("--project", required=True, help="project title (created if missing) or id")
    q.add_argument("--pre", choices=("rule", "none"), default="rule",
                   help="pre-annotate with the feature rule, or not at all (default: %(default)s)")
    q.add_argument("--classifier", help="pre-annotate with a trained classifier instead (models/patterncnn.onnx)")
    q.add_argument("--order", choices=("store", "uncertain"), default="store",
                   help="'uncertain': push the maps the predictor is least sure about first (default: %(default)s)")
    q.add_argument("--limit", type=int, help="push at most this many new maps")
    conn(q)
    q.set_defaults(func=cmd_annotate_push)
    q = asub.add_parser("sheets", help="render maps as numbered contact sheets, to look through a batch by eye",
                        description="Render maps as PNG contact sheets (per-map colour scale, [SEP] lines), each "
                                    "map captioned with a running number; index.json maps numbers to map ids.")
    q.add_argument("maps", nargs="+", help="map store folder(s) or .npz file(s)")
    q.add_argument("--out", required=True, help="folder for sheet-NNN.png and index.json")
    q.add_argument("--per-sheet", type=int, default=16, help="(default: %(default)s)")
    q.add_argument("--shuffle", type=int, metavar="SEED", help="shuffle the maps with this seed first")
    q.set_defaults(func=cmd_annotate_sheets)
    q = asub.add_parser("pull", help="export annotations and write the labelled set (e.g. into annotations/)",
                        description="Export the project's annotations and write labels.csv (tidy table joined to "
                                    "the map store), the export as it came (gzipped) and the labelled maps. Skipped "
                                    "tasks are left out and counted; several annotations on a task are resolved "
                                    "by majority, then the most recent.")
    q.add_argument("--project", help="project title or id")
    q.add_argument("--maps", action="append", help="map store(s) the tasks were pushed from (repeatable)")
    q.add_argument("--from-file", help="a JSON export downloaded from the Label Studio UI, instead of a server")
    q.add_argument("--out", default="annotations", help="output folder (default: %(default)s)")
    conn(q)
    q.set_defaults(func=cmd_annotate_pull)

    p = sub.add_parser("train", help="train the 8-layer CNN with grouped cross-validation, export ONNX",
                       description="Cross-validate (stratified, grouped by input example) the CNN and feature "
                                   "baselines on a labelled set, fit the final model, export ONNX with a parity "
                                   "check and write the model card.")
    p.add_argument("--annotations", default="annotations", help="labelled set from `annotate pull` (default: %(default)s)")
    p.add_argument("--out", default="models", help="output folder (default: %(default)s)")
    p.add_argument("--grid", type=int, default=16, help="input grid size (default: %(default)s)")
    p.add_argument("--representation", choices=("area", "bilinear"), default="area",
                   help="how a TxT map becomes the grid (default: %(default)s)")
    p.add_argument("--no-segment-channel", action="store_true", help="do not give the segment squares as a channel")
    p.add_argument("--no-structure-channels", action="store_true",
                   help="do not give the diagonal band and [CLS]/[SEP] columns as channels")
    p.add_argument("--no-mass-channel", action="store_true",
                   help="do not give log mass relative to uniform as a channel (only the max-scaled map)")
    p.add_argument("--compare", action="store_true",
                   help="also cross-validate area/bilinear x 16/32, area 64 and the channel choices, for the model card")
    p.add_argument("--folds", type=int, default=5, help="(default: %(default)s)")
    p.add_argument("--max-epochs", type=int, default=80, help="(default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("classify", help="classify maps (map store or plain .npz) -> JSON lines",
                       description="Classify every map of a map store or a plain .npz of square maps keyed by id. "
                                   "Writes one JSON line per map: {id, label, probs}. Invalid maps (non-square, "
                                   "empty, NaN/inf, negative) get an error line and are reported; maps whose rows "
                                   "do not sum to ~1 are classified and flagged.")
    p.add_argument("maps", help="map store folder or .npz file")
    p.add_argument("--out", required=True, help="output .jsonl")
    _add_classifier_args(p)
    p.set_defaults(func=cmd_classify)

    p = sub.add_parser("census", help="pattern shares over GLUE dev sets, overall and per layer x head",
                       description="Run an encoder over each task's dev set (up to --limit examples), classify every "
                                   "(example, layer, head) map and report each pattern's share with a 95%% bootstrap "
                                   "CI, the per-head distribution, tables and plots. Interrupted runs resume when "
                                   "re-run with the same arguments. `--compare A B` compares two finished censuses.")
    p.add_argument("--task", action="append", default=[], help="GLUE task (repeatable), or 'all'")
    p.add_argument("--model", action="append", help="encoder (repeatable; two models are compared). Default: minilm")
    p.add_argument("--max-length", type=int, default=128, help="(default: %(default)s)")
    p.add_argument("--limit", type=int, default=1000, help="examples per task, as in the paper (default: %(default)s)")
    p.add_argument("--out", default="runs/census", help="output folder (default: %(default)s)")
    _add_classifier_args(p)
    p.add_argument("--batch-size", type=int, default=16, help="encoder batch size (default: %(default)s)")
    p.add_argument("--save-maps", action="store_true", help="also write every map to OUT/maps/<task> (large)")
    p.add_argument("--overwrite", action="store_true", help="replace a finished or unfinished census in --out")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two census results (folders or json)")
    _add_glue_args(p)
    p.set_defaults(func=cmd_census)

    p = sub.add_parser("analyze", help="the layer x head grid of patterns for one sentence or pair",
                       description="Run the encoder on one input and classify every head's map; print the grid "
                                   "(and write it as a figure with --out).")
    p.add_argument("text", nargs="+", help="a sentence, or two sentences for a pair")
    p.add_argument("--model", default="minilm", help="encoder (default: %(default)s, the embedded all-MiniLM-L6-v2)")
    p.add_argument("--max-length", type=int, default=128, help="(default: %(default)s)")
    _add_classifier_args(p)
    p.add_argument("--out", help="write the grid figure to this PNG")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("serve", help="HTTP service: classify maps or text; Label Studio ML backend",
                       description="Serve /v1/classify, /v1/analyze, /v1/labels, /v1/model, /health and the Label "
                                   "Studio ML backend protocol (/setup, /predict). Binds to 127.0.0.1 by default. With "
                                   "--api-token or PATTERNCNN_API_TOKEN every endpoint but /health needs it.")
    p.add_argument("--host", default="127.0.0.1", help="(default: %(default)s)")
    p.add_argument("--port", type=int, default=9090, help="(default: %(default)s)")
    p.add_argument("--model", default="minilm", help="encoder for /v1/analyze (default: %(default)s)")
    p.add_argument("--no-encoder", action="store_true", help="serve maps only; do not load an encoder")
    p.add_argument("--max-length", type=int, default=128, help="(default: %(default)s)")
    _add_classifier_args(p)
    p.add_argument("--api-token", default=None, help="require this bearer token (default: $PATTERNCNN_API_TOKEN)")
    p.add_argument("--workers", type=int, default=2, help="inference calls at once (default: %(default)s)")
    p.add_argument("--max-t", type=int, default=512, help="largest map side accepted (default: %(default)s)")
    p.add_argument("--max-batch", type=int, default=1024, help="most maps per request (default: %(default)s)")
    p.add_argument("--max-body-mb", type=int, default=256, help="largest request body (default: %(default)s)")
    p.add_argument("--cors-origin", action="append", help="allow this browser origin (CORS is off by default)")
    p.set_defaults(func=cmd_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("transformers", "datasets", "huggingface_hub", "urllib3", "httpx", "filelock", "matplotlib"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if args.verbose else logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover
        pass
    from .annotate import AnnotateError
    from .encoder import EncoderError
    from .census import CensusError
    from .infer import ClassifierError
    from .glue import GlueDataError
    from .maps import MapFormatError

    try:
        return args.func(args)
    except (GlueDataError, EncoderError, MapFormatError, AnnotateError, ClassifierError, CensusError, FileExistsError,
            FileNotFoundError, ValueError) as e:
        if args.verbose:
            raise
        print(f"patterncnn {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"patterncnn {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
