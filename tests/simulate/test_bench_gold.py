"""bench/policies.py --gold: each cell also with gold, under its own cache key, side by side."""

from bench.policies import Unit, gold_section, run_unit, summarise
from labelq.simulate.experiment import EnvSource

SOURCE = EnvSource("synthetic", "tasks=40,workers=6,model=one-coin,p=0.8")


def test_gold_units_have_their_own_keys_and_count_their_gold():
    plain = Unit("s", SOURCE, "uniform", 0, 0, (2.0, 3.0))
    gilded = Unit("s", SOURCE, "uniform", 0, 0, (2.0, 3.0), gold="0.1")
    assert plain.key() == "s|uniform|0|0|2.0,3.0"  # the cached keys without gold
    assert gilded.key() == "s|uniform|0|0|2.0,3.0|gold=0.1@fixed:rate=0.1"
    a, b = run_unit(plain), run_unit(gilded)
    assert "gold" not in a and b["gold"] == "0.1"
    assert all("gold_labels" not in p for p in a["points"])
    assert 0 < b["points"][-1]["gold_labels"] < b["points"][-1]["labels"]
    cache = {a["key"]: a, b["key"]: b}
    lines = gold_section(cache, {"s": SOURCE}, ["uniform"], [2.0, 3.0], {}, 1,
                         {("s", "uniform"): summarise([a], [2.0, 3.0])}, "0.1",
                         "fixed:rate=0.1")
    rows = [line for line in lines if line.startswith("| s |")]
    assert len(rows) == 2 and all("→" in r for r in rows) and "gold |" in rows[-1]
