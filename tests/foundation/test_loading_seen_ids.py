"""The first pass's duplicate-id check across many blocks (issue 36): checked blocks are
merged (a binary counter's merges), and a duplicate whose first copy is in any earlier
block — merged or not — is still found, the first one in file order reported first."""

import pytest

from labelq.errors import FileFormatError
from labelq.record import loading
from labelq.record.loading import check_task_file


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(loading._SeenIds, "BLOCK", 3)


def write(tmp_path, ids):
    path = tmp_path / "t.csv"
    path.write_text("id,text\n" + "".join(f"{i},x\n" for i in ids))
    return path


def test_many_blocks_without_duplicates_pass_and_are_merged(tmp_path, monkeypatch):
    ids = [f"t{i}" for i in range(100)]
    seen = []
    real = loading._SeenIds.check

    def spy(self):
        real(self)
        seen.append([len(b) for b in self.blocks])

    monkeypatch.setattr(loading._SeenIds, "check", spy)
    assert check_task_file(write(tmp_path, ids)) == 100
    # 34 checks of 3 ids (the last of 1); the merged blocks stay few and sorted by size
    sizes = seen[-1]
    assert sum(sizes) == 100 and len(sizes) <= 6  # (not 34 blocks of 3)
    assert all(a > 2 * b for a, b in zip(sizes, sizes[1:], strict=False)), sizes


@pytest.mark.parametrize("first,again", [(0, 97), (1, 50), (40, 41), (90, 99), (5, 6)])
def test_duplicate_found_whatever_block_its_first_copy_is_in(tmp_path, first, again):
    ids = [f"t{i}" for i in range(100)]
    ids[again] = ids[first]
    with pytest.raises(FileFormatError) as exc:
        check_task_file(write(tmp_path, ids))
    # line = index + 2 (the header is line 1)
    assert exc.value.line == again + 2 and exc.value.field == "id"
    assert f"duplicate id 't{first}' (first on line {first + 2})" in str(exc.value)


def test_the_first_duplicate_in_file_order_is_reported(tmp_path):
    ids = [f"t{i}" for i in range(100)]
    ids[80] = ids[3]   # two duplicates, the earlier one in a later-checked position
    ids[60] = ids[70]  # (its first copy comes after it: line 72 is the duplicate)
    ids[30] = ids[10]
    with pytest.raises(FileFormatError) as exc:
        check_task_file(write(tmp_path, ids))
    assert exc.value.line == 32, str(exc.value)


def test_hash_collisions_that_are_not_duplicates_pass(tmp_path, monkeypatch):
    # every id hashes alike: each block's ids are confirmed by reading the file again
    monkeypatch.setattr(loading, "hash", lambda _s: 7, raising=False)
    assert check_task_file(write(tmp_path, [f"t{i}" for i in range(20)])) == 20


# --- the first pass takes plain rows CHECK_ROWS at a time: the first bad line still first ---

def _rows_file(tmp_path, bad: dict[int, str], n=40, header="id,category,text"):
    """A CSV of ``n`` rows (file lines 2..n+1), line ``k`` replaced by ``bad[k]``."""
    lines = [bad.get(i + 2, f"t{i},c{i % 3},x") for i in range(n)]
    path = tmp_path / "b.csv"
    path.write_text(header + "\n" + "\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("rows", [1, 4, 7, 256])
@pytest.mark.parametrize("bad,line,field,needle", [
    ({9: " t7,c1,x", 25: "t23,c1"}, 9, "id", "spaces around it"),
    ({25: "t23,c1", 9: " t7,c1,x"}, 9, "id", "spaces around it"),
    ({12: "t10,c1"}, 12, None, "expected 3 columns, found 2"),
    ({12: "t10,c1", 11: "t3,c0,x"}, 11, "id", "duplicate id 't3' (first on line 5)"),
    ({12: "t10,c1", 13: "t3,c0,x"}, 12, None, "expected 3 columns, found 2"),
    ({30: "t28,c\x01,x", 31: "t29,c1"}, 30, "category", "control character"),
    ({30: "t28, c,x", 31: "t3,c1,x"}, 30, "category", "spaces around it"),
    ({30: "t28,c1,x", 31: "t2,c1,x", 32: "t30,c1,\"open"}, 31, "id", "duplicate id 't2'"),
    ({6: "t4," + "c" * 201 + ",x"}, 6, "category", "longer than 200"),
    ({6: "t" * 501 + ",c,x"}, 6, "id", "longer than 500"),
    ({41: ",c1,x"}, 41, "id", "missing value"),
])
def test_first_bad_line_is_named_whatever_the_batches(tmp_path, monkeypatch, rows, bad, line,
                                                      field, needle):
    monkeypatch.setattr(loading, "CHECK_ROWS", rows)
    with pytest.raises(FileFormatError) as exc:
        check_task_file(_rows_file(tmp_path, bad))
    assert (exc.value.line, exc.value.field) == (line, field), str(exc.value)
    assert needle in str(exc.value)


@pytest.mark.parametrize("rows", [1, 3, 256])
def test_batches_call_each_for_every_row_in_order(tmp_path, monkeypatch, rows):
    monkeypatch.setattr(loading, "CHECK_ROWS", rows)
    seen = []
    bad = {7: "t5,,x", 9: "t7,\"c\",x"}  # an empty category, a quoted one: both good
    n = check_task_file(_rows_file(tmp_path, bad, n=20), each=lambda ln, e: seen.append((ln, e)))
    assert n == 20 and seen == [(i + 2, f"t{i}") for i in range(20)]


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_a_duplicate_just_before_a_malformed_line_comes_first(tmp_path, kind):
    # confirming the duplicate reads the file again up to its line, not beyond (a batch
    # read past it met the malformed line and named that instead)
    path = tmp_path / f"d.{kind}"
    if kind == "csv":
        path.write_text("id,text\na,x\nb,x\na,x\nc\n")
    else:
        path.write_text('{"id": "a"}\n{"id": "b"}\n{"id": "a"}\n{"id": \n')
    with pytest.raises(FileFormatError) as exc:
        check_task_file(path)
    want = 4 if kind == "csv" else 3
    assert exc.value.line == want and "duplicate id 'a'" in str(exc.value), str(exc.value)
