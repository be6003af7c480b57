"""The map store: round trip, append, atomicity, and the plain-npz exchange format."""

import numpy as np
import pytest

from patterncnn.core.maps import MapFormatError, MapStore, check_map, open_maps, require_maps


def softmax_map(t, seed=0):
    x = np.random.default_rng(seed).normal(size=(t, t))
    e = np.exp(x - x.max(1, keepdims=True))
    return (e / e.sum(1, keepdims=True)).astype(np.float32)


def test_round_trip_and_append(tmp_path):
    store = MapStore.create(tmp_path / "s", info={"model": {"model": "x"}})
    recs = [({"id": f"m{i}", "layer": i, "tokens": ["[CLS]"] + ["a"] * (i + 3)}, softmax_map(i + 4, i))
            for i in range(3)]
    assert store.append(recs) == 3
    assert store.append([({"id": "m9"}, softmax_map(7, 9))]) == 1
    again = open_maps(tmp_path / "s")
    assert again.ids == ["m0", "m1", "m2", "m9"]
    assert again.header["model"] == {"model": "x"} and again.header["format"] == "patterncnn-maps"
    for (meta, arr), (want_meta, want) in zip(again, recs):
        assert meta == want_meta
        np.testing.assert_array_equal(arr, want)
    assert again.get("m9").shape == (7, 7)
    assert not list((tmp_path / "s").glob("*.tmp")) and not list((tmp_path / "s").glob(".*"))


def test_append_rejects_duplicates_and_bad_maps_without_writing(tmp_path):
    store = MapStore.create(tmp_path / "s")
    store.append([({"id": "a"}, softmax_map(5))])
    with pytest.raises(MapFormatError, match="already in"):
        store.append([({"id": "b"}, softmax_map(5)), ({"id": "a"}, softmax_map(5))])
    with pytest.raises(MapFormatError, match="not a square"):
        store.append([({"id": "c"}, np.ones((3, 4)))])
    assert MapStore(tmp_path / "s").ids == ["a"]
    assert len(list((tmp_path / "s").glob("part-*"))) == 2  # one .jsonl + one .npz


def test_create_refuses_existing_store(tmp_path):
    MapStore.create(tmp_path / "s")
    with pytest.raises(FileExistsError, match="choose another --out"):
        MapStore.create(tmp_path / "s")


def test_part_without_npz_is_not_read(tmp_path):
    # A crash between the .jsonl and the .npz of a part leaves an orphan .jsonl: it must not count.
    store = MapStore.create(tmp_path / "s")
    store.append([({"id": "a"}, softmax_map(5))])
    (tmp_path / "s" / "part-00001.jsonl").write_text('{"id": "ghost"}\n')
    assert MapStore(tmp_path / "s").ids == ["a"]


@pytest.mark.parametrize("lost,error", [
    ("part-00000.npz", r"part-00000\.npz is missing \(a later part is there\): the part is damaged; restore"),
    ("part-00001.jsonl", r"part-00001\.jsonl is missing \(its \.npz is there\): the part is damaged; restore"),
])
def test_a_lost_part_file_that_no_crash_leaves_is_refused_by_name(tmp_path, lost, error):
    store = MapStore.create(tmp_path / "s")
    store.append([({"id": "a"}, softmax_map(5))])
    store.append([({"id": "b"}, softmax_map(5))])
    (tmp_path / "s" / lost).unlink()
    with pytest.raises(MapFormatError, match=error):
        MapStore(tmp_path / "s")


def test_require_maps_refuses_a_store_with_no_maps_naming_a_lost_npz(tmp_path):
    store = MapStore.create(tmp_path / "s")
    with pytest.raises(MapFormatError, match=r"holds no maps; write maps into it"):
        require_maps(store)
    store.append([({"id": "a"}, softmax_map(5))])
    assert require_maps(MapStore(tmp_path / "s")).ids == ["a"]
    (tmp_path / "s" / "part-00000.npz").unlink()
    with pytest.raises(MapFormatError, match=r"part-00000\.npz is missing .* holds no other maps: the part is damaged"):
        require_maps(MapStore(tmp_path / "s"))


def test_require_maps_says_the_index_is_lost_when_the_arrays_hold_maps(tmp_path):
    store = MapStore.create(tmp_path / "s")
    store.append([({"id": f"m{i}"}, softmax_map(5, i)) for i in range(3)])
    (tmp_path / "s" / "part-00000.jsonl").write_text("")  # the index emptied, the arrays kept
    with pytest.raises(MapFormatError, match=r"the index of .* is empty \(its \.jsonl files list no maps\) while "
                                             r"its arrays hold 3 map\(s\): the store is damaged; restore the "
                                             r"\.jsonl files, or classify a part's arrays as a plain \.npz"):
        require_maps(MapStore(tmp_path / "s"))
    assert open_maps(tmp_path / "s" / "part-00000.npz").ids == ["m0", "m1", "m2"]  # the recovery it names


def test_plain_npz(tmp_path):
    np.savez(tmp_path / "m.npz", **{"x": softmax_map(6), "y": softmax_map(9, 1)})
    src = open_maps(tmp_path / "m.npz")
    assert src.ids == ["x", "y"]
    assert [m.shape for _, m in src] == [(6, 6), (9, 9)]
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(MapFormatError, match="not a readable .npz"):
        open_maps(tmp_path / "bad.npz")
    with pytest.raises(MapFormatError, match="does not exist"):
        open_maps(tmp_path / "missing.npz")


def test_plain_npz_takes_separators_from_its_seps_member(tmp_path):
    np.savez(tmp_path / "m.npz", x=softmax_map(6), y=softmax_map(9, 1), __seps__=np.array([[2, 5], [8, -1]]))
    src = open_maps(tmp_path / "m.npz")
    assert src.ids == ["x", "y"]  # the member is not a map
    assert [src.metadata(i) for i in src.ids] == [{"id": "x", "seps": [2, 5]}, {"id": "y", "seps": [8]}]
    np.savez(tmp_path / "n.npz", x=softmax_map(6), __seps__=np.array([[-1, -1]]))
    assert open_maps(tmp_path / "n.npz").metadata("x") == {"id": "x"}  # a row of -1 only: none given


@pytest.mark.parametrize("arr,error", [
    (np.ones((3, 4)), "square"), (np.ones((2, 2, 2)), "square"), (np.zeros((0, 0)), "empty"),
    (np.array([[np.nan, 1.0], [0.5, 0.5]]), "NaN"), (np.array([[-0.1, 1.1], [0.5, 0.5]]), "negative"),
    (np.array([["a", "b"], ["c", "d"]]), "dtype"),
])
def test_check_map_errors(arr, error):
    errors, _ = check_map(arr)
    assert errors and error in errors[0]


def test_check_map_flags_rows_not_summing_to_one():
    assert check_map(softmax_map(5)) == ([], [])
    errors, warnings = check_map(softmax_map(5) * 3)
    assert not errors and "rows do not sum to 1" in warnings[0]


def test_append_splits_parts_by_size(tmp_path, monkeypatch):
    import patterncnn.core.maps as maps

    monkeypatch.setattr(maps, "PART_BYTES", 2 * 10 * 10 * 4)  # the same rule as 256 MiB: two 10 x 10 maps a part
    store = MapStore.create(tmp_path / "s")
    assert store.append([({"id": f"m{i}"}, softmax_map(10, i)) for i in range(5)]) == 5
    assert len(list((tmp_path / "s").glob("part-*.npz"))) == 3
    again = MapStore(tmp_path / "s")
    assert again.ids == [f"m{i}" for i in range(5)]
    np.testing.assert_array_equal(again.get("m4"), softmax_map(10, 4))


def test_append_checks_the_metadata_contract(tmp_path):
    store = MapStore.create(tmp_path / "s")
    with pytest.raises(MapFormatError, match='field "seps" must be'):
        store.append([({"id": "a", "seps": ["x"]}, softmax_map(5))])
    with pytest.raises(MapFormatError, match="separator position 9 is outside the map"):
        store.append([({"id": "a", "seps": [2, 9]}, softmax_map(5))])
    with pytest.raises(MapFormatError, match="NaN or inf"):  # a float64 1e39 is inf in the float32 stored
        store.append([({"id": "a"}, np.full((3, 3), 1e39))])


def test_a_request_npy_is_read_as_views_of_its_body_and_aligned_when_its_header_is_not_padded():
    import io

    from patterncnn.core.arrayfile import ReadLimits, read_npy

    maps = np.stack([softmax_map(6, i) for i in range(2)])
    buf = io.BytesIO()
    np.save(buf, maps)
    body = bytearray(buf.getvalue())
    got = read_npy(body, ReadLimits())
    assert all(np.shares_memory(m, np.frombuffer(body, np.uint8)) for m in got)  # held once
    header_end = body.index(b"\n") + 1  # np.save pads the header so that the data starts at a multiple of 64
    unpadded = bytearray(body[:header_end - 2] + b"\n" + body[header_end:])  # a hand-made header, one byte short
    unpadded[8:10] = (int.from_bytes(body[8:10], "little") - 1).to_bytes(2, "little")  # its declared length too
    got = read_npy(unpadded, ReadLimits())
    assert all(m.flags.aligned and m.flags.writeable for m in got)  # copied rather than left unaligned
    np.testing.assert_array_equal(np.stack(got), maps)


def test_buffer_reader_refuses_what_bytesio_refuses():
    import io

    from patterncnn.core.arrayfile import BufferReader

    for reader in (BufferReader(bytearray(b"abcdef")), io.BytesIO(b"abcdef")):
        assert reader.seek(-2, io.SEEK_END) == 4 and reader.read(5) == b"ef"
        with pytest.raises(ValueError, match="invalid whence"):
            reader.seek(0, 7)
        reader.close()
        with pytest.raises(ValueError, match="closed file"):
            reader.read(1)


def test_plain_npy_is_read_one_map_at_a_time(tmp_path):
    from patterncnn.core.arrayfile import ArrayFileError

    np.save(tmp_path / "m.npy", np.stack([softmax_map(6, i) for i in range(3)]))
    src = open_maps(tmp_path / "m.npy")
    assert src.ids == ["0", "1", "2"]
    np.testing.assert_array_equal(src.get("2"), softmax_map(6, 2))
    np.save(tmp_path / "f.npy", np.asfortranarray(np.stack([softmax_map(6), softmax_map(6)])))
    with pytest.raises(ArrayFileError, match="Fortran order"):
        open_maps(tmp_path / "f.npy")
    (tmp_path / "t.npy").write_bytes((tmp_path / "m.npy").read_bytes()[:-10])
    with pytest.raises(ArrayFileError, match="truncated or padded"):
        open_maps(tmp_path / "t.npy")
    np.save(tmp_path / "e.npy", np.zeros((0, 6, 6), dtype=np.float32))
    with pytest.raises(MapFormatError, match=r"e\.npy holds no maps \(an \(N, T, T\) array with N = 0\); save one "
                                             r"\(T, T\) map, or N >= 1 of them") as refused:
        open_maps(tmp_path / "e.npy")
    assert "key" not in str(refused.value)  # a .npy has no keys
