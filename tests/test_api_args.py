"""The Python API's argument checks (patterncnn.core.args): a wrong type or value given to a public entry point
raises an ArgumentError (a PatternCNNError, and a ValueError, or a TypeError for a wrong type) naming the keyword,
before any work starts; and the public functions keep their signatures and docstrings."""

import inspect
import pathlib
import pydoc

import pytest

import patterncnn
from patterncnn.core.args import ArgumentError, ArgumentTypeError
from patterncnn.core.errors import PatternCNNError

CENSUS = {"model": "minilm", "tasks": ["rte"], "limit": 3, "glue_dir": "nowhere"}


@pytest.mark.parametrize("bad, error, message", [
    ({"limit": "3"}, ArgumentTypeError, "limit must be a whole number of at least 1 or None, not str"),
    ({"limit": 2.5}, ArgumentTypeError, "limit must be a whole number"),
    ({"limit": 0}, ArgumentError, r"limit must be .* \(got 0\)"),
    ({"seed": -1}, ArgumentError, "seed must be a whole number from 0 to 4294967295"),
    ({"seed": "0"}, ArgumentTypeError, "seed must be a whole number"),
    ({"model": 123}, ArgumentTypeError, "model must be a str"),
    ({"tasks": []}, ArgumentError, r"tasks is empty; pass at least one, e\.g\. tasks=\['rte'\]"),
    ({"backend": "int8"}, ArgumentError, "backend='int8' is not offered; choose one of torch, onnx, compile$"),
    ({"estimator": "median"}, ArgumentError, "estimator='median' is not offered; choose one of count, probs, adjusted"),
    ({"calibration_scope": "x"}, ArgumentError, "calibration_scope='x' is not offered"),
    ({"threads": 0}, ArgumentError, "threads must be a whole number of at least 1"),
    ({"classifier": 5}, ArgumentTypeError, "classifier must be a path"),
    ({"overwrite": "yes"}, ArgumentTypeError, "overwrite must be True or False"),
    ({"precision": "abc"}, PatternCNNError, "^precision 'abc': give share points"),
])
def test_census_refuses_wrong_arguments_up_front(bad, error, message):
    with pytest.raises(error, match=message) as raised:
        patterncnn.census(**{**CENSUS, **bad})
    assert isinstance(raised.value, (PatternCNNError, ValueError))
    assert "--" not in str(raised.value)  # the keyword, not a command-line flag


def test_the_error_classes_are_patterncnn_errors_and_builtin_ones():
    assert issubclass(ArgumentError, PatternCNNError) and issubclass(ArgumentError, ValueError)
    assert issubclass(ArgumentTypeError, ArgumentError) and issubclass(ArgumentTypeError, TypeError)


@pytest.mark.parametrize("call, error, message", [
    (lambda: patterncnn.disable("m", task=["sst2"]), ArgumentTypeError, "task must be a str, not list"),
    (lambda: patterncnn.disable("m", "rte", bootstrap=0), ArgumentError, "bootstrap must be"),
    (lambda: patterncnn.drift("a", "b", tasks=[], glue_dir="x"), ArgumentError, "tasks is empty"),
    (lambda: patterncnn.special_tokens(token_classes=["d=\\d+"]), ArgumentTypeError, "token_classes must be a dict"),
    (lambda: patterncnn.special_tokens(token_classes={"d": "("}), ArgumentError,
     r"token_classes \{'d': '\('\}: '\(' is not a valid regex"),
    (lambda: patterncnn.write_report(5), ArgumentTypeError, "run_dir must be a path"),
    (lambda: patterncnn.link(1, 2, "rte"), ArgumentTypeError, "census must be a path"),
    (lambda: patterncnn.load_classifier(threads=0), ArgumentError, "threads must be a whole number of at least 1"),
    (lambda: patterncnn.CensusResult.load(5), ArgumentTypeError, "path must be a path"),
    (lambda: patterncnn.CensusResult({"layers": 2, "heads": 4, "tasks": {"rte": {}}}).examples(2), ArgumentError,
     r"layer must be a whole number from 0 to 1 or None \(got 2\)"),
    (lambda: patterncnn.CensusResult({"layers": 2, "heads": 4, "tasks": {"rte": {}}}).examples(task="sst2"),
     ArgumentError, "task='sst2' is not offered; choose one of rte"),
    (lambda: patterncnn.CensusResult({}).plot("foo"), ArgumentError, "kind='foo' is not offered; choose one of shares"),
    (lambda: patterncnn.CensusResult({}).to_json(indent="  "), ArgumentTypeError, "indent must be a whole number"),
    (lambda: patterncnn.load_encoder(123), ArgumentTypeError, "name must be a path"),
    (lambda: patterncnn.load_encoder(max_length="64"), ArgumentTypeError, "max_length must be a whole number"),
    (lambda: patterncnn.load_encoder(max_length=3), ArgumentError, r"max_length must be .* at least 4 \(got 3\)"),
    (lambda: patterncnn.load_encoder(threads=0), ArgumentError, "threads must be a whole number of at least 1"),
    (lambda: patterncnn.load_encoder(revision=5), ArgumentTypeError, "revision must be a str or None"),
    (lambda: patterncnn.load_encoder(backend="int9"), ArgumentError, "backend='int9' is not offered; choose one of"),
    (lambda: patterncnn.census(**CENSUS, progress="yes"), ArgumentTypeError,
     "progress must be True, False, None or a tqdm-like callable"),
])
def test_the_other_entry_points_refuse_wrong_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_command_line_checks_token_classes_with_the_same_function(capsys):
    from patterncnn.cli import main

    with pytest.raises(SystemExit):
        main(["special-tokens", "--token-class", "d=("])
    assert "'(' is not a valid regex" in capsys.readouterr().err


def test_census_keeps_its_signature_and_docstring():
    import patterncnn.census.run  # noqa: F401 - binds patterncnn.census to the subpackage, as any import of it does

    assert inspect.signature(patterncnn.census) == inspect.signature(patterncnn.census.census)
    assert list(inspect.signature(patterncnn.census).parameters)[:4] == ["model", "tasks", "limit", "glue_dir"]
    page = pydoc.render_doc(patterncnn.census, renderer=pydoc.plaintext)
    head = page[:page.index("Example::")]  # the function's text opens the page, its example among the first
    assert "Pattern shares of one encoder" in head.splitlines()[3] and "glue_dir" in head
    for name in ["load_classifier", "load_encoder", "drift", "special_tokens", "disable", "link", "write_report"]:
        f = getattr(patterncnn, name)
        assert "Example::" in f.__doc__ and "args" not in str(inspect.signature(f)), name


def test_what_the_entry_points_took_before_the_checks_they_still_take():
    """numpy arrays and other iterables of task names, numpy booleans and pathlib paths worked before the checks
    and still do; a wrong type is a TypeError, an empty value a ValueError."""
    import pathlib

    import numpy as np

    from patterncnn.core import args

    assert args.texts("tasks", np.array(["rte", "sst2"])) == ["rte", "sst2"]
    assert args.texts("tasks", ("rte",)) == ["rte"] and args.texts("tasks", iter(["rte"])) == ["rte"]
    assert args.flag("overwrite", np.True_) is True
    from patterncnn.core.work import progress_bars

    assert callable(progress_bars(np.True_)) and progress_bars(np.False_) is None  # numpy booleans, as flags take
    assert args.path("out", pathlib.Path("x")) == pathlib.Path("x")
    with pytest.raises(ArgumentTypeError, match="backend must be one of torch, onnx, not int 5"):
        args.one_of("backend", 5, ["torch", "onnx"])
    with pytest.raises(ArgumentError, match="out is empty; give a path") as e:
        args.path("out", "")
    assert not isinstance(e.value, TypeError)


@pytest.mark.parametrize("message, spelled", [
    ("--out runs/x already holds census.json; pass --overwrite to replace it, or choose another --out",
     "out='runs/x' already holds census.json; pass overwrite=True to replace it, or choose another out"),
    ("(--limit 20 → 5, --seed 0 → 3); run it again", "(limit=20 → 5, seed=0 → 3); run it again"),
    ("write it elsewhere with --out FILE", "write it elsewhere with out=FILE"),
    ("pass --classifier PATH/TO/patterncnn.onnx", "pass path='PATH/TO/patterncnn.onnx'"),  # another keyword's name
    ("pass --task rte, or leave out --glue-dir", "pass tasks rte, or leave out glue_dir"),  # the plural keyword
    # found by the second review: words of the sentence after a flag were taken for its value
    ("(--limit: was 20, now 5; --model (the encoder's weights): was a, now b)",
     "(limit: was 20, now 5; model (the encoder's weights): was a, now b)"),
    ("give this census another --out (--overwrite never drops another command's work)",
     "give this census another out (overwrite=True never drops another command's work)"),
    ("check that --glue-dir points at a glue_data folder", "check that glue_dir points at a glue_data folder"),
    ("--out 2024-01-05 exists", "out 2024-01-05 exists"),  # not a number: left as it is written
    ("run `patterncnn finetune --task T --out models-ft/N` and pass --model models-ft/N",  # a command stays one
     "run `patterncnn finetune --task T --out models-ft/N` and pass model='models-ft/N'"),
    ("--backend int8 is not offered", "--backend int8 is not offered"),  # a flag it has no keyword for
    ("pass --no-layers to skip them", "pass layers=False to skip them"),  # a flag that turns a keyword off
    ("pass --no-model", "pass --no-model"),  # not a keyword that is on by default: left as it is
])
def test_keyword_spelling_names_the_keyword_a_flag_stands_for(message, spelled):
    from patterncnn.core.args import keyword_spelling

    params = ["model", "tasks", "limit", "seed", "glue_dir", "out", "overwrite", "path", "layers"]
    assert keyword_spelling(message, params, {"classifier": "path"}, ["overwrite"], negatable=["layers"]) == spelled


@pytest.mark.parametrize("message, values, spelled", [
    # found by the second review of stop 52: a path with a space was cut, and a value in capitals read as a placeholder
    ("--out my runs/x already holds census.json; pass --overwrite", {"out": "my runs/x"},
     "out='my runs/x' already holds census.json; pass overwrite=True"),
    ("--out DATA already holds census.json", {"out": pathlib.Path("DATA")}, "out='DATA' already holds census.json"),
    ("(--limit 20 → 5)", {"limit": 20}, "(limit=20 → 5)"),
    ("--classifier my models/x.onnx is not there", {"path": "my models/x.onnx"}, "path='my models/x.onnx' is not there"),
    ("choose another --out", {"out": "another"}, "choose another out"),  # no value written after the flag
    ("--out runs/xy exists", {"out": "runs/x"}, "out='runs/xy' exists"),  # not its value: by the words, as before
    ("nothing in --out my runs.", {"out": "my runs"}, "nothing in out='my runs'."),  # a full stop ends it
    ("--out runs/x.y exists", {"out": "runs/x"}, "out='runs/x.y' exists"),  # a dot inside a name does not
    # found by the third review of stop 53: a path as the call wrote it, printed as Path normalises it; more ends
    ("--out my runs already holds link.json", {"out": "my runs/"}, "out='my runs/' already holds link.json"),
    ("--out my runs already holds link.json", {"out": "./my runs"}, "out='./my runs' already holds link.json"),
    ("is --out my runs? [--out my runs]!", {"out": "my runs"}, "is out='my runs'? [out='my runs']!"),
    ("--out runs/x?y or --out runs/x!z", {"out": "runs/x"}, "out='runs/x?y' or out='runs/x!z'"),  # inside a name
    ("pass [--out my runs], or (is it --out my runs?)", {"out": "my runs"},  # stops and brackets before a comma
     "pass [out='my runs'], or (is it out='my runs'?)"),
    # a longer value first, whatever the order of the keywords; a message with the bracketing character
    ("--out x --limit 3 exists", {"limit": 3, "out": "x --limit 3"}, "out='x --limit 3' exists"),
    ("name 'a\ue000b' for --out runs/x", {"out": "runs/x"}, "name 'a\ue000b' for out='runs/x'"),
    # a spelled value is not read for flags again
    ("--out x --limit 3 exists", {"out": "x --limit 3", "limit": 3}, "out='x --limit 3' exists"),
])
def test_keyword_spelling_spells_a_flag_with_the_value_the_call_gave(message, values, spelled):
    from patterncnn.core.args import keyword_spelling

    params = ["out", "overwrite", "limit", "path"]
    assert keyword_spelling(message, params, {"classifier": "path"}, ["overwrite"], values) == spelled


def test_the_public_functions_pickle_by_reference():
    import pickle

    # census too, a callable subpackage (it raised "cannot pickle '_CallableModule' object", helper 102's review)
    for name in ["load_classifier", "load_encoder", "drift", "special_tokens", "disable", "link", "write_report",
                 "census"]:
        f = getattr(patterncnn, name)
        assert pickle.loads(pickle.dumps(f)) is f, name


def test_errors_of_a_python_call_name_its_keywords_and_the_command_line_keeps_its_flags(tmp_path, capsys):
    """The public functions' errors name their keywords; the same error from the command line names the flags (the
    handlers call the functions unwrapped); the error keeps its type."""
    from patterncnn.classifier.onnx import ClassifierError, load_classifier
    from patterncnn.cli import main
    from patterncnn.core.glue import GlueDataError

    with pytest.raises(ClassifierError, match=r"pass path='PATH/TO/patterncnn\.onnx'$"):
        patterncnn.load_classifier(tmp_path / "none.onnx")
    with pytest.raises(ClassifierError, match=r"pass --classifier PATH/TO/patterncnn\.onnx$"):
        load_classifier(tmp_path / "none.onnx")
    with pytest.raises(ClassifierError, match=r"pass classifier='PATH/TO/patterncnn\.onnx'$"):  # census's keyword
        patterncnn.census("minilm", tasks=["rte"], classifier=tmp_path / "none.onnx")
    with pytest.raises(GlueDataError) as raised:
        patterncnn.census("minilm", tasks=["rte"], glue_dir=tmp_path)
    assert "or leave out glue_dir to use `datasets`" in str(raised.value) and "--" not in str(raised.value)
    assert main(["census", "--task", "rte", "--glue-dir", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "or leave out --glue-dir to use `datasets`" in capsys.readouterr().err


def test_max_length_is_refused_alike_at_parse_time_and_a_check_names_the_flag_or_the_keyword(tmp_path, capsys):
    """`--max-length 3` passed the command line's own check (a whole number of at least 1) and reached the
    library's (at least 4), after GLUE had loaded; 0 got "at least 1" (helper 104). The command line now refuses
    both at parse time, as the library does. The library's check names the flag (what the command line would call)
    and python_errors spells it as the keyword for a Python call, as every other message."""
    from patterncnn.cli import main

    for value in ("0", "3"):
        common = ["--max-length", value, "--glue-dir", str(tmp_path / "none"), "--out", str(tmp_path / "out")]
        for argv in (["census", "--task", "rte", "--limit", "2"], ["sample", "--task", "rte", "--per-task", "2"],
                     ["drift", "minilm", "minilm", "--task", "rte", "--limit", "2"]):
            with pytest.raises(SystemExit) as e:
                main([*argv, *common])
            assert e.value.code == 2
            assert (f"error: argument --max-length: must be a whole number of at least 4 (got '{value}')"
                    in capsys.readouterr().err)
    with pytest.raises(ArgumentError, match=r"^--max-length must be a whole number of at least 4 \(got 3\)$"):
        patterncnn.load_encoder.__wrapped__("minilm", max_length=3)  # the function the command line calls
    with pytest.raises(ArgumentError, match=r"^max_length must be a whole number of at least 4 \(got 3\)$"):
        patterncnn.load_encoder("minilm", max_length=3)
    with pytest.raises(ArgumentError, match=r"^max_length must be a whole number of at least 4 \(got 3\)$"):
        patterncnn.drift("minilm", "minilm", "rte", max_length=3)


def test_what_a_python_call_logs_names_its_keywords_and_the_command_line_its_flags(caplog):
    """A run's warnings (logged, not raised) are spelled as its errors are: args.spelled within a public function's
    Python call (python_errors), as written from the command line (which calls the function unwrapped)."""
    import logging

    from patterncnn.core.args import python_errors, spelled

    log = logging.getLogger("patterncnn.test")

    def run(model="m", limit=None, overwrite=False):
        log.warning(spelled("at chance: score more examples (--limit N), or pass --overwrite"))

    with caplog.at_level(logging.WARNING):
        run()
        python_errors(run)(limit=20)
        run()  # the Python call's spelling ends with it
    assert caplog.messages == ["at chance: score more examples (--limit N), or pass --overwrite",
                               "at chance: score more examples (limit=N), or pass overwrite=True",
                               "at chance: score more examples (--limit N), or pass --overwrite"]


def test_experiment_results_check_their_method_arguments():
    res = patterncnn.ExperimentResult({"experiment": "drift"}, None, plotter=None, tabulate=None)
    assert res.to_json(indent=None) == '{"experiment": "drift"}'
    with pytest.raises(ArgumentError, match=r"indent must be a whole number of at least 0 or None \(got -1\)"):
        res.to_json(indent=-1)


def test_the_cuda_message_names_the_keyword_and_the_flag(monkeypatch):
    import torch

    from patterncnn.core.device import DeviceError, resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match=r"^device cuda \(--device cuda\): torch sees no CUDA device"):
        resolve_device("cuda")


def test_a_no_flag_is_spelled_false_only_for_a_keyword_on_by_default():
    # found by the review of stop 54: the wrapper's list of keywords on by default was not tested
    from patterncnn.core.args import python_errors
    from patterncnn.core.errors import DataError

    def f(layers=True, model="m"):
        raise DataError("pass --no-layers, or --no-model")

    with pytest.raises(DataError, match=r"^pass layers=False, or --no-model$"):
        python_errors(f)()


def test_a_model_object_is_refused_in_one_line_naming_how_to_pass_it():
    """A researcher's commonest case, their model in memory: the message held its repr over many lines and named no
    fix (helper 102's review)."""
    from transformers import BertConfig, BertModel

    obj = BertModel(BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8))
    for call in (lambda: patterncnn.census(obj, tasks=["rte"]), lambda: patterncnn.load_encoder(obj)):
        with pytest.raises(ArgumentTypeError) as raised:
            call()
        message = str(raised.value)
        assert "\n" not in message and "not a BertModel object" in message
        assert "model.save_pretrained(FOLDER); tokenizer.save_pretrained(FOLDER)) and pass FOLDER" in message
    with pytest.raises(ArgumentTypeError) as raised:  # any other repr is shown on one line too
        patterncnn.census({"a": "x\ny"}, tasks=["rte"])
    assert "\n" not in str(raised.value)
