"""PNG rendering: one labelled map, and the contact sheet grid."""

import io

import numpy as np
from PIL import Image

from patterncnn.render import contact_sheet, map_image, render_png


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
