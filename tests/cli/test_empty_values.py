"""An empty value (``--model "$MODEL"`` with the variable unset) is refused at parse time, naming the argument, for
every option and positional of every command: taken as it is, an empty path reads the working folder (``report ''``
wrote the report of whatever census it found there), an empty ``--init`` or ``--glue-dir`` means "not given", and an
empty ``--model`` reached the library's "name is empty" with no flag named."""

import argparse

import pytest

from patterncnn.cli import build_parser, main

# Values that argparse's type lets through empty on purpose: the command checks them with its own message.
CHECKED_LATER = {("analyze", "text")}  # analyze refuses an empty sentence itself: test_checked_later_values_are_refused


def _commands(parser: argparse.ArgumentParser, path=()):
    """(the words that reach a (sub)command, its parser), for every command that takes arguments of its own."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _commands(sub, (*path, name))


def _value_arguments():
    for path, parser in _commands(build_parser()):
        positionals = [a for a in parser._actions if not a.option_strings]
        for action in parser._actions:
            if action.nargs == 0 or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            if action.choices is not None and "" not in action.choices:
                continue  # argparse refuses '' as an invalid choice
            shown = argparse._get_action_name(action)  # as argparse names it in its errors: --model, B, RUN_DIR
            if (path[-1], shown) in CHECKED_LATER:
                continue
            values = [""] * (action.nargs if isinstance(action.nargs, int) else 1)
            if action.option_strings:
                argv = [*path, action.option_strings[0], *values]
            else:  # the positionals before it get a value, so that the empty one reaches its own
                argv = [*path, *["x" for _ in positionals[:positionals.index(action)]], *values]
            yield pytest.param(argv, shown, id=" ".join([*path, shown]))


@pytest.mark.parametrize("argv,shown", list(_value_arguments()))
def test_an_empty_value_is_refused_naming_the_argument(argv, shown, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"error: argument {shown}: " in err, err


def test_the_empty_model_message_names_the_flag_and_the_fix(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["census", "--task", "rte", "--model", ""])
    err = capsys.readouterr().err
    assert "argument --model: is empty" in err and "a short name (minilm, mpnet, e5)" in err, err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["drift", "minilm", ""])
    assert "argument B: is empty" in capsys.readouterr().err


def test_checked_later_values_are_refused(capsys):
    assert main(["analyze", ""]) == 2
    assert "the sentence is empty" in capsys.readouterr().err
