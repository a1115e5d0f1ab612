"""Share of simulated annotators ever paused by each quality rule when it is checked after
every gold answer (the table in docs/gold.md). Run: ``python docs/scripts/quality_looks.py``."""

import numpy as np

from labelq.gold.quality import QualityRule
from labelq.gold.scoring import GoldScores

HORIZONS = (10, 20, 50, 100, 200)


def ever_paused(rule: QualityRule, accuracy: float, workers: int = 20_000,
                rng: np.random.Generator | None = None) -> list[float]:
    rng = rng or np.random.default_rng(0)
    n = max(HORIZONS)
    correct = np.cumsum(rng.random((workers, n)) < accuracy, axis=1).astype(float)
    ever = np.zeros(workers, dtype=bool)
    shares = []
    for k in range(n):
        s = GoldScores(correct[:, k:k + 1], np.full((workers, 1), k + 1.0))
        ever |= rule.pause_mask(s)
        if k + 1 in HORIZONS:
            shares.append(float(ever.mean()))
    return shares


def main() -> None:
    print("| true accuracy | rule | " + " | ".join(f"n = {h}" for h in HORIZONS) + " |")
    for accuracy in (0.35, 0.5, 0.6, 0.7, 0.75):
        for name in QualityRule.RULES:
            rule = QualityRule(threshold=0.7, min_gold=10, confidence=0.95, rule=name)
            shares = ever_paused(rule, accuracy, rng=np.random.default_rng(0))
            print(f"| {accuracy} | {name} | " + " | ".join(f"{x:.2f}" for x in shares) + " |")


if __name__ == "__main__":
    main()
