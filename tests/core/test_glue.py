"""GLUE parsing: the full real files (../shared/glue, when present), their excerpts in tests/fixtures/glue, and
QQP/MNLI parser fixtures in their real format."""

from collections import Counter

import pytest
from repo import FIXTURES  # noqa: E402

from patterncnn.core.glue import TASKS, GlueDataError, dev_splits, get_task, load_split

FIXTURE_GLUE = FIXTURES / "glue"


@pytest.mark.parametrize("task,split,rows", [
    ("cola", "dev", 1043), ("sst2", "dev", 872), ("mrpc", "dev", 408), ("stsb", "dev", 1500),
    ("qnli", "dev", 5463), ("rte", "dev", 277), ("wnli", "dev", 71), ("cola", "train", 8551),
    ("mrpc", "train", 3668), ("stsb", "train", 5749), ("rte", "train", 2490), ("wnli", "train", 635),
    ("sst2", "train", 67349),
])
def test_real_files_parse_every_row(shared_glue, task, split, rows):
    s = load_split(task, split, shared_glue)
    assert s.total == rows == len(s.examples)
    assert s.skipped == 0
    assert [e.index for e in s.examples] == list(range(rows))
    assert all(len(e.texts) == (2 if s.task.is_pair else 1) and all(e.texts) for e in s.examples)


def test_label_counts_match_sources(shared_glue):
    # Counts from shared/glue/SOURCES.md: a wrong column or label map would change them.
    assert Counter(e.label for e in load_split("mrpc", "dev", shared_glue).examples) == {1: 279, 0: 129}
    assert Counter(e.label for e in load_split("cola", "dev", shared_glue).examples) == {1: 721, 0: 322}
    assert Counter(e.label for e in load_split("rte", "dev", shared_glue).examples) == {0: 146, 1: 131}
    assert Counter(e.label for e in load_split("qnli", "dev", shared_glue).examples) == {0: 2702, 1: 2761}
    scores = [e.label for e in load_split("stsb", "dev", shared_glue).examples]
    assert min(scores) == 0.0 and max(scores) == 5.0 and scores[0] == 5.0


def test_excerpts_are_the_first_rows_of_the_full_files(shared_glue, glue_dir):
    excerpts = sorted(p.relative_to(glue_dir) for p in glue_dir.glob("*/*.tsv") if p.parts[-2] not in ("QQP", "MNLI"))
    assert len(excerpts) == 13
    for rel in excerpts:
        part, full = (glue_dir / rel).read_bytes(), (shared_glue / rel).read_bytes()
        assert full.startswith(part) and part.endswith(b"\n"), rel


def test_mrpc_bom_header_and_cola_headerless(glue_dir):
    mrpc = load_split("mrpc", "dev", glue_dir).examples[0]
    assert mrpc.texts[0].startswith("He said the foodservice pie business")
    assert mrpc.texts[1].startswith('"The foodservice pie business')  # quoting off: the quote is text
    assert mrpc.label == 1
    cola = load_split("cola", "dev", glue_dir).examples[0]
    assert cola.texts == ("The sailors rode the breeze clear of the rocks.",) and cola.label == 1


def test_qnli_keeps_leading_quotes(shared_glue):
    ex = load_split("qnli", "dev", shared_glue).examples[694]
    assert any(t.startswith('"') for t in ex.texts)


def test_qqp_fixture_skips_and_counts_malformed_rows():
    s = load_split("qqp", "dev", FIXTURE_GLUE)
    assert s.skipped == 2  # one 4-column row, one 7-column row
    assert len(s.examples) == 4 and s.total == 4
    assert s.examples[2].texts == ("Is there a reason why we should travel alone?",
                                   "What are some reasons to travel alone?")
    assert [e.label for e in s.examples] == [0, 0, 1, 1]
    assert s.examples[3].texts[0] == '"How do I lose weight?'


def test_mnli_matched_and_mismatched_fixtures():
    m = load_split("MNLI", "dev", FIXTURE_GLUE)
    mm = load_split("mnli-mm", "dev", FIXTURE_GLUE)
    assert m.source.endswith("dev_matched.tsv") and mm.source.endswith("dev_mismatched.tsv")
    assert [e.label for e in m.examples] == [1, 2]  # neutral, contradiction (gold_label, not label1)
    assert [e.label for e in mm.examples] == [2, 2, 0]
    assert m.examples[0].texts == ("The new rights are nice enough", "Everyone really likes the newest benefits ")


@pytest.mark.parametrize("spelling,name", [
    ("SST-2", "sst2"), ("sst2", "sst2"), ("STS-B", "stsb"), ("stsb", "stsb"), ("CoLA", "cola"),
    ("MNLI-mm", "mnli-mm"), ("mnli_matched", "mnli"), ("QQP", "qqp"), (" rte ", "rte"),
])
def test_task_spellings(spelling, name):
    assert get_task(spelling).name == name


def test_unknown_task_lists_valid_names():
    with pytest.raises(GlueDataError) as e:
        get_task("sst3")
    for name in TASKS:
        assert name in str(e.value)


def test_sampling_is_deterministic_and_keeps_file_order(glue_dir):
    a = [e.index for e in load_split("sst2", "dev", glue_dir, limit=20, seed=7).examples]
    b = [e.index for e in load_split("sst2", "dev", glue_dir, limit=20, seed=7).examples]
    c = [e.index for e in load_split("sst2", "dev", glue_dir, limit=20, seed=8).examples]
    assert a == b and a != c
    assert len(set(a)) == 20 and a == sorted(a)
    assert len(load_split("rte", "dev", glue_dir, limit=1000).examples) == 160  # limit above size: all


def test_bad_inputs_name_the_fix(glue_dir, tmp_path):
    with pytest.raises(GlueDataError, match="--limit must be at least 1"):
        load_split("rte", "dev", glue_dir, limit=0)
    with pytest.raises(GlueDataError, match="does not exist.*--glue-dir"):
        load_split("rte", "dev", tmp_path / "nowhere")
    with pytest.raises(GlueDataError, match="has no QNLI/train.tsv"):
        load_split("qnli", "train", glue_dir)
    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "dev.tsv").write_text("")
    with pytest.raises(GlueDataError, match="empty"):
        load_split("rte", "dev", tmp_path)
    (tmp_path / "RTE" / "dev.tsv").write_text("a\tb\n1\t2\n")
    with pytest.raises(GlueDataError, match="header lacks"):
        load_split("rte", "dev", tmp_path)
    with pytest.raises(GlueDataError, match="unknown split"):
        load_split("rte", "test", glue_dir)
    (tmp_path / "MRPC" / "dev.tsv").mkdir(parents=True)
    with pytest.raises(GlueDataError, match=r"MRPC/dev\.tsv is not a regular file \(it is a folder\); put GLUE's "
                                            r"MRPC dev\.tsv there"):
        load_split("mrpc", "dev", tmp_path)
    parent = tmp_path / "data"  # the parent of a glue_data folder: the error names the folder to pass
    (parent / "glue" / "RTE").mkdir(parents=True)
    (parent / "glue" / "RTE" / "dev.tsv").write_text("a\tb\n1\t2\n")
    (parent / "other").mkdir()
    with pytest.raises(GlueDataError, match=f"pass --glue-dir {parent / 'glue'} \\(the folder that holds RTE/\\)"):
        load_split("rte", "dev", parent)
    # the task's own folder: the error names its parent, or says to name the folder after the task
    with pytest.raises(GlueDataError, match=f"pass --glue-dir {parent / 'glue'} \\(the folder that holds RTE/\\)"):
        load_split("rte", "dev", parent / "glue" / "RTE")
    (parent / "rte-copy").mkdir()
    (parent / "rte-copy" / "dev.tsv").write_text("a\tb\n1\t2\n")
    with pytest.raises(GlueDataError, match="name it RTE and pass --glue-dir with its parent"):
        load_split("rte", "dev", parent / "rte-copy")


def test_no_folder_and_no_hub_says_how_to_get_data():
    # conftest sets HF_DATASETS_OFFLINE=1: `datasets` cannot fetch, and must not fall back to anything.
    with pytest.raises(GlueDataError, match="pass --glue-dir"):
        load_split("sst2", "dev", None)


def test_a_score_that_is_not_a_number_is_a_skipped_row(glue_dir, tmp_path):
    # Found by the CLI fuzz: STS-B's float(score) raised ValueError on a damaged row instead of skipping it.
    rows = (glue_dir / "STS-B" / "dev.tsv").read_text(encoding="utf-8").splitlines()
    header, body = rows[0], rows[1:6]
    cells = body[0].split("\t")
    bad = ["\t".join(cells[:-1] + [score]) for score in ("abc", "nan", "inf", "")]
    (tmp_path / "STS-B").mkdir()
    (tmp_path / "STS-B" / "dev.tsv").write_text("\n".join([header, *body, *bad]) + "\n", encoding="utf-8")
    split = load_split("stsb", "dev", tmp_path)
    assert len(split.examples) == 5 and split.skipped == 4


def test_all_on_a_folder_of_some_tasks_names_what_all_covers_and_the_tasks_it_has(glue_dir, tmp_path):
    """`--task all` on a GLUE folder without QQP and MNLI (the copy the README points at) is refused before any
    file is read, naming the missing files and the tasks to give; a folder of every task loads them all."""
    from patterncnn.core.glue import dev_splits

    some = tmp_path / "glue"
    for task in ("SST-2", "RTE"):
        (some / task).mkdir(parents=True)
        (some / task / "dev.tsv").write_bytes((glue_dir / task / "dev.tsv").read_bytes())
    with pytest.raises(GlueDataError, match=r"--task all covers cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, "
                                            r"and the GLUE folder .* has no CoLA/dev.tsv, MRPC/dev.tsv, STS-B/dev.tsv, "
                                            r"QQP/dev.tsv, MNLI/dev_matched.tsv, QNLI/dev.tsv, WNLI/dev.tsv: give the "
                                            r"tasks it has \(--task: sst2, rte\)"):
        dev_splits(["all"], some, limit=3)
    assert [s.task.name for s in dev_splits(["ALL"], glue_dir, limit=3)] == [
        "cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(GlueDataError, match="not found: the GLUE folder"):  # no task at all: load_split's message
        dev_splits("all", tmp_path / "empty", limit=3)


def test_glue_dir_set_in_the_environment_is_read_by_the_python_api_too(glue_dir, tmp_path, monkeypatch):
    """Only the commands read GLUE_DIR; a notebook's dev_splits() ignored it and then said to set it (helper 102's
    review). Now one loader reads it for both; a folder given still wins over it."""
    monkeypatch.setenv("GLUE_DIR", str(glue_dir))
    (split,) = dev_splits("rte", limit=5)
    assert split.source == str(glue_dir / "RTE" / "dev.tsv") and len(split.examples) == 5
    assert load_split("rte").total == split.total
    monkeypatch.setenv("GLUE_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(GlueDataError, match="nowhere does not exist"):
        dev_splits("rte")
    assert load_split("rte", glue_dir=glue_dir).total == split.total  # given: GLUE_DIR not read


def test_a_row_with_an_empty_text_is_skipped_and_counted(tmp_path):
    """An empty sentence was read as an input of [CLS] [SEP], whose maps were counted in the shares without a word
    (helper 104's review)."""
    (tmp_path / "RTE").mkdir()
    rows = ["index\tsentence1\tsentence2\tlabel", "0\tA cat sat.\tA cat is sitting.\tentailment",
            "1\t\t\tentailment", "2\t \tSomething.\tnot_entailment", "3\tIt rains.\tIt is dry.\tnot_entailment"]
    (tmp_path / "RTE" / "dev.tsv").write_text("\n".join(rows) + "\n")
    split = load_split("rte", "dev", tmp_path)
    assert [e.texts[0] for e in split.examples] == ["A cat sat.", "It rains."] and split.skipped == 2
    assert [e.index for e in split.examples] == [0, 1]


def test_a_missing_mnli_file_names_the_task_that_reads_the_one_there(tmp_path):
    (tmp_path / "MNLI").mkdir()
    (tmp_path / "MNLI" / "dev_mismatched.tsv").write_text("x\n")
    with pytest.raises(GlueDataError, match=r"has no MNLI/dev_matched.tsv \(it has MNLI/dev_mismatched.tsv, which "
                                            r"--task mnli-mm reads\)"):
        load_split("mnli", "dev", tmp_path)
