"""``patterncnn annotate config|push|sheets|pull``: the Label Studio round trip."""

from __future__ import annotations

import sys
from collections import Counter

from ..labelling.agreement import FEW_FOR_DAWID_SKENE, METHODS
from ..labelling.sets import tie_fix
from .common import (
    add_connection_args,
    add_labelled_args,
    add_overwrite,
    connect,
    given,
    in_path,
    labelled_set,
    out_path,
    positive_int,
    seed,
)


def register(sub) -> None:
    p = sub.add_parser("annotate", help="label maps in Label Studio: config, push, annotators, sheets, pull, "
                                        "agreement",
                       description="Round trip with a Label Studio server (label-studio-sdk 2.x). Connection from "
                                   "--url/--api-key or LABEL_STUDIO_URL/LABEL_STUDIO_API_KEY.")
    asub = p.add_subparsers(dest="annotate_command", metavar="ACTION", required=True)
    q = asub.add_parser("config", help="print the labeling config (XML) generated from the five labels")
    q.set_defaults(func=run_config)

    q = asub.add_parser("push", help="import maps as tasks (idempotent), with optional pre-annotations",
                        description="Create or reuse a project and import maps from a map store (or plain .npz) as "
                                    "tasks; map ids already in the project are skipped. Images are embedded in the "
                                    "tasks as PNG data URIs, so a stock server needs no storage setup.")
    q.add_argument("maps", type=in_path, help="map store folder (from `patterncnn sample`) or a plain .npz")
    q.add_argument("--project", type=given, required=True, help="project title (created if missing) or id")
    q.add_argument("--pre", choices=("rule", "none"), default="rule",
                   help="pre-annotate with the feature rule, or not at all (default: %(default)s)")
    q.add_argument("--classifier", type=in_path,
                   help="pre-annotate with a trained classifier instead (models/patterncnn.onnx)")
    q.add_argument("--order", choices=("store", "uncertain"), default="store",
                   help="'uncertain': push the maps the predictor is least sure about first (default: %(default)s)")
    q.add_argument("--limit", type=positive_int, help="push at most this many new maps")
    add_labelled_args(q, "leave out")
    add_connection_args(q)
    q.set_defaults(func=run_push)

    q = asub.add_parser("sheets", help="render maps as numbered contact sheets, to look through a batch by eye",
                        description="Render maps as PNG contact sheets (per-map colour scale, [SEP] lines), each "
                                    "map captioned with a running number; index.json maps numbers to map ids.")
    q.add_argument("maps", type=in_path, nargs="+", help="map store folder(s) or .npz file(s)")
    q.add_argument("--out", type=out_path, required=True, help="folder for sheet-NNN.png and index.json")
    q.add_argument("--per-sheet", type=positive_int, default=16, help="maps per contact sheet (default: %(default)s)")
    q.add_argument("--shuffle", type=seed, metavar="SEED", help="shuffle the maps with this seed first")
    add_overwrite(q, "sheets")
    q.set_defaults(out_folder=True, func=run_sheets)
    _register_annotators(asub)
    _register_pull(asub)


def _register_annotators(asub) -> None:
    q = asub.add_parser("annotators", help="set a project up for several blind annotators; the sign-up link",
                        description="Each task goes to --per-task annotators in Label All Tasks, where no annotator "
                                    "sees another's labels; predictions are hidden too unless --show-predictions. "
                                    "Prints the sign-up link to send to each annotator (one account each) and the "
                                    "current members.")
    q.add_argument("--project", type=given, required=True, help="project title or id")
    q.add_argument("--per-task", type=int, default=None, help="annotators per task (default: 3)")
    q.add_argument("--show-predictions", action="store_true", help="show the pre-annotations to annotators")
    q.add_argument("--new-link", action="store_true",
                   help="make a new sign-up link: the earlier one stops working (the accounts made with it stay); "
                        "the link is the whole Label Studio's, not this project's. Alone, it leaves the project's "
                        "set-up as it is")
    add_connection_args(q)
    q.set_defaults(func=run_annotators)

    q = asub.add_parser("agreement", help="agreement between the annotators of a labelled set (Cohen's, Fleiss' "
                                          "kappa)",
                        description="Pairwise Cohen's kappa, Fleiss' kappa and the confusion between raters, each "
                                    "rater and each pre-annotation source against the resolved labels.")
    q.add_argument("annotations", type=in_path, help="a labelled set written by `annotate pull` (with votes.csv)")
    q.add_argument("--raters", choices=("annotator", "pass"), default="annotator",
                   help="'pass': an annotator's 1st, 2nd, ... annotation of a map count as separate raters "
                        "(self-agreement across passes) (default: %(default)s)")
    q.add_argument("--by-encoder", action="store_true",
                   help="also report each encoder family's maps on their own (fine-tunes count with their base)")
    q.add_argument("--against", type=in_path, metavar="REFERENCE",
                   help="another labelled set of the same maps (e.g. annotations/): score this set's resolved "
                        "labels and each of its raters against the reference's labels, always per encoder family "
                        "and over all (a test-retest of the labels); the report is then this comparison only, "
                        "with --raters applied to both sets")
    q.add_argument("--classifier", type=in_path, metavar="ONNX",
                   help="with --against: also score this classifier's out-of-fold predictions (stored with it by "
                        "`patterncnn train`) against both sets' labels")
    q.add_argument("--out", type=out_path, help="also write the report as JSON")
    add_overwrite(q, "file")
    q.set_defaults(func=run_agreement)


def _register_pull(asub) -> None:
    q = asub.add_parser("pull", help="export annotations and merge them into the labelled set (e.g. annotations/)",
                        description="Export the project's annotations (or read an export file) and merge them into "
                                    "the labelled set: every annotation and prediction is kept (votes.csv, "
                                    "predictions.csv), each map's label is resolved from all its annotators "
                                    "(labels.csv), and the labelled maps are added to maps/. Nothing already there "
                                    "is dropped unless --replace.")
    q.add_argument("--project", type=given, help="project title or id")
    q.add_argument("--maps", type=in_path, action="append",
                   help="map store(s) the tasks were pushed from (repeatable); needed "
                        "unless the set's maps/ already holds every labelled map")
    q.add_argument("--from-file", type=in_path, help="a JSON export (plain or .json.gz) instead of a server")
    q.add_argument("--out", type=out_path, default="annotations", help="the labelled set to merge into (default: %(default)s)")
    q.add_argument("--resolve", choices=METHODS,
                   help="how annotators' labels become one label per map: the most votes; Dawid-Skene; or the "
                        "most votes, with Dawid-Skene only for maps where no label has the most (default: the "
                        "method of the set's latest pull, majority for a new set)")
    q.add_argument("--replace", action="store_true",
                   help="make the set exactly this export's labels; prints what is dropped (try with --dry-run)")
    q.add_argument("--drop-deleted", action="store_true",
                   help="drop the votes of this project that earlier pulls brought and Label Studio no longer holds "
                        "(deleted there); without it they keep counting, and are listed")
    q.add_argument("--dry-run", action="store_true", help="report what the pull would change; write nothing")
    q.add_argument("--annotator", type=given, action="append", default=[], metavar="ID=EMAIL",
                   help="name a Label Studio user that the export gives only by id (repeatable)")
    q.add_argument("--server", type=given, metavar="NAME",
                   help="the name recorded as the rows' server (their origin, with project and task): default the "
                        "URL pulled from; with --from-file, name the server the export came from (default: none, "
                        "the origin of sets pulled before servers were recorded)")
    add_connection_args(q)
    q.set_defaults(out_folder=True, func=run_pull)


def run_config(args) -> int:
    from ..labelling.push import label_config

    print(label_config())
    return 0


def run_push(args) -> int:
    from ..core.maps import open_maps
    from ..labelling.push import HIDDEN_COLUMNS, RulePredictor, blind_project, check_pushable, label_config, push

    maps = open_maps(args.maps)
    check_pushable(maps)  # before Label Studio is asked anything (no project is created for maps it cannot show)
    target, labelled = labelled_set(args)
    if args.classifier:
        from ..classifier.onnx import OnnxClassifier

        predictor = OnnxClassifier(args.classifier)
    else:
        predictor = RulePredictor() if args.pre == "rule" else None
    ls = connect(args)
    project = ls.ensure_project(args.project, label_config(), hidden_columns=HIDDEN_COLUMNS)
    if blind_project(ls, project):
        print(f"project {project.id} showed the map id and metadata to annotators (an earlier patterncnn's config): "
              f"it has the blind config now")
    result = push(ls, project, maps, predictor=predictor, order=args.order, limit=args.limit, labelled=labelled,
                  skip_labelled=args.skip_labelled)
    print(f"pushed {result['pushed']} map(s) to project {project.id} ({project.title!r}), annotation guide "
          f"{result['guide']}; {result['skipped_existing']} already there")
    if result["without_seps"]:
        from ..classifier.classify import FILE_SEPS_FIX, without_seps_note

        reader = "the classifier" if args.classifier else "the feature rule"
        print("note: " + without_seps_note(result["without_seps"], FILE_SEPS_FIX, reader), file=sys.stderr)
    already = result["already_labelled"]
    if already and args.skip_labelled:
        print(f"left out {len(already)} map(s) already labelled in {target} (e.g. {already[0]})")
    elif already:
        print(f"note: {len(already)} of the pushed maps {'is' if len(already) == 1 else 'are'} already labelled in "
              f"{target} (e.g. {already[0]}); pulled there, their new labels join the earlier ones (each server's "
              f"as rows of its own): pass --skip-labelled to leave them out")
    print(f"label them at {ls.url}/projects/{project.id}/data")
    return 0


def run_sheets(args) -> int:
    from ..classifier.render import write_sheets
    from ..core.maps import MultiStore, open_maps

    r = write_sheets(MultiStore([open_maps(m) for m in args.maps]), args.out, args.per_sheet, args.shuffle,
                     args.overwrite)
    for map_id, why in r["skipped"]:
        print(f"{map_id}: skipped: {why}", file=sys.stderr)
    skipped = (f"; {len(r['skipped'])} map(s) skipped, not drawn (each named above): fix or remove them"
               if r["skipped"] else "")
    print(f"wrote {r['sheets']} sheet(s) of up to {args.per_sheet} maps to {args.out} (index.json maps #n to map "
          f"ids){skipped}")
    return 0


def run_annotators(args) -> int:
    from ..labelling.labelstudio import AnnotateError
    from ..labelling.push import setup_annotators

    ls = connect(args)
    project = ls.find_project(args.project)
    if project is None:
        raise AnnotateError(f"no Label Studio project titled {args.project!r}; push maps to it first")
    if args.new_link and args.per_task is None and not args.show_predictions:
        # a new link alone: the project keeps its annotators per task and blindness (helper 108: --per-task's default
        # turned a 2-per-task project into a 3-per-task one mid-round)
        print(f"sign-up link for the annotators (new: earlier links no longer work): {ls.invite_link(new=True)}")
        print(f"project {project.id} ({project.title!r}) left as it was set up; members now: "
              f"{', '.join(ls.annotators().values())}")
        return 0
    r = setup_annotators(ls, project, 3 if args.per_task is None else args.per_task, blind=not args.show_predictions,
                         new_link=args.new_link)
    hidden = "other annotators' labels and the predictions" if r["blind"] else "other annotators' labels"
    print(f"project {project.id} ({project.title!r}): each task goes to {r['per_task']} annotator(s) in Label All "
          f"Tasks, which hides {hidden}")
    print(f"sign-up link for the annotators (one account each, with their own e-mail): {r['invite']}"
          + (" (new: earlier links no longer work)" if args.new_link else
             " (it lets anyone who has it sign up; once everyone has, make it unusable with --new-link)"))
    print(f"members now: {', '.join(r['members'].values())}")
    print("ask annotators to label only through Label All Tasks: the task list (Data Manager) shows every "
          "annotation to every member")
    return 0


def _names(pairs: list[str]) -> dict[int, str]:
    names = {}
    for pair in pairs:
        uid, sep, email = pair.partition("=")
        if not sep or not uid.strip().isdigit() or not email.strip():
            raise ValueError(f"--annotator {pair!r}: write it as ID=EMAIL, e.g. --annotator 1=me@example.com")
        names[int(uid)] = email.strip()
    return names


def _changes(c: dict) -> str:
    return f"+{len(c['added'])} new, {len(c['updated'])} updated, {c['kept']} kept from earlier pulls" + (
        f", {len(c['dropped'])} dropped" if c["dropped"] else "")


def _skips(r: dict) -> str:
    """The pull's skips: every skipped annotation, and the tasks no one labelled for it (until 2026-11-29 only those
    tasks were counted: a skip of a task another annotator labelled went unsaid, helper 103)."""
    skips = r["skipped_annotations"]
    if skips == r["cancelled"]:
        return f"{skips} skipped/cancelled"
    return f"{skips} skipped/cancelled annotation(s) ({r['cancelled']} task(s) only skipped)"


def _ties(r: dict, project) -> str | None:
    """The pull summary's line on ties: how many, how they were settled, what to do about open ones."""
    open_, settled = r["ties"]["unresolved"], r["ties"]["resolved"]
    if not open_ and not settled:
        return None
    parts = []
    if open_:
        parts.append(f"{len(open_)} tie(s) left unresolved (labels.csv: resolution 'unresolved', no label; `train` "
                     f"leaves them out), e.g. {open_[0]}: "
                     f"{tie_fix(r['ties']['most_annotators'], repr(project) if project else 'P')}")
    if settled:
        rules = ", ".join(f"{k} {v}" for k, v in sorted(Counter(settled.values()).items()))
        parts.append(f"{len(settled)} tie(s) settled by a named rule ({rules}; labels.csv: tie True)")
    few = r["ties"].get("dawid_skene_few_maps")
    if few:
        raters = ", ".join(f"{a} {n}" for a, n in few["raters"].items())
        parts.append(f"warning: Dawid-Skene settled {len(few['ties'])} of them, e.g. {few['ties'][0]}, among "
                     f"annotators with fewer than {FEW_FOR_DAWID_SKENE} labelled maps ({raters}): too few to measure "
                     f"how each errs, so its label and resolution_p are its priors' guess, not a measured one; get "
                     f"one more annotator per task (`patterncnn annotate annotators --project "
                     f"{repr(project) if project else 'P'} --per-task N`, N one more than the annotators who tied) and "
                     f"pull again, or pull with --resolve majority to leave such ties open")
    return "ties (labels with equal votes; with two annotators, every disagreement): " + "; ".join(parts)


def run_pull(args) -> int:
    from ..core.fileio import output_folder
    from ..core.maps import MultiStore, open_maps
    from ..labelling.pull import pull

    output_folder(args.out, (), overwrite=True)  # the set it merges into: a folder, or nothing yet
    names = _names(args.annotator)
    maps = MultiStore([open_maps(m) for m in args.maps]) if args.maps else None
    ls = None if args.from_file else connect(args)
    r = pull(ls, args.project, maps, args.out, from_file=args.from_file, method=args.resolve,
             replace=args.replace, dry_run=args.dry_run, names=names, server=args.server,
             drop_deleted=args.drop_deleted)
    c = r["changes"]
    print(f"{r['source']}: {r['tasks']} task(s); annotations {_changes(c['annotations'])}; predictions "
          f"{_changes(c['predictions'])}")
    counts = ", ".join(f"{k} {v}" for k, v in r["labels"].items())
    print(f"{args.out}: {r['labelled']} labelled map(s) ({counts}): +{len(c['labels']['added'])} new, "
          f"{len(c['labels']['relabelled'])} relabelled, {len(c['labels']['dropped'])} dropped; resolved by "
          f"{r['resolution']} ({', '.join(f'{k} {v}' for k, v in sorted(r['resolutions'].items()))}); "
          f"{len(r['disagreements'])} with disagreeing annotations; {_skips(r)} and {r['unlabelled']} unlabelled "
          f"task(s) in this export")
    ties = _ties(r, args.project)
    if ties:
        print(ties)
    if short := r["short_of_annotators"]:
        first, n = next(iter(short["maps"].items()))
        print(f"warning: the round is not finished: {len(short['maps'])} labelled map(s) have fewer annotations "
              f"than the {short['per_task']} per task the project asks for, e.g. {first} ({n}); their labels come "
              f"from the votes they have ({sum(k == 1 for k in short['maps'].values())} from one annotation alone, "
              f"as 'single') and `train` would use them: pull again once every task has its {short['per_task']} "
              f"annotators")
    if moved := c["labels"].get("uncertain_changed"):
        print(f"note: {len(moved)} map(s) changed their 'uncertain' flag, e.g. {moved[0]}: labels.csv now marks a map "
              f"uncertain when more than half of its annotators ticked it (a row of an older pull may have taken one "
              f"vote's flag); their labels are unchanged unless counted as relabelled")
    if not r["changed"] and not args.dry_run:
        print(f"nothing changed: this export ({r['export']}) is already in {args.out}; only pulls.jsonl logs the pull")
    if c["labels"]["dropped"]:
        print(f"dropped (--replace): {', '.join(c['labels']['dropped'][:10])}"
              + (f" and {len(c['labels']['dropped']) - 10} more" if len(c["labels"]["dropped"]) > 10 else ""))
    if r["unknown_annotators"]:
        print(f"warning: the export names Label Studio user(s) {', '.join(r['unknown_annotators'])} by id only; "
              f"they are recorded as 'user <id>': pass --annotator ID=EMAIL, or pull from the server")
    anchored = r["started_from_predictions"]
    if anchored["votes"]:
        print(f"warning: {anchored['votes']} vote(s) started from a pre-annotation that Label Studio showed "
              f"pre-selected ({anchored['kept_its_label']} kept its label; the export's parent_prediction): they "
              f"were not given blind, as the guide asks; for blind labels run `patterncnn annotate annotators "
              f"--project {repr(args.project) if args.project else 'P'} --per-task 1` before labelling, or switch "
              f"off 'Use predictions to prelabel tasks' in the project's settings")
    copied, changed = r["copied_from_predictions"], r["changed_by_another"]
    if copied:
        print(f"warning: {len(copied)} annotation(s) were copied from predictions by Label Studio (\"Create "
              f"Annotations From Predictions\") and never submitted by a person, e.g. annotation {copied[0]}: they "
              f"are not votes and decide nothing; delete the copies in Label Studio (each holds an annotator's place: "
              f"while it is there, Label All Tasks does not give the task to another annotator)")
    if changed:
        c = changed[0]
        print(f"warning: {len(changed)} annotation(s) were last changed by another member than the one who made "
              f"them, and are recorded as the changer's votes, e.g. annotation {c['ls_annotation_id']} of "
              f"{c['map_id']}: made by {c['made_by']}, changed by {c['changed_by']} (pull-report.json lists all)")
    if r["votes_not_in_export"] and r["drop_deleted"]:
        g = r["votes_not_in_export"][0]
        print(f"dropped {len(r['votes_not_in_export'])} vote(s) of this project that are no longer in Label Studio, "
              f"e.g. annotation {g['ls_annotation_id']} of {g['map_id']} by {g['annotator']} (pull-report.json "
              f"lists all)")
    elif r["votes_not_in_export"]:
        g = r["votes_not_in_export"][0]
        print(f"warning: {len(r['votes_not_in_export'])} vote(s) that earlier pulls of this project brought are not "
              f"in this export (deleted in Label Studio?) and still count, e.g. annotation {g['ls_annotation_id']} "
              f"of {g['map_id']} by {g['annotator']} (pull-report.json lists all); `--drop-deleted` drops them "
              f"(`--replace` makes the set exactly this export, dropping every row not in it)")
    if r["predictions_without_content"]:
        print(f"warning: {r['predictions_without_content']} prediction(s) are listed by id only (a quick export): "
              f"pull from the server to record them")
    if args.dry_run:
        print("dry run: nothing written")
    return 0


def _report_out(args):
    """``annotate agreement --out``, checked before any work (None: not asked for)."""
    from ..core.fileio import output_file

    return output_file(args.out, args.overwrite) if args.out else None


def run_between(args, tables, out) -> int:
    """``annotate agreement SET --against REFERENCE``: the second set of labels of the same maps against the first."""
    from ..core.fileio import write_json
    from ..labelling.agreement import between_sets, format_between, rater_votes
    from ..labelling.sets import read_tables

    ref = read_tables(args.against)
    if not ref.labels:
        raise FileNotFoundError(f"{args.against}/labels.csv not found or empty: --against takes a labelled set "
                                f"written by `patterncnn annotate pull`")
    resolved = {m: r["label"] for m, r in tables.labels.items() if r["label"]}  # not the unresolved ties
    ref_resolved = {m: r["label"] for m, r in ref.labels.items() if r["label"]}
    if not set(resolved) & set(ref_resolved):
        raise ValueError(f"{args.annotations} and {args.against} share no map: --against compares two labellings "
                         f"of the same maps")
    methods = {}
    if args.classifier:
        from ..classifier.onnx import OnnxClassifier
        from ..shares.calibrate import stored_labels

        clf = OnnxClassifier(args.classifier)
        oof = stored_labels(clf.metadata, args.classifier)
        methods[f"{clf.model_version} out-of-fold"] = {m: label for m, label in oof.items() if m in resolved}
    if not ref.annotations:
        print(f"note: {args.against} has no votes.csv, so none of its maps counts as agreed by 2+ raters")
    report = between_sets(rater_votes(tables.annotations.values(), args.raters), resolved,
                          rater_votes(ref.annotations.values(), args.raters), ref_resolved, methods)
    print(format_between(report, args.against))
    if out:
        write_json(out, {"set": str(args.annotations), "reference": str(args.against), "by_family": report})
    return 0


def run_agreement(args) -> int:
    from ..core.fileio import write_json
    from ..labelling.agreement import agreement_by_encoder, agreement_report, format_report
    from ..labelling.sets import read_tables

    out = _report_out(args)
    tables = read_tables(args.annotations)
    if not tables.annotations:
        raise FileNotFoundError(f"{args.annotations}/votes.csv not found or empty: pull the labelled set "
                                f"with `patterncnn annotate pull` first")
    rows, labels, predictions = (list(t.values()) for t in (tables.annotations, tables.labels, tables.predictions))
    if args.classifier and not args.against:
        raise ValueError("--classifier scores a classifier against two labelled sets: give --against too")
    if args.against:
        return run_between(args, tables, out)
    if args.by_encoder:
        report = agreement_by_encoder(rows, labels, args.raters, predictions)
        print("all maps\n" + format_report(report["all"]))
        for family, part in report["by_encoder"].items():
            print(f"\nencoder {family}\n" + format_report(part))
    else:
        report = agreement_report(rows, labels, args.raters, predictions)
        print(format_report(report))
    if out:
        write_json(out, report)
    return 0
