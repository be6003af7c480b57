"""``patterncnn analyze``: the layer × head grid of patterns for one sentence or pair."""

from __future__ import annotations

from .common import add_classifier_args, add_max_length, add_overwrite, classifier, model_name, out_path, text


def register(sub) -> None:
    p = sub.add_parser("analyze", help="the layer x head grid of patterns for one sentence or pair",
                       description="Run the encoder on one input and classify every head's map; print the grid "
                                   "(and write it as a figure with --out).")
    p.add_argument("text", nargs="+", type=text, help="a sentence, or two sentences for a pair")
    p.add_argument("--model", type=model_name, default="minilm",
                   help="encoder (default: %(default)s, the embedded all-MiniLM-L6-v2)")
    add_max_length(p)
    add_classifier_args(p)
    p.add_argument("--out", type=out_path, help="write the grid figure to this PNG")
    add_overwrite(p, "file")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..core.fileio import output_file
    from ..encoders.load import load_encoder
    from ..experiments.analyze import analyze, check_texts, grid_text, shares_text

    texts = tuple(args.text)
    check_texts(texts)
    if args.out and not args.out.lower().endswith(".png"):
        raise ValueError(f"--out {args.out}: the grid is written as a PNG; give a file name ending in .png")
    out = output_file(args.out, args.overwrite) if args.out else None  # before any work
    clf = classifier(args)
    enc = load_encoder(args.model, max_length=args.max_length)
    res = analyze(enc, clf, texts)
    print(f"{len(res['tokens'])} tokens: {' '.join(res['tokens'])}")
    if res["truncated"]:
        print(f"note: the input was truncated to --max-length {enc.max_length} tokens")
    print(grid_text(res["labels"]))
    print(shares_text(res["labels"]))
    if enc.weights_note:  # as the census notes it (helper 106: the other commands said nothing)
        print(f"note: the maps of {enc.name} come from converted weights: {enc.weights_note}")
    if out:
        from ..core.fileio import write_bytes
        from ..core.plots import analyze_figure

        weights = f"\n{enc.weights_note}" if enc.weights_note else ""
        write_bytes(out, analyze_figure(res["probs"], f"{args.model}: pattern per head (shade = confidence){weights}"))
        print(f"wrote {args.out}")
    return 0
