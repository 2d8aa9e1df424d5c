"""50 synthetic classes in 25 increments: CBCL-PR stays near the offline optimum, naive FT forgets."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from cbcl_pr_ros.core import CBCLPRLearner, LearnerConfig, NaiveFineTuneHead

D, C, SHOTS, TEST = 64, 50, 10, 30


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    mu = rng.normal(0, 0.4, (C, D))
    mix = rng.normal(0, 1, (D, D)) / np.sqrt(D)

    def sample(c, n):
        return mu[c] + (rng.normal(0, 1, (n, D)) @ mix.T) * 0.6

    train = {c: sample(c, SHOTS) for c in range(C)}
    xte = np.concatenate([sample(c, TEST) for c in range(C)])
    yte = np.repeat(np.arange(C), TEST)
    return train, xte, yte


def _curve(predict, teach, train, xte, yte):
    accs = []
    for inc in range(C // 2):
        teach({c: train[c] for c in (2 * inc, 2 * inc + 1)})
        seen = yte < 2 * inc + 2
        accs.append(float((predict(xte[seen]) == yte[seen]).mean()))
    return accs


def test_cbcl_pr_near_optimum_and_naive_finetune_drops(data):
    train, xte, yte = data
    offline = LogisticRegression(max_iter=3000).fit(
        np.concatenate([train[c] for c in range(C)]), np.repeat(np.arange(C), SHOTS)).score(xte, yte)

    learner = CBCLPRLearner(LearnerConfig(seed=0), "syn", D)
    accs = _curve(
        lambda x: np.array([int(learner.classes_[i][1:]) for i in learner.predict_scores(x).argmax(1)]),
        lambda shots: learner.teach_increment({f"c{c}": x for c, x in shots.items()}),
        train, xte, yte)
    assert accs[-1] >= 0.95 * offline, (accs[-1], offline)
    assert min(accs) >= 0.9 * offline  # no catastrophic drop anywhere on the way
    assert learner.n_clusters_ >= C

    ft = NaiveFineTuneHead(D, seed=0)
    ft_accs = _curve(
        lambda x: np.array([int(c[1:]) for c in ft.predict(x)]),
        lambda shots: ft.partial_fit({f"c{c}": x for c, x in shots.items()}),
        train, xte, yte)
    assert ft_accs[-1] < 0.85 * offline, (ft_accs[-1], offline)
    assert accs[-1] - ft_accs[-1] > 0.15


def test_paper_schedule_learns_incrementally(data):
    """The paper's SGD head on 10 of the classes in 5 increments (kept short: it is slow)."""
    train, xte, yte = data
    learner = CBCLPRLearner(LearnerConfig.paper(seed=0, epochs=15, epochs_per_increment=2), "syn", D)
    accs = []
    for inc in range(5):
        learner.teach_increment({f"c{c}": train[c] for c in (2 * inc, 2 * inc + 1)})
        seen = yte < 2 * inc + 2
        pred = np.array([int(learner.classes_[i][1:]) for i in learner.predict_scores(xte[seen]).argmax(1)])
        accs.append(float((pred == yte[seen]).mean()))
    assert min(accs) > 0.85, accs
