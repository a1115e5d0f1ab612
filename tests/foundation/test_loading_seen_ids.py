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
