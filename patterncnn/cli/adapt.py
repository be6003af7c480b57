"""``patterncnn adapt start|finish``: adapt the classifier to an encoder it never saw, through Label Studio."""

from __future__ import annotations

import math
from pathlib import Path

from .common import (
    add_connection_args,
    add_glue_args,
    add_model_args,
    add_overwrite,
    connect,
    fold_count,
    given,
    glue_dir,
    in_path,
    non_negative_int,
    out_path,
    positive_int,
    progress,
)

TASKS = ("cola", "sst2", "mrpc", "stsb", "rte", "qnli")
DEFAULT_MAPS = 100
PROJECT = "project.json"  # the Label Studio project `adapt start` pushed to: its server's URL, id and title


def register(sub) -> None:
    p = sub.add_parser("adapt", help="adapt the classifier to a new encoder: label ~100 of its maps, fine-tune, "
                                     "validate",
                       description="Two steps around a labelling session in Label Studio. `start` samples maps of "
                                   "your encoder uniformly (so their hand-labelled shares estimate its census), and "
                                   "pushes them to a project without showing any prediction. Label them there. "
                                   "`finish` pulls the labels, fine-tunes the shipped classifier on the shipped set "
                                   "plus them, validates it cross-fitted on your maps, and writes an adapted "
                                   "classifier whose census of your encoder has a validated interval of its own.")
    asub = p.add_subparsers(dest="adapt_command", metavar="STEP", required=True)
    q = asub.add_parser("start", help="sample uniformly drawn maps of the encoder and push them for labelling")
    add_model_args(q)
    q.add_argument("--project", type=given, required=True, help="Label Studio project title (created if missing)")
    q.add_argument("--out", type=out_path, required=True, help="folder of this adaptation (maps/, then labels/ and classifier/)")
    q.add_argument("--maps", type=positive_int, default=None,
                   help=f"maps to label, spread over the tasks (default: {DEFAULT_MAPS})")
    q.add_argument("--task", type=given, action="append", help=f"GLUE tasks to draw from (default: {', '.join(TASKS)})")
    q.add_argument("--annotators", type=positive_int, default=None,
                   help="annotators per map (one account each; with 3, ties and slips are outvoted) (default: as "
                        "the project has it, 1 for a new one; pushing OUT's maps again: as OUT/project.json records)")
    add_connection_args(q)
    add_glue_args(q)
    q.set_defaults(out_folder=True, func=run_start)
    q = asub.add_parser("finish", help="pull the labels, fine-tune on the shipped set plus them, validate, export")
    q.add_argument("--project", type=given,
                   help="Label Studio project title or id (default: the one `adapt start` pushed to, "
                        "recorded in OUT/project.json)")
    q.add_argument("--from-file", type=in_path, help="a Label Studio JSON export instead of the server")
    q.add_argument("--out", type=out_path, required=True, help="the folder `adapt start` wrote")
    q.add_argument("--annotations", type=in_path, action="append", default=None,
                   help="the labelled set(s) the classifier was trained on (default: those its metrics.json names; for the "
                        "shipped one annotations and annotations/round8-e5-uniform, from a clone)")
    q.add_argument("--checkpoint", type=in_path, default="models/patterncnn.pt",
                   help="the classifier to adapt (default: %(default)s, the shipped one, in a clone)")
    q.add_argument("--epochs", type=non_negative_int, default=20,
                   help="fine-tuning epochs per fit (default: %(default)s); 0 keeps the classifier's weights and only "
                        "validates it on your maps, for a band of your encoder's own")
    q.add_argument("--folds", type=fold_count, default=5, help="cross-fitting folds over your maps (default: %(default)s)")
    q.add_argument("--no-reapply-shift", action="store_true",
                   help="fine-tune a bias-corrected classifier's head with its shift in it (default: take the shift "
                        "out while fine-tuning and put it back; measured in docs/pages/commands/adapt.md)")
    q.add_argument("--freeze-bn", action="store_true",
                   help="keep the classifier's BatchNorm statistics while fine-tuning (default: re-estimate them; "
                        "measured against each other in docs/pages/commands/adapt.md)")
    q.add_argument("--heldout", type=in_path, default=None,
                   help="a labelled set of other encoders that neither classifier saw, scored before and after "
                        "adapting, since those encoders keep the classifier's validation (default: the held-out "
                        "round 5 of MiniLM and MPNet, annotations/round5-heldout-uniform, when the checkpoint sits in "
                        "a clone)")
    add_overwrite(q, "adapted classifier in OUT/classifier")
    add_connection_args(q)
    q.set_defaults(out_folder=True, func=run_finish)


def run_start(args) -> int:
    from ..core.fileio import output_folder, write_json
    from ..core.glue import get_task, load_split
    from ..core.maps import open_maps, tag_of
    from ..encoders.load import load_encoder
    from ..labelling.labelstudio import check_project_title
    from ..labelling.push import HIDDEN_COLUMNS, label_config, push, setup_annotators
    from ..labelling.sample import sample_maps
    from ..shares.estimate import MIN_CALIBRATED_MAPS

    check_project_title(args.project)  # before the encoder runs and before anything is written
    out = Path(args.out)
    maps = out / "maps"
    again = (maps / "store.json").exists()  # sampled before: push those maps (again), e.g. to a new project
    if again:
        store = sampled_store(out, args)
    else:
        output_folder(maps, ("store.json",), False)  # not a file, a FIFO or a device
        tasks = list({get_task(t).name: get_task(t) for t in (args.task or TASKS)}.values())  # repeats once
    ls = connect(args)  # before the encoder runs: a wrong URL or token fails at once
    if again:
        print(f"{maps} already holds the {len(store.meta)} maps of "
              f"{', '.join(sorted({tag_of(m['id']) for m in store.meta}))} sampled before: pushing those")
    else:
        splits = [load_split(t, "dev", glue_dir(args)) for t in tasks]
        enc = load_encoder(args.model, max_length=args.max_length)
    project = ls.ensure_project(args.project, label_config(), hidden_columns=HIDDEN_COLUMNS)
    if not again:
        asked = args.maps or DEFAULT_MAPS
        if asked < MIN_CALIBRATED_MAPS:
            print(f"note: with fewer than {MIN_CALIBRATED_MAPS} labelled maps your encoder's census counts, with the "
                  f"band of share errors measured on them, which is wide on so few (docs/pages/commands/adapt.md); "
                  f"{asked} asked for")
        # no PNGs beside the store: their titles name the task, layer and head; Label Studio shows the maps unnamed
        sample_maps(enc, splits, math.ceil(asked / len(tasks)), args.seed, maps, pngs=False,
                    progress=progress(), design="uniform")
        store = open_maps(maps)
        print(f"sampled {len(store.meta)} maps of {enc.tag} uniformly into {maps}")
    pushed = push(ls, project, store, predictor=None)  # skips the maps the project holds already
    record = recorded(out, strict=False)
    annotators, source = args.annotators, ""
    if annotators is None:  # a rerun keeps the number of annotators per map it was started with
        n = record.get("annotators") if again else None
        if not _whole(n):
            n, source = getattr(project, "maximum_annotations", None), "as the project has it"
        else:
            source = f"as {out / PROJECT} recorded"
        annotators = n if _whole(n) else 1
    r = setup_annotators(ls, project, annotators, blind=True)
    # what `adapt finish --out` pulls when not given --project: this server's project (an id is a server's own)
    write_json(out / PROJECT, {"url": ls.url, "project": project.id, "title": project.title,
                               "annotators": annotators})
    print(f"pushed {pushed['pushed']} maps to project {project.id} ({project.title!r}) without predictions"
          + (f" ({pushed['skipped_existing']} were there already)" if pushed["skipped_existing"] else ""))
    if record.get("project") not in (None, project.id) and record["url"].rstrip("/") == ls.url.rstrip("/"):
        print(f"note: {out / PROJECT} named project {record['project']} before; it names {project.id} now "
              f"(`adapt finish --out {out} --project {record['project']}` pulls the old one)")
    who = ("label them yourself, or have an annotator sign up" if annotators == 1 else
           f"each map goes to {annotators} annotators, each of whom signs up")
    print(f"label them at {ls.url}/projects/{project.id}/data (Label All Tasks): {who} with {r['invite']}"
          + (f" (annotators per map: {annotators}, {source}; --annotators to change)" if source and again else ""))
    print(f"then: patterncnn adapt finish --out {out} (it pulls project {project.id} of {ls.url}, recorded in "
          f"{out / PROJECT})")
    return 0


def _whole(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1


def sampled_store(out: Path, args=None):
    """The maps ``adapt start --out out`` sampled before, checked: drawn uniformly, complete (a killed run can leave a
    part), and, with ``args``, sampled as this command asks (--model, --max-length and --seed, defaults included;
    --task and --maps where given), so that pushing them again does not put another encoder's maps before the
    annotators."""
    from ..core.fileio import OutputError, public_path
    from ..core.glue import get_task
    from ..core.maps import MapFormatError, open_maps

    maps = out / "maps"
    store = open_maps(maps)
    header = store.header
    if header.get("design") != "uniform" or any(m.get("sampling") != "uniform" for m in store.meta):
        raise MapFormatError(f"{maps} holds maps that were not drawn uniformly (not by `adapt start`); their labels "
                             f"would not estimate the census: choose another --out")
    tasks, per_task = list(header.get("tasks") or ()), header.get("per_task")
    if not tasks or not _whole(per_task) or len(store.meta) != per_task * len(tasks):
        want = f" of {per_task * len(tasks)}" if tasks and _whole(per_task) else ""
        raise MapFormatError(f"the sampling into {maps} was cut off ({len(store.meta)}{want} maps): remove {maps} and "
                             f"run `patterncnn adapt start` again, or choose another --out")
    if args is None:
        return store
    model = (header.get("model") or {}).get("model") if isinstance(header.get("model"), dict) else None
    differ = []
    if public_path(args.model) != public_path(model):  # a header of before public paths holds the full path
        differ.append(f"--model {model}")
    if args.max_length != header.get("max_length"):
        differ.append(f"--max-length {header.get('max_length')}")
    if args.seed != header.get("seed"):
        differ.append(f"--seed {header.get('seed')}")
    asked = sorted({get_task(t).name for t in args.task or ()})  # aliases and repeats once
    if asked and asked != sorted(tasks):
        differ.append(" ".join(f"--task {t}" for t in tasks))
    if args.maps and math.ceil(args.maps / len(asked or tasks)) != per_task:
        n = len(tasks)
        differ.append(f"--maps {per_task * n} ({per_task} per task over {n} tasks: any --maps from "
                      f"{(per_task - 1) * n + 1} to {per_task * n})")
    if differ:
        raise OutputError(f"{maps} holds maps sampled with {', '.join(differ)}, not as this command asks: pass "
                          f"those to push them again (`{sampling_command(out, header)}`), or choose another --out "
                          f"for a new sample")
    return store


def sampling_command(out: Path, header: dict) -> str:
    """The ``adapt start`` command that pushes the maps of ``out`` again (it samples none), with the options that
    sampled them (``header``: their store's)."""
    import shlex

    tasks = list(header.get("tasks") or ())
    model = (header.get("model") or {}).get("model") if isinstance(header.get("model"), dict) else None
    options = [f"--model {shlex.quote(str(model))}"] if model else []
    if header.get("max_length") not in (None, 128):
        options.append(f"--max-length {header['max_length']}")
    if header.get("seed"):
        options.append(f"--seed {header['seed']}")
    if tasks and sorted(tasks) != sorted(TASKS):
        options += [f"--task {t}" for t in tasks]
    return " ".join(["patterncnn adapt start", *options, f"--out {shlex.quote(str(out))} --project TITLE"])


def run_finish(args) -> int:
    from ..core.maps import open_maps
    from ..labelling.labelstudio import AnnotateError
    from ..labelling.pull import pull
    from ..labelling.sets import check_labelled_set
    from ..shares.estimate import (
        MIN_CALIBRATED_MAPS,
        TARGET_COVERAGE,
        TARGET_ERROR,
        cells_measured_on,
        few_maps_reason,
    )
    from ..training.adapt import AdaptConfig, adapt, default_heldout, prepare

    out = Path(args.out)
    if not (out / "maps" / "store.json").exists():
        raise FileNotFoundError(f"{out / 'maps'} holds no map store: run `patterncnn adapt start --out {out}` first")
    acfg = AdaptConfig(epochs=args.epochs, folds=args.folds, freeze_bn=args.freeze_bn,
                       reapply_shift=not args.no_reapply_shift)
    prepare(args.checkpoint, args.annotations, out / "classifier", acfg, args.overwrite)  # refusals before the pull
    ls = None if args.from_file else connect(args)
    maps = open_maps(out / "maps")
    again = sampling_command(out, maps.header)  # pushes OUT's maps again, to a project it records
    project = args.project
    if project is None and ls is not None:
        record = recorded(out)
        if record and record["url"].rstrip("/") != ls.url.rstrip("/"):
            raise AnnotateError(f"{out / PROJECT} names project {record['project']} of Label Studio at "
                                f"{record['url']}, not of {ls.url}: connect to {record['url']} (--url), or pass "
                                f"--project (title or id)")
        if record and ls.get_project(record["project"]) is None:
            title = f" ({record['title']!r})" if isinstance(record.get("title"), str) else ""
            raise AnnotateError(f"{out / PROJECT} names project {record['project']}{title} of {ls.url}, which the "
                                f"server no longer has: push {out / 'maps'} to a project again with `{again}` (it "
                                f"records the new one), or pass --project (title or id)")
        project = record.get("project")
    r = pull(ls, project, maps, out / "labels", from_file=args.from_file, pushed_by=again)
    print(f"pulled {r['labelled']} labelled map(s) into {out / 'labels'} ({', '.join(f'{k} {v}' for k, v in r['labels'].items())})")
    if r["unlabelled"] or r["cancelled"]:
        print(f"warning: {r['unlabelled']} of the project's {r['tasks']} maps are not labelled yet and "
              f"{r['cancelled']} were skipped: the fits and the validation use the labelled ones, which are not a "
              f"uniform sample if they were labelled in order or skipped as hard; to use all, stop this (Ctrl-C), "
              f"label the rest and run it again")
    args.interrupt_note = (f"the pulled labels are kept in {out / 'labels'}; no fit is kept (nothing was written to "
                           f"{out / 'classifier'}): the same command pulls again and fits from the start")
    heldout = (args.heldout or default_heldout(args.checkpoint)) if args.epochs else None  # 0: the weights are kept
    if heldout is not None:
        check_labelled_set(heldout, "--heldout")  # refused before the fits, not after
    res = adapt(args.checkpoint, args.annotations, out / "labels", out / "classifier", acfg, progress=progress(),
                overwrite=args.overwrite, heldout=heldout)
    args.interrupt_note = None  # the adapted classifier is written
    b, n = res["before"], res["new"]
    if args.epochs:
        print(f"on your {n['maps']} maps, out of fold: accuracy {n['accuracy']:.3f} (the classifier before adapting: "
              f"{b['accuracy']:.3f})")
        noise = two_standard_errors(b["accuracy"], n["maps"])
        if b["accuracy"] - n["accuracy"] > noise:
            print(f"the classifier before adapting labelled more of your maps right, by more than {100 * noise:.0f} "
                  f"points (two standard errors on {n['maps']} maps); `adapt finish --epochs 0` keeps its weights and "
                  f"still gives your encoder a validated band of its own (on held-out families it labelled more maps "
                  f"right, but its census share errors were larger: docs/pages/commands/adapt.md)")
    else:
        print(f"the classifier's weights kept; on your {n['maps']} maps (it never saw them): accuracy "
              f"{n['accuracy']:.3f}")
    for enc, v in res["validation_on_new"].items():
        print(f"census of {enc}: estimator {v['estimator']}{'/' + v['scope'] if v['scope'] else ''}, validated share "
              f"error {100 * v['mean_abs_error']:.1f} points per pattern, intervals held the hand share in "
              f"{100 * v['coverage']:.0f}% of {cells_measured_on(v)} (targets {100 * TARGET_ERROR:.0f} points and "
              f"{100 * TARGET_COVERAGE:.0f}%: "
              f"{'met' if v['meets_targets'] else 'not met'}"
              + (f", as {v['few_maps']} maps are too few to judge them" if v.get("few_maps") else "") + ")")
        if v.get("few_maps"):
            print(f"{few_maps_reason(v['few_maps'])} (under {MIN_CALIBRATED_MAPS}): its census counts, with the band "
                  f"of share errors measured on them")
    if res.get("heldout"):
        print(heldout_lines(res["heldout"]))
    elif args.epochs and heldout is None:
        print("the other encoders keep the classifier's validation, unchecked: no held-out set of theirs was found "
              "(pass --heldout SET, a labelled set of them the classifier never saw)")
    why = "" if args.epochs else (": the weights are the classifier's, the version new, as it carries your maps' "
                                  "validation and calibration rows")
    print(f"wrote {out / 'classifier'} ({res['classifier_version']}{why}); use it with "
          f"`patterncnn census --classifier {out / 'classifier'}/patterncnn.onnx`")
    return 0


def two_standard_errors(accuracy: float, maps: int) -> float:
    """Two standard errors of an accuracy measured on ``maps`` maps: the fall ``adapt finish`` warns of."""
    return 2 * (accuracy * (1 - accuracy) / maps) ** 0.5


def heldout_lines(check: dict) -> str:
    """What ``adapt finish`` prints of :func:`patterncnn.training.adapt.heldout_check`: per family, the accuracy
    before and after adapting on maps neither classifier saw, and a warning where it fell by more than two standard
    errors."""
    lines = [f"the other encoders keep the classifier's validation; on {check['set']} (maps neither classifier saw):"]
    for fam, s in check["families"].items():
        b, a = s["before"]["accuracy"], s["after"]["accuracy"]
        lines.append(f"  {fam}: accuracy {b:.3f} before adapting, {a:.3f} after ({s['after']['maps']} maps)")
        noise = two_standard_errors(b, s["after"]["maps"])
        if b - a > noise:
            lines.append(f"warning: adapting cost {fam} {100 * (b - a):.1f} points of accuracy, more than two standard "
                         f"errors ({100 * noise:.1f}): its census with the adapted classifier keeps a validation of "
                         f"the classifier before; measure it again with `patterncnn validate --annotations SET` "
                         f"(SET: labelled maps of it drawn with `sample --design uniform`)")
    return "\n".join(lines)


def recorded(out: Path, strict: bool = True) -> dict:
    """What ``adapt start --out out`` recorded of the project it pushed to ({url, project (its id), title,
    annotators}); {} when it recorded none (an adaptation started by hand, or before the record existed: pull then
    asks for --project). A record that names no project on a server is refused, or with ``strict`` False taken for
    none."""
    from ..core.fileio import parse_json
    from ..labelling.labelstudio import AnnotateError

    path = out / PROJECT
    if not path.is_file():
        return {}
    try:
        record = parse_json(path.read_bytes(), str(path), "pass --project (title or id)", AnnotateError)
        project = record.get("project") if isinstance(record, dict) else None
        if not _whole(project) or not isinstance(record.get("url"), str) or not record["url"]:
            raise AnnotateError(f"{path} names no project; pass --project (title or id)")
    except AnnotateError:
        if strict:
            raise
        return {}
    return record
