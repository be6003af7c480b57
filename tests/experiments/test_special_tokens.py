"""`patterncnn special-tokens`: the normalisation against hand-computed values, token classes, and the command."""

import json

import numpy as np
import pytest

from patterncnn.experiments.special_tokens import (
    TokenClasses,
    class_shares,
    cls_row,
    is_punctuation,
    token_class_error,
)


def test_class_shares_by_hand():
    # T = 4 tokens: [CLS] hello , [SEP]; one layer, one head.
    a = np.array([[0.5, 0.2, 0.1, 0.2],
                  [0.1, 0.6, 0.1, 0.2],
                  [0.0, 0.0, 0.5, 0.5],
                  [0.4, 0.0, 0.0, 0.6]])[None, None]
    classes = TokenClasses("[CLS]", "[SEP]")
    ids = classes.assign(["[CLS]", "hello", ",", "[SEP]"])
    assert ids.tolist() == [0, 3, 2, 1]  # classes: cls 0, sep 1, punctuation 2, other 3
    s = class_shares(a, ids, len(classes.names))[:, 0, 0]
    # Column sums over T = 4: [CLS] 0.5+0.1+0+0.4 = 1.0 -> 0.25; [SEP] 0.2+0.2+0.5+0.6 = 1.5 -> 0.375;
    # "," 0.1+0.1+0.5+0 = 0.7 -> 0.175; "hello" 0.2+0.6+0+0 = 0.8 -> 0.2.
    assert s.tolist() == pytest.approx([0.25, 0.375, 0.175, 0.2])
    assert s.sum() == pytest.approx(1.0)
    assert cls_row(a, ids, len(classes.names))[0].tolist() == pytest.approx([0.5, 0.2, 0.1, 0.2])


def test_user_classes_and_precedence():
    classes = TokenClasses.for_tokenizer(type("T", (), {"cls_token": "<s>", "sep_token": "</s>"})(),
                                         {"digits": r"\d+", "the": "the"})
    assert classes.names == ["cls", "sep", "digits", "the", "punctuation", "other"]
    ids = classes.assign(["<s>", "the", "##12", "!", "cat", "</s>", "</s>"])
    assert [classes.names[i] for i in ids] == ["cls", "the", "digits", "punctuation", "other", "sep", "sep"]
    assert "not a valid regex" in token_class_error("x", "(") and "is taken" in token_class_error("cls", "a")
    assert token_class_error("digits", r"\d+") is None
    assert is_punctuation("...") and is_punctuation("##,") and not is_punctuation("a.") and not is_punctuation("")


def test_a_token_class_name_given_twice_is_refused_before_any_work(glue_dir, tmp_path, capsys):
    from patterncnn.cli import main

    assert main(["special-tokens", "--model", str(tmp_path / "no-model"), "--task", "rte", "--glue-dir", str(glue_dir),
                 "--token-class", "a=\\d+", "--token-class", "a=the", "--out", str(tmp_path / "sp")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--token-class name 'a' is given twice ('\\\\d+' and 'the')" in err, err
    assert not (tmp_path / "sp").exists()


@pytest.mark.parametrize("fixture, cls_token", [("tiny_bert", "[CLS]"), ("tiny_mpnet", "<s>")])
def test_special_tokens_command(fixture, cls_token, request, glue_dir, tmp_path, capsys):
    from patterncnn.cli import main

    model = request.getfixturevalue(fixture)
    out = tmp_path / "sp"
    assert main(["special-tokens", "--model", str(model), "--task", "rte", "--task", "sst2", "--glue-dir",
                 str(glue_dir), "--limit", "6", "--token-class", "digits=\\d+", "--out", str(out)]) == 0
    res = json.loads((out / "special_tokens.json").read_text())
    assert res["classes"]["cls_token"] == cls_token and res["classes"]["order"][2] == "digits"
    for task, s in res["tasks"].items():
        total = sum(np.array(s["share"][k]) for k in res["classes"]["order"])
        assert np.allclose(total, 1.0, atol=1e-5)  # every key token is in exactly one class
        row = sum(np.array(s["cls_row"][k]) for k in res["classes"]["order"])
        assert np.allclose(row, 1.0, atol=1e-5)
        assert s["token_fraction"]["sep"] > 0 and (out / f"special-{task}.png").is_file()
    assert (out / "cls-row.png").is_file()
    printed = capsys.readouterr().out
    assert "peaks in an early layer" in printed
    assert printed.strip().splitlines()[-1] == (f"wrote {out}/special_tokens.json, special_tokens.csv, "
                                                f"special-rte.png, special-sst2.png, cls-row.png")


class Interrupt:
    """A progress bar that interrupts the run, like Ctrl-C, at the first example after ``after`` examples."""

    def __init__(self, after: int):
        self.after, self.seen = after, 0

    def __call__(self, **kw):
        return self

    def update(self, n=1):
        if self.seen >= self.after:
            raise KeyboardInterrupt
        self.seen += n

    def close(self):
        pass


def test_an_unfinished_run_with_another_token_class_names_the_option(tiny_bert, glue_dir, tmp_path, capsys,
                                                                     monkeypatch):
    from patterncnn.cli import main
    from patterncnn.experiments import special_tokens as module
    from patterncnn.experiments.special_tokens import special_tokens

    monkeypatch.setattr(module, "WINDOW", 4)  # two windows: interrupted once the first is saved
    out = tmp_path / "sp"
    with pytest.raises(KeyboardInterrupt):
        special_tokens(str(tiny_bert), ["rte"], 6, glue_dir, out, max_length=32, progress=Interrupt(after=4))
    assert list((out / ".work" / "rte").glob("window-*.npz"))
    args = ["special-tokens", "--model", str(tiny_bert), "--task", "rte", "--glue-dir", str(glue_dir), "--limit", "6",
            "--max-length", "32", "--out", str(out)]
    assert main(args + ["--token-class", "digits=\\d+", "--limit", "4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "with other arguments (--limit: was 6, now 4; --token-class)" in err, err
    assert "{" not in err and "to resume it, or pass --overwrite" in err
    assert main(args) == 0  # the earlier arguments resume it


def test_a_run_stopped_before_its_first_window_leaves_nothing(tiny_bert, glue_dir, tmp_path, capsys, monkeypatch):
    from patterncnn.cli import main
    from patterncnn.experiments import special_tokens as module

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "special_window", stopped)
    out = tmp_path / "sp"
    assert main(["special-tokens", "--model", str(tiny_bert), "--task", "rte", "--glue-dir", str(glue_dir), "--limit",
                 "4", "--max-length", "32", "--out", str(out)]) == 130
    assert f"no windows had finished, so nothing is saved under {out}" in capsys.readouterr().err
    assert not (out / ".work").exists()  # not even the run's stamp, which `report` would take for an unfinished run


def _byte_level_bpe(folder):
    """A real byte-level BPE tokenizer (GPT-2 / RoBERTa style) trained offline on a few sentences by `tokenizers`."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizer

    text = ["A man’s “guitar” – here, «café» plays!", "It’s “über” — 12 (ok)…", "the cat’s “hat” – ça va"] * 20
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(text, vocab_size=400, min_frequency=2,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    folder.mkdir()
    bpe.save_model(str(folder))
    merges = [tuple(line.split()) for line in (folder / "merges.txt").read_text().splitlines()[1:] if line]
    return RobertaTokenizer(vocab=bpe.get_vocab(), merges=merges)


def test_tokens_are_classified_by_their_text_on_every_tokenizer_family(tiny_bert, tmp_path):
    # From helper 91's review (NIT 7): a byte-level BPE token is the byte-mapped string (’ is âĢĻ), so non-ASCII
    # punctuation counted as other and a user regex saw the byte-mapped string; SentencePiece's lone ▁ was other.
    from transformers import AutoTokenizer

    from patterncnn.experiments.special_tokens import token_text

    tok = _byte_level_bpe(tmp_path / "bpe")
    toks = tok.convert_ids_to_tokens(tok("A man’s “guitar” – here, «café».", "It’s (ok)…")["input_ids"])
    assert "âĢĻ" in toks or "âĢĻs" in toks  # the byte-mapped ’, as RoBERTa's tokenizer writes it
    classes = TokenClasses.for_tokenizer(tok, {"accented": ".*é.*"})
    names = dict(zip(toks, (classes.names[i] for i in classes.assign(toks))))
    text = token_text(tok)
    for mark in ("’", "“", "”", "–", "«", "»", ")…", ",", ".", "("):  # ĠâĢľ is “ after a space, and so on
        found = [t for t in toks if text(t) == mark]
        assert found and all(names[t] == "punctuation" for t in found), (mark, found, names)
    assert [names[t] for t in toks if "é" in text(t)] == ["accented"]  # the regex sees é, not Ã©
    assert names["<s>"] == "cls" and names["</s>"] == "sep"
    # WordPiece and SentencePiece tokens read as their text too: ##ing as ing, ▁the as the, a lone ▁ as nothing
    wordpiece = AutoTokenizer.from_pretrained(str(tiny_bert))  # character-level: "ab" is a, ##b
    assert wordpiece.tokenize("ab") == ["a", "##b"] and token_text(wordpiece)("##b") == "b"
    assert token_text(wordpiece)("##") == "##" and token_text(wordpiece)("[CLS]") == "[CLS]"
    sentencepiece = type("S", (), {"cls_token": "<s>", "sep_token": "</s>",
                                   "convert_tokens_to_string": staticmethod(lambda t: "".join(t).replace("▁", " "))})()
    classes = TokenClasses.for_tokenizer(sentencepiece, {"digits": r"\d+"})
    toks = ["<s>", "▁the", "▁", "),", "▁", "12", "▁", "alpha", "bet", "▁##", "▁", "</s>"]
    assert [classes.names[i] for i in classes.assign(toks)] == [
        "cls", "other", "punctuation", "punctuation", "digits", "digits", "other", "other", "other", "punctuation",
        "other", "sep"]  # a lone ▁ starts the next piece's word: its class (before </s>, a trailing space: other)


def test_shares_have_their_spread_over_examples_and_the_cls_row_figure_its_number(tiny_bert, glue_dir, tmp_path):
    # From helper 91's review (NIT 9): special_tokens.json had means only, and cls-row.png no number of examples.
    from patterncnn.core.glue import load_split
    from patterncnn.core.plots import cls_row_plot
    from patterncnn.encoders.load import load_encoder
    from patterncnn.experiments import special_tokens as module

    enc = load_encoder(str(tiny_bert), 32)
    split = load_split("rte", "dev", glue_dir, limit=7)
    classes = TokenClasses.for_tokenizer(enc.tokenizer)
    module.WINDOW, window = 4, module.WINDOW  # two windows: the sums of squares add up across them
    try:
        res = module.run_special_tokens(enc, [split], classes, tmp_path / "sp")["tasks"]["rte"]
    finally:
        module.WINDOW = window
    per_example, rows = [], []  # by hand, one example at a time
    for ea in enc.iter_attentions(split.examples, batch_size=1):
        ids = classes.assign(ea.tokens)
        per_example.append(class_shares(ea.maps, ids, len(classes.names)))
        rows.append(cls_row(ea.maps, ids, len(classes.names)))
    per_example, rows = np.array(per_example), np.array(rows)  # (N, C, L, H), (N, H, C)
    assert res["examples"] == 7
    for i, k in enumerate(classes.names):
        assert np.allclose(res["share"][k], per_example[:, i].mean(0), atol=1e-5)  # the means, as before
        assert np.allclose(res["share_std"][k], per_example[:, i].std(0), atol=1e-5)
        assert np.allclose(res["cls_row_std"][k], rows[:, :, i].std(0), atol=1e-5)
    assert np.array(res["share_std"]["punctuation"]).min() > 1e-3  # a real spread, not zeros (T is 32 throughout)
    fig = cls_row_plot(json.loads((tmp_path / "sp" / "special_tokens.json").read_text()))
    assert fig.axes[0].get_title().startswith("rte (7 ex.): [CLS] row")


def test_an_unfinished_run_that_classified_raw_token_strings_is_not_resumed(tiny_bert, glue_dir, tmp_path, capsys,
                                                                            monkeypatch):
    # Windows saved before tokens were read as text (and without the sums of squares) must not join a run of today's
    # way; the refusal must not blame --token-class, which did not change.
    from patterncnn.cli import main
    from patterncnn.core.work import run_key
    from patterncnn.experiments import special_tokens as module

    monkeypatch.setattr(module, "WINDOW", 4)
    out = tmp_path / "sp"
    with pytest.raises(KeyboardInterrupt):
        module.special_tokens(str(tiny_bert), ["rte"], 6, glue_dir, out, max_length=32, progress=Interrupt(after=4))
    stamp_file = out / ".work" / "rte" / "run.json"
    stamp = json.loads(stamp_file.read_text())
    del stamp["params"]["tokens"]  # as a run from before 2026-11-29 stamped it
    stamp["key"] = run_key(stamp["params"])
    stamp_file.write_text(json.dumps(stamp))
    assert main(["special-tokens", "--model", str(tiny_bert), "--task", "rte", "--glue-dir", str(glue_dir), "--limit",
                 "6", "--max-length", "32", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "what else it records (another patterncnn version?)" in err and "--token-class" not in err, err
