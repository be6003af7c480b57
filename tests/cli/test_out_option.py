"""Every command's --out: an empty path is refused when the arguments are parsed, before any work."""

import pytest

from patterncnn.cli import build_parser, main
from patterncnn.cli.common import out_path


def _out_actions():
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in commands.items():
        for action in sub._actions:
            if hasattr(action, "choices") and isinstance(action.choices, dict):  # a group: annotate, adapt
                for inner, p in action.choices.items():
                    yield from ((f"{name} {inner}", a) for a in p._actions if "--out" in a.option_strings)
            elif "--out" in action.option_strings:
                yield name, action


def test_every_out_option_refuses_an_empty_path():
    found = dict(_out_actions())
    assert {"census", "drift", "special-tokens", "disable", "train"} <= set(found)
    assert all(a.type is out_path for a in found.values()), [n for n, a in found.items() if a.type is not out_path]


@pytest.mark.parametrize("args", [["drift", "minilm", "minilm", "--task", "rte"], ["special-tokens", "--task", "rte"],
                                  ["census", "--task", "rte"]])
def test_an_empty_out_is_refused_at_parse_time(args, capsys):
    with pytest.raises(SystemExit) as stop:
        main(args + ["--out", ""])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out: must name a file or folder (got an empty path)" in err, err
