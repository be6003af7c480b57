"""Segments from separator positions: BERT's [SEP] and MPNet's double </s></s> give the same two segments.

T = 12. BERT pair: [CLS] a a a a [SEP] b b b b b [SEP]   seps [5, 11], segment B from 6.
MPNet pair:        <s> a a a a </s></s> b b b b </s>     seps [5, 6, 11], segment B from 7.
"""

import io

import matplotlib.axes
import numpy as np
import pytest
import torch
from PIL import Image
from synthetic import pattern_map

from patterncnn.classifier.features import map_features, rule_scores
from patterncnn.classifier.model import segment_masks, structure_masks
from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.classifier.render import contact_sheet, map_image, render_png
from patterncnn.core.labels import LABELS
from patterncnn.core.segments import boundaries, is_pair, segment_ids, segment_spans

T = 12
BERT, MPNET = [5, 11], [5, 6, 11]


@pytest.mark.parametrize("seps, spans", [
    (BERT, [(0, 6), (6, 12)]),
    (MPNET, [(0, 7), (7, 12)]),
    ([11, 6, 5], [(0, 7), (7, 12)]),          # order does not matter
    ([5, 6, 7, 11], [(0, 8), (8, 12)]),       # a longer run is still one boundary
    ([11], [(0, 12)]),                        # single segment
    ([5], [(0, 12)]),                         # a lone separator that does not end a second segment
    ([10, 11], [(0, 12)]),                    # MPNet with an empty second text
    ([], [(0, 12)]),
    (None, [(0, 12)]),
    ([5, 11, 40, -1], [(0, 6), (6, 12)]),     # positions outside the input are ignored
])
def test_segment_spans(seps, spans):
    assert segment_spans(T, seps) == spans
    assert is_pair(T, seps) == is_pair(None, seps) == (len(spans) == 2)  # T unknown: the same answer
    assert boundaries(T, seps) == [s for s, _ in spans[1:]]
    assert segment_ids(T, seps).tolist() == [k for k, (a, b) in enumerate(spans) for _ in range(a, b)]


def test_segment_channel_double_separator():
    bert, mpnet, single = segment_masks(T, [BERT, MPNET, [11]])
    b = 7  # MPNet's segment B starts after its second </s>
    assert mpnet[:b, :b].min() == 1 and mpnet[b:, b:].min() == 1
    assert mpnet[:b, b:].max() == 0 and mpnet[b:, :b].max() == 0
    assert mpnet[6, 5] == 1 and mpnet[6, 7] == 0  # both </s> belong to segment A
    assert torch.equal(mpnet, segment_masks(T, [[6, 11]])[0])  # = a BERT pair whose [SEP] sits at 6
    assert bert[5, 6] == 0 and single.min() == 1


def test_structure_channel_marks_every_separator_column():
    band, cols = structure_masks(T, [MPNET])[0]
    assert torch.nonzero(cols[0]).flatten().tolist() == [0, 5, 6, 11]  # <s> and all three </s>
    assert torch.equal(cols[3], cols[0]) and band[4, 5] == 1 and band[4, 6] == 0


def test_block_rule_uses_the_pair_split():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 0.01, (T, T))
    a[:7, :7] += 1.0  # two squares split after the second </s>
    a[7:, 7:] += 1.0
    a /= a.sum(1, keepdims=True)
    f_mpnet = dict(zip(("within", "pair"), map_features(a, MPNET)[[11, 16]]))
    assert f_mpnet["pair"] == 1.0 and f_mpnet["within"] > 0.99  # all mass inside the two squares
    assert map_features(a, BERT)[11] < 0.95  # BERT's split (after 5) cuts token 6 off its square
    assert int(np.argmax(rule_scores(a, MPNET))) == LABELS.index("block")
    assert rule_scores(a, [11])[LABELS.index("block")] < 0.01  # one segment: never block


def test_renders_draw_one_boundary(monkeypatch):
    a = pattern_map("block", T, 6)
    img = map_image(a, 48, MPNET)
    white = [r for r in range(48) if bool((img[:, r, :] == 1.0).all())]
    assert white == [28]  # one line, before token 7 (7 * 48 / 12), not one per </s>
    lines = []
    real = matplotlib.axes.Axes.axhline
    monkeypatch.setattr(matplotlib.axes.Axes, "axhline", lambda ax, y, **kw: lines.append(y) or real(ax, y, **kw))
    render_png(a, tokens=[f"t{i}" for i in range(T)], seps=MPNET)
    assert lines == [6.5]
    sheet = np.asarray(Image.open(io.BytesIO(contact_sheet([a, a], [MPNET, BERT], cell=48, per_row=2))).convert("L"))
    cells = [sheet[4 : 4 + 48, 4 + k * 52 : 4 + k * 52 + 48] for k in (0, 1)]  # padding 4 around 48-px cells
    rows = [[r for r in range(48) if (c[r] == 255).all()] for c in cells]
    assert rows == [[28], [24]]  # MPNet: one line before token 7; BERT: before token 6


def test_single_segment_check(tiny_classifier):
    clf = OnnxClassifier(tiny_classifier[1])
    block = pattern_map("block", T, 6)
    pair, single = clf.predict([block, block], [MPNET, [11]])
    assert pair[LABELS.index("block")] > 0 and single[LABELS.index("block")] == 0.0
    assert single.sum() == pytest.approx(1.0, abs=1e-5)
