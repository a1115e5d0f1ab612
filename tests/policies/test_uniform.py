import numpy as np

from labelq.policies import build
from labelq.policies.base import Observation, Policy, Problem


def test_vectorised_push_decision_equals_the_generic_one():
    """Uniform.select_pair must choose exactly the pair Policy.select_pair (one select_task
    per worker) chooses, on random masks and label counts with many ties."""
    policy = build("uniform")
    rng = np.random.default_rng(11)
    for trial in range(200):
        T, W = rng.integers(1, 30), rng.integers(1, 12)
        state = policy.init_state(Problem(n_tasks=T, n_workers=W))
        for _ in range(rng.integers(0, 3 * T)):
            policy.update(state, Observation(task=int(rng.integers(T)),
                                             worker=int(rng.integers(W)),
                                             label=int(rng.integers(2))))
        mask = rng.random((T, W)) < rng.uniform(0.05, 0.9)
        fast = policy.select_pair(state, mask, rng)
        generic = Policy.select_pair(policy, state, mask, rng)
        assert fast == generic, (trial, fast, generic)
        if fast is not None:
            assert mask[fast]
    assert policy.select_pair(state, np.zeros((T, W), dtype=bool), rng) is None
