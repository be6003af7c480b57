"""PNG rendering: one labelled map, and the contact sheet grid."""

import io
import json

import numpy as np
import pytest
from PIL import Image

from patterncnn.classifier.render import CAPTION_PX, contact_sheet, map_image, render_png


def test_render_png_is_an_image():
    a = np.eye(10, dtype=np.float32)
    png = render_png(a, tokens=[f"t{i}" for i in range(10)], seps=[4, 9], title="some-id")
    img = Image.open(io.BytesIO(png))
    assert img.format == "PNG" and img.size[0] > 300


def test_map_image_scales_per_map_and_draws_sep_lines():
    a = np.full((8, 8), 0.01, dtype=np.float32)
    a[:, 0] = 0.02  # a faint column must still reach the top of the colour scale
    img = map_image(a, 32, seps=[3, 7])
    assert img.shape == (3, 32, 32)
    assert img[:, 20, 0].tolist() != img[:, 20, 20].tolist()
    assert img[:, 16, 5].tolist() == [1.0, 1.0, 1.0]  # white line after token 3 (row 16 of 32)


def test_contact_sheet():
    png = contact_sheet([np.eye(5, dtype=np.float32)] * 10, cell=32, per_row=4)
    img = Image.open(io.BytesIO(png))
    assert img.size == (4 * 32 + 5 * 4, 3 * 32 + 4 * 4)


def test_contact_sheet_captions_make_room_above_each_map():
    png = contact_sheet([np.eye(5, dtype=np.float32)] * 3, captions=["#0", "#1", "#2"], cell=40, per_row=2)
    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    assert img.shape[:2] == (2 * (40 + CAPTION_PX) + 3 * 4, 2 * 40 + 3 * 4)
    strip = img[4 : 4 + CAPTION_PX, 4 : 4 + 40]
    assert (strip < 128).any() and (strip == 255).mean() > 0.5  # dark caption text on white


def test_annotate_sheets_cli(tmp_path, capsys):
    from synthetic import pattern_store

    from patterncnn.cli import main

    pattern_store(tmp_path / "maps", ["vertical", "diagonal", "block"] * 2, t=12)
    assert main(["annotate", "sheets", str(tmp_path / "maps"), "--out", str(tmp_path / "s"), "--per-sheet", "4",
                 "--shuffle", "1"]) == 0
    assert "wrote 2 sheet(s)" in capsys.readouterr().out
    index = json.loads((tmp_path / "s" / "index.json").read_text())
    assert [e["n"] for e in index] == list(range(6)) and [e["sheet"] for e in index] == [0] * 4 + [1] * 2
    assert sorted(e["id"] for e in index) == sorted(f"syn_{i:03d}_{k}" for i, k in
                                                    enumerate(["vertical", "diagonal", "block"] * 2))
    assert [e["id"] for e in index] != sorted(e["id"] for e in index)  # shuffled
    for s in (0, 1):
        assert Image.open(tmp_path / "s" / f"sheet-{s:03d}.png").format == "PNG"


def test_sheets_overwritten_and_interrupted_leave_no_index_naming_the_old_maps(tmp_path, monkeypatch):
    """--overwrite stopped after its first sheet left the old index.json beside the new sheet-000.png: a person
    labelling by its numbers labelled other maps (helper 103's review). The index goes before the first new sheet
    and comes back, the new one, when every sheet is written."""
    from synthetic import pattern_store

    import patterncnn.classifier.render as render

    store = pattern_store(tmp_path / "maps", ["vertical", "diagonal", "block"] * 4, t=12)
    render.write_sheets(store, tmp_path / "s", per_sheet=4, shuffle=1)
    real, drawn = render.contact_sheet, []

    def stop_at_the_second(*a, **kw):
        drawn.append(1)
        if len(drawn) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(render, "contact_sheet", stop_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        render.write_sheets(store, tmp_path / "s", per_sheet=4, shuffle=2, overwrite=True)
    assert not (tmp_path / "s" / "index.json").exists()  # sheet-000 is the new run's: no index names the old maps
    monkeypatch.setattr(render, "contact_sheet", real)
    assert render.write_sheets(store, tmp_path / "s", per_sheet=4, shuffle=2)["sheets"] == 3  # the rerun finishes
    index = json.loads((tmp_path / "s" / "index.json").read_text())
    fresh = render.write_sheets(store, tmp_path / "t", per_sheet=4, shuffle=2)
    assert fresh["sheets"] == 3 and index == json.loads((tmp_path / "t" / "index.json").read_text())


def test_annotate_sheets_on_an_empty_store_says_so(tmp_path, capsys):
    from patterncnn.cli import main
    from patterncnn.core.maps import MapStore

    MapStore.create(tmp_path / "empty")
    assert main(["annotate", "sheets", str(tmp_path / "empty"), "--out", str(tmp_path / "s")]) == 2
    assert "holds no maps" in capsys.readouterr().err


def test_annotate_sheets_skips_the_maps_classify_refuses_naming_each(tmp_path, capsys):
    from synthetic import pattern_map

    from patterncnn.cli import main

    good = pattern_map("diagonal", 8)
    bad = {"nan": np.where(np.eye(8) > 0, np.nan, good), "huge": np.full((8, 8), 1e39), "empty": np.zeros((0, 0)),
           "rect": np.full((3, 4), 0.25), "negative": -good}
    np.savez(tmp_path / "m.npz", first=good, **bad, last=good)
    assert main(["annotate", "sheets", str(tmp_path / "m.npz"), "--out", str(tmp_path / "s")]) == 0
    out, err = capsys.readouterr()
    assert [line.split(":")[0] for line in err.splitlines()] == list(bad)
    assert all(": skipped: " in line for line in err.splitlines())
    assert "NaN" in err and "empty" in err and "square" in err and "negative" in err
    assert "5 map(s) skipped" in out and "fix or remove them" in out
    index = json.loads((tmp_path / "s" / "index.json").read_text())
    assert [(e["n"], e["id"]) for e in index] == [(0, "first"), (1, "last")]
    assert Image.open(tmp_path / "s" / "sheet-000.png").format == "PNG"


def test_annotate_sheets_with_no_drawable_map_is_one_line_and_writes_nothing(tmp_path, capsys):
    from patterncnn.cli import main

    np.savez(tmp_path / "m.npz", rect=np.full((3, 4), 0.25), empty=np.zeros((0, 0)))
    assert main(["annotate", "sheets", str(tmp_path / "m.npz"), "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("patterncnn annotate: error: none of the 2 map(s) can be drawn (map 'rect'")
    assert "pass square maps" in err[-1]
    assert not (tmp_path / "s" / "index.json").exists()
