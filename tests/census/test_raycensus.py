"""The census on a local Ray instance (2 CPUs, 2 workers) against the local census: equal, after a killed worker,
and after an interruption."""

import logging
import os
import signal

import psutil
import pytest
import ray

from patterncnn.census.ray import run_ray_censuses
from patterncnn.census.run import run_census
from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.core.fileio import OutputError
from patterncnn.core.glue import load_split
from patterncnn.encoders.load import load_encoder

pytestmark = pytest.mark.slow  # each test starts Ray workers
SEED = 2


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING,
             runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}})
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def local(tiny_bert, tiny_classifier, glue_dir, tmp_path_factory):
    """The local census of two tasks (RTE: 3 windows; SST-2: its 64 excerpt rows, 1 window); Ray must equal it."""
    splits = [load_split(task, "dev", glue_dir, limit=150, seed=SEED) for task in ("rte", "sst2")]
    clf = OnnxClassifier(tiny_classifier[1], threads=1)
    enc = load_encoder(str(tiny_bert), max_length=48, threads=1)
    out = tmp_path_factory.mktemp("local")
    return splits, clf, run_census(enc, clf, splits, out, limit=150, seed=SEED), out


def on_ray(tiny_bert, local, out, progress=None):
    splits, clf, _, _ = local
    runs = run_ray_censuses([str(tiny_bert)], splits, clf, out, limit=150, seed=SEED, max_length=48, workers=2,
                            threads=1, progress=progress)
    return [result for _, _, result in runs][0]


def assert_identical(a, b):
    assert a["tasks"].keys() == b["tasks"].keys() == {"rte", "sst2"}
    for task in a["tasks"]:
        x, y = a["tasks"][task], b["tasks"][task]
        assert x["counts"] == y["counts"] and x["heads"] == y["heads"]
        assert x["shares"] == y["shares"] and x["ci95"] == y["ci95"] and x["ci95_parts"] == y["ci95_parts"]
        assert x["mean_probability"] == y["mean_probability"]


def test_ray_census_equals_local(cluster, tiny_bert, local, tmp_path):
    result = on_ray(tiny_bert, local, tmp_path / "ray")
    assert_identical(local[2], result)
    for f in ("census.csv", "heads.csv"):
        assert (tmp_path / "ray" / f).read_text() == (local[3] / f).read_text()
    assert not (tmp_path / "ray" / ".work").exists()


class Bar:
    """A progress bar that acts after the first finished window: kills a worker process, or interrupts."""

    def __init__(self, action):
        self.action, self.updates = action, 0

    def __call__(self, **kw):
        return self

    def update(self, n=1):
        self.updates += 1
        if self.updates == 1:
            self.action()

    def close(self):
        pass


def kill_a_worker():
    workers = [p for p in psutil.process_iter(["cmdline"]) if "ray::Worker" in " ".join(p.info["cmdline"] or [])]
    assert workers, "no Ray worker process found"
    os.kill(workers[0].pid, signal.SIGKILL)


def test_killed_worker_still_gives_the_identical_result(cluster, tiny_bert, local, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="patterncnn.census.ray"):
        result = on_ray(tiny_bert, local, tmp_path / "ray", Bar(kill_a_worker))
    assert "a Ray worker died" in caplog.text
    assert_identical(local[2], result)


def test_interrupted_ray_census_resumes(cluster, tiny_bert, local, tmp_path):
    def interrupt():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        on_ray(tiny_bert, local, tmp_path / "ray", Bar(interrupt))
    saved = sorted((tmp_path / "ray" / ".work").glob("*/window-*.npz"))
    assert 1 <= len(saved) < 4  # interrupted after the first of four windows landed
    bar = Bar(lambda: None)
    assert_identical(local[2], on_ray(tiny_bert, local, tmp_path / "ray", bar))
    assert bar.updates == 4 - len(saved)  # only the missing windows ran


def test_a_ray_census_of_two_encoders_stopped_after_the_first_resumes_past_it(cluster, tiny_bert, tiny_mpnet, local,
                                                                              tmp_path, caplog):
    # As run_censuses: the first encoder's census.json made the same command refuse (--overwrite) on Ray too.
    splits, clf, _, _ = local
    models, out = [str(tiny_bert), str(tiny_mpnet)], tmp_path / "two"

    def run(progress=None, finished=None):
        return run_ray_censuses(models, splits, clf, out, limit=150, seed=SEED, max_length=48, workers=2, threads=1,
                                progress=progress, finished=finished)

    written = []
    runs = run(finished=written)
    _, first, result = next(runs)
    runs.close()  # stopped after the first census was written, before the second's
    assert written == [f"the finished census of {tiny_bert} in {first}"]  # what an interruption now would name
    before = (first / "census.json").read_bytes()
    assert list(out.glob("*/census.json")) == [first / "census.json"]
    bar = Bar(lambda: None)
    with caplog.at_level(logging.WARNING):
        again = list(run(bar))
    assert "kept the finished census" in caplog.text and (first / "census.json").read_bytes() == before
    assert again[0][1] == first and again[0][2]["tasks"] == result["tasks"]
    assert bar.updates == 0 and (again[1][1] / "census.json").is_file()  # the second's windows were all on disk
    # Interrupted while the second's windows run (again, from nothing): the kept first census is already in the list
    # the command's interrupt message names (cli.main); Ray yields it only after all windows.
    (again[1][1] / "census.json").unlink()

    def interrupt():
        raise KeyboardInterrupt

    finished = []
    with pytest.raises(KeyboardInterrupt):
        list(run(Bar(interrupt), finished))
    assert finished == [f"the finished census of {tiny_bert} in {first}"]
    # other arguments are not taken for the finished census: refused, as before
    with pytest.raises(OutputError, match="already holds census.json"):
        list(run_ray_censuses(models, splits, clf, out, limit=100, seed=SEED, max_length=48, workers=2, threads=1))


def test_two_encoders_whose_default_estimators_differ_are_both_counted_on_ray(cluster, tiny_bert, glue_dir,
                                                                               tmp_path):
    # The shipped classifier's default for MiniLM is adjusted; for a tiny random BERT, count: both count, as locally.
    from repo import REPO

    from patterncnn.shares.estimate import default_estimator

    clf = OnnxClassifier(REPO / "models" / "patterncnn.onnx", threads=1)
    split = [load_split("rte", "dev", glue_dir, limit=3, seed=0)]
    runs = list(run_ray_censuses(["minilm", str(tiny_bert)], split, clf, tmp_path / "two", limit=3, seed=0,
                                 workers=2, threads=1))
    tags = [enc.tag for enc, _, _ in runs]
    assert [default_estimator(clf.metadata, t) for t in tags] == ["adjusted", "count"]
    assert [r["estimator"]["name"] for _, _, r in runs] == ["count", "count"]
    assert {r["estimator"]["chosen_by"] for _, _, r in runs} == {
        f"the compared encoders' defaults differ ({tags[0]} adjusted, {tags[1]} count): count for both"}


def test_census_cli_on_ray(cluster, tiny_bert, tiny_classifier, glue_dir, local, tmp_path, capsys):
    from patterncnn.cli import main

    args = ["census", "--task", "rte", "--task", "sst2", "--model", str(tiny_bert), "--limit", "150", "--seed",
            str(SEED), "--max-length", "48", "--glue-dir", str(glue_dir), "--classifier", str(tiny_classifier[1]),
            "--backend", "torch", "--threads", "1"]
    assert main(args + ["--ray", "auto", "--workers", "2", "--out", str(tmp_path / "a")]) == 0
    assert "backend torch" in capsys.readouterr().out
    for f in ("census.csv", "heads.csv"):
        assert (tmp_path / "a" / f).read_text() == (local[3] / f).read_text()
    assert main(args + ["--ray", "auto", "--save-maps", "--out", str(tmp_path / "b")]) == 2
    assert "--save-maps, --precision and --device are for the local census, not --ray" in capsys.readouterr().err


def test_a_ray_address_nothing_answers_at_is_refused_at_once(monkeypatch):
    """Ray retries an address nothing listens at for minutes, logging as it goes; --ray HOST:PORT is refused first,
    in one line naming the fix, and Ray is never asked to join it."""
    import socket
    import time

    from patterncnn.census import ray as ray_census
    from patterncnn.core.errors import PatternCNNError

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda *a, **kw: pytest.fail("ray.init was called"))
    t0 = time.monotonic()
    with pytest.raises(PatternCNNError, match=rf"nothing answers at the Ray address '127.0.0.1:{port}'.*ray start --head"):
        ray_census.connect(f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 5


def test_workers_load_a_relative_folder_by_its_absolute_path_and_refuse_another_encoder(tiny_bert, tiny_classifier,
                                                                                        glue_dir, tmp_path,
                                                                                        monkeypatch):
    # Helper 100's review: each worker loaded --model by the name as typed, a relative folder from where `ray start`
    # ran, and its maps were filed under the driver's encoder: another folder's maps under this one's name.
    import tempfile

    from patterncnn.census.ray import Worker, identity, worker_model
    from patterncnn.core.errors import PatternCNNError

    monkeypatch.chdir(tiny_bert.parent)
    assert worker_model(tiny_bert.name) == str(tiny_bert.resolve()) and worker_model("minilm") == "minilm"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the worker writes its copy of the classifier
    worker = Worker(tiny_classifier[1].read_bytes(), 48, "torch", 1)
    assert list(tmp_path.iterdir()) == []  # read, then removed: one copy per actor stayed in /tmp
    examples = load_split("rte", "dev", glue_dir, limit=3, seed=SEED).examples
    enc = load_encoder(str(tiny_bert), max_length=48)
    own = identity(enc.fingerprint)
    assert own["sha256"] and own["tokenizer"]
    arrays = worker.window(worker_model(tiny_bert.name), examples, 16, own)
    assert arrays["labels"].shape == (3, enc.num_layers * enc.num_heads)
    fresh = Worker(tiny_classifier[1].read_bytes(), 48, "torch", 1)  # the encoder is loaded and checked on first use
    with pytest.raises(PatternCNNError, match=r"loads another encoder as .* than the driver does \(its sha256 differ"):
        fresh.window(str(tiny_bert), examples, 16, {**own, "sha256": "0" * 64})


def test_a_worker_that_cannot_load_the_encoder_is_said_in_one_line(cluster, tiny_classifier, glue_dir, tmp_path):
    from patterncnn.census.ray import Unit, Worker, run_units
    from patterncnn.core.errors import PatternCNNError

    actor = ray.remote(num_cpus=1, max_restarts=0)(Worker)
    examples = load_split("rte", "dev", glue_dir, limit=3, seed=SEED).examples
    unit = Unit(str(tmp_path / "no-such-model"), examples, tmp_path / "window-00000.npz")
    with pytest.raises(PatternCNNError) as e:
        run_units(ray, [unit], lambda: actor.remote(tiny_classifier[1].read_bytes(), 48, "torch", 1), 1, 16)
    message = str(e.value)
    assert "\n" not in message and message.startswith("a Ray worker on ") and "cannot load" in message, message
    assert not unit.path.exists()


def test_a_window_of_a_gpu_ray_census_the_cpu_driver_must_compute_is_refused_naming_the_rerun(tiny_bert,
                                                                                              tiny_classifier,
                                                                                              glue_dir, tmp_path):
    """A Ray census on GPUs keys its windows as CUDA's and the driver reads them back; a window missing or damaged
    by then would be computed by the driver, whose model is on its CPU (no GPU here, as on many head nodes): said,
    naming the rerun that computes it on the cluster, instead of torch's device error."""
    from patterncnn.census.results import CensusError

    enc = load_encoder(str(tiny_bert), max_length=48, threads=1)
    enc.device = "cuda"  # as run_ray_censuses marks the driver's encoder when the workers have GPUs
    split = load_split("rte", "dev", glue_dir, limit=20, seed=SEED)
    with pytest.raises(CensusError, match=r"rte: window 1 of 1 must be computed again, on cuda as its other windows "
                                          r"were.*run the same command again \(with --ray\)"):
        run_census(enc, OnnxClassifier(tiny_classifier[1], threads=1), [split], tmp_path / "out", limit=20, seed=SEED)
