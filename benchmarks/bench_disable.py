"""Cost of `patterncnn disable` per head, as a ratio to one full dev evaluation (MiniLM, 277 RTE examples).

    python benchmarks/bench_disable.py --glue-dir ../shared/glue [--model models-ft/minilm-rte] [--rounds 2]

One full evaluation = tokenized, length-bucketed batches through the whole classifier (what the
baseline costs). Per head, two ways of scoring the model with that head attending uniformly:
(a) naive: a full forward pass inside ``UniformHeads``; (b) what `disable` does: the layers below the
head are read from the cache and only the head's layer and those above are re-run. And, to price the
mechanism itself (transformers' attention interface with the registered uniform-heads function, the
switch of ``attn_implementation`` in and out, the per-layer check): (c) the same replay as (b) with
no head disabled, on the model's own eager attention; (b)/(c) is its overhead. The variants
alternate, one head per layer, ``--rounds`` times, in one process; the ratio is each variant's mean
time per head over the mean time of one full evaluation measured in the same rounds. The one-off
cost of filling the cache (a full pass with recording hooks) is printed too, amortised over all
units of a run. Target: (b) <= 3x one full evaluation per head.
Without --model, MiniLM gets a fresh 2-class head (timing does not depend on the head's weights);
--model also takes a fine-tuned folder of any family `disable` supports.
"""

import argparse
import time

import numpy as np
import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--glue-dir", required=True)
    ap.add_argument("--model", default=None, help="a fine-tuned folder (default: minilm with a fresh head)")
    ap.add_argument("--examples", type=int, default=277)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from patterncnn.core.glue import load_split
    from patterncnn.encoders.load import resolve_model
    from patterncnn.encoders.uniform_heads import UniformHeads
    from patterncnn.experiments.disable import CachedClassifier

    path = resolve_model(args.model or "minilm")
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=2, attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(path)
    split = load_split("rte", "dev", args.glue_dir, limit=args.examples, seed=0)
    texts = [ex.texts for ex in split.examples]
    t0 = time.perf_counter()
    runner = CachedClassifier(model, tok, texts, max_length=128, batch_size=32)
    fill = time.perf_counter() - t0  # tokenize + recording pass + the replay self-check
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    full, naive, cached, plain = [], [], [], []
    for r in range(args.rounds):
        for layer in range(layers):
            head = (layer + r) % heads
            t0 = time.perf_counter()
            runner.full()
            full.append(time.perf_counter() - t0)
            with UniformHeads(model, {layer: [head]}):
                t0 = time.perf_counter()
                a = runner.full()
                naive.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            with UniformHeads(model, {layer: [head]}):  # as `disable` scores a unit: switch in, replay, switch back
                b = runner.run(layer)
            cached.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            runner.run(layer)
            plain.append(time.perf_counter() - t0)
            assert torch.allclose(a, b, atol=1e-4), "the cached replay differs from the full pass"
    f = float(np.mean(full))
    units = layers * heads + layers
    print(f"model {args.model or 'minilm (fresh head)'} ({model.config.model_type}); {len(texts)} RTE dev examples; "
          f"{layers}x{heads} heads; "
          f"{args.rounds} rounds x {layers} heads (one per layer), variants alternating; torch threads {args.threads}")
    print(f"one full evaluation:             {f:.3f} s (mean of {len(full)})")
    print(f"per head, naive full pass:       {np.mean(naive):.3f} s = {np.mean(naive) / f:.2f}x one full evaluation")
    print(f"per head, cached lower layers:   {np.mean(cached):.3f} s = {np.mean(cached) / f:.2f}x one full evaluation")
    print(f"same replay, nothing disabled:   {np.mean(plain):.3f} s (model's eager attention); uniform-heads "
          f"mechanism overhead {np.mean(cached) / np.mean(plain):.3f}x")
    print(f"cache fill (once per run):       {fill:.3f} s = {fill / f:.2f}x; amortised over {units} units: "
          f"{fill / f / units:.3f}x per unit")
    print(f"per head incl. amortised fill:   {(np.mean(cached) + fill / units) / f:.2f}x one full evaluation "
          f"(target <= 3x)")


if __name__ == "__main__":
    main()
