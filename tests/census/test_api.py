"""patterncnn.census(...): the callable subpackage (before and after `import patterncnn.census.run`, in fresh
interpreters), and the CensusResult it returns: the shares DataFrame with intervals, the heads, plot, JSON, HTML."""

import json
import subprocess
import sys

import pytest

import patterncnn
from patterncnn.census import CensusResult, census
from patterncnn.core.fileio import OutputError
from patterncnn.core.labels import LABELS

CALL = ("res = patterncnn.census({model!r}, tasks=['rte'], limit=12, glue_dir={glue!r}, out={out!r}, "
        "classifier={clf!r}, seed=2, device='cpu')\n"
        "print(json.dumps({{'type': type(res).__name__, 'examples': res.data['tasks']['rte']['examples'], "
        "'module': type(patterncnn.census).__name__, 'counts': res.data['tasks']['rte']['counts']}}))")


@pytest.mark.parametrize("first", ["import patterncnn", "import patterncnn.census.run\nimport patterncnn",
                                   "import patterncnn\nfrom patterncnn.census.thumbnails import Keeper"])
def test_the_census_subpackage_is_callable_whatever_was_imported_first(first, tiny_bert, tiny_classifier, glue_dir,
                                                                         tmp_path):
    code = f"import json\n{first}\n" + CALL.format(model=str(tiny_bert), glue=str(glue_dir), out=str(tmp_path / "c"),
                                                    clf=str(tiny_classifier[1]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["type"] == "CensusResult" and out["examples"] == 12 and out["module"] == "_CallableModule"
    assert sum(out["counts"].values()) == 12 * 3 * 4


@pytest.fixture(scope="module")
def result(tiny_bert, tiny_classifier, glue_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("api") / "census"
    return census(str(tiny_bert), tasks=["RTE", "sst-2"], limit=20, glue_dir=glue_dir, out=out,
                  classifier=tiny_classifier[1], max_length=48, seed=1)


def test_the_result_holds_what_census_json_holds(result):
    on_disk = json.loads((result.out / "census.json").read_text())
    assert result.data == on_disk and json.loads(result.to_json()) == on_disk
    assert result.tasks == ["rte", "sst2"]
    assert CensusResult.load(result.out).data == on_disk == CensusResult.load(result.out / "census.json").data
    assert "rte (20 ex.)" in repr(result)


def test_table_is_what_the_command_prints(result, tiny_bert, tiny_classifier, glue_dir, tmp_path, capsys):
    from patterncnn.cli import main

    lines = result.table().splitlines()
    tag = result.data["encoder_tag"]
    assert lines[0] == f"{tiny_bert.name} ({tag}, backend onnx): share of (example, layer, head) maps"
    assert lines[1].startswith("estimator ") and lines[-1].startswith("sst2 ")
    assert main(["census", "--model", str(tiny_bert), "--task", "RTE", "--task", "sst-2", "--limit", "20",
                 "--glue-dir", str(glue_dir), "--out", str(tmp_path / "cli"), "--classifier", str(tiny_classifier[1]),
                 "--max-length", "48", "--seed", "1"]) == 0
    printed = capsys.readouterr().out  # the same lines, the encoder named as the command was given it
    assert f"\n{tiny_bert} ({tag}, backend onnx): share of " in printed
    assert "\n" + "\n".join(lines[1:]) + "\n" in printed


def test_shares_is_a_dataframe_with_the_intervals_and_their_parts(result):
    df = result.shares
    assert df.index.names == ["task", "pattern"] and len(df) == 2 * len(LABELS)
    s = result.data["tasks"]["rte"]
    row = df.loc[("rte", "vertical")]
    assert row["share"] == s["shares"]["vertical"] and [row["low"], row["high"]] == s["ci95"]["vertical"]
    assert [row["examples_low"], row["examples_high"]] == s["ci95_parts"]["examples"]["vertical"]
    assert row["count"] == s["counts"]["vertical"] and row["examples"] == 20
    assert df.loc["sst2"]["share"].sum() == pytest.approx(1.0)
    assert (df["low"] <= df["share"]).all() and (df["share"] <= df["high"]).all()


def test_heads_plot_examples_and_html(result):
    heads = result.heads
    assert heads.index.names == ["task", "layer", "head"] and len(heads) == 2 * 3 * 4
    assert heads.loc[("rte", 1, 2)]["majority"] == result.data["tasks"]["rte"]["heads"][1][2]["majority"]
    fig = result.plot()
    assert fig.axes and fig.axes[0].get_ylabel().startswith("share")
    assert len(result.plot("heads").axes) >= 2
    with pytest.raises(ValueError, match="shares"):
        result.plot("pie")
    ex = result.examples(0, 1)
    assert ex and all(e["layer"] == 0 and e["head"] == 1 and e["label"] in LABELS for e in ex)
    assert {e["task"] for e in result.examples(task="sst2")} == {"sst2"}
    html = result._repr_html_()
    assert "data:image/png;base64," in html and "<table class=\"shares\">" in html and "classifier" in html
    assert str(result.data["tasks"]["rte"]["examples"]) in html


def test_truncated_inputs_are_warned_of_as_the_command_notes_them(tiny_bert, tiny_classifier, glue_dir, tmp_path):
    # Found by walkthrough 7: the command prints "note: N input(s) longer than --max-length M were truncated"; the
    # API said nothing.
    from patterncnn.census import TruncationWarning

    with pytest.warns(TruncationWarning, match=r"input\(s\) longer than max_length 16 were truncated") as caught:
        res = census(str(tiny_bert), tasks="rte", limit=5, glue_dir=glue_dir, classifier=tiny_classifier[1],
                     max_length=16, out=tmp_path / "short")
    n = res.data["tasks"]["rte"]["truncated"]
    assert n > 0 and [str(w.message).split(" input")[0] for w in caught] == [str(n)]  # one warning, the count
    assert caught[0].filename == __file__  # at the caller's line, not a patterncnn wrapper's (helper 102's review)
    with pytest.warns(TruncationWarning) as caught:  # through the callable subpackage too
        patterncnn.census(str(tiny_bert), tasks="rte", limit=5, glue_dir=glue_dir, classifier=tiny_classifier[1],
                          max_length=16, out=tmp_path / "short2")
    assert caught[0].filename == __file__


def test_default_out_is_a_fresh_folder_and_a_finished_one_is_kept(tiny_bert, tiny_classifier, glue_dir, result,
                                                                   tmp_path):
    fresh = census(str(tiny_bert), tasks="rte", limit=5, glue_dir=glue_dir, classifier=tiny_classifier[1],
                   max_length=48)
    assert fresh.out.is_dir() and (fresh.out / "census.json").is_file() and fresh.out != result.out
    with pytest.raises(OutputError, match="already holds census.json; pass overwrite=True to replace it, or choose "
                                          "another out$"):  # its keywords, not the command's flags
        patterncnn.census(str(tiny_bert), tasks="rte", limit=5, glue_dir=glue_dir, out=fresh.out,
                          classifier=tiny_classifier[1])
    spaced = tmp_path / "my runs" / "c"  # the value as given, spaces and all (it was cut at the space)
    spaced.mkdir(parents=True)
    (spaced / "census.json").write_text("{}")
    with pytest.raises(OutputError) as raised:
        patterncnn.census(str(tiny_bert), tasks="rte", limit=5, glue_dir=glue_dir, out=spaced,
                          classifier=tiny_classifier[1])
    assert str(raised.value).startswith(f"out={str(spaced)!r} already holds census.json; pass overwrite=True")
