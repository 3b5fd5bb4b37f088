"""A random forest answers the same in every run: it is fitted on two threads (each tree seeded, the same
trees either way) and predicts on one, because scikit-learn sums the trees' predictions in the order its
threads finish. Two trainings of the RTX 2080 Ti training bundle once differed by 1e-9 in an energy
residual, so a re-trained bundle of the registered one's content hash answered differently from it."""

from __future__ import annotations

import numpy as np

from builders import left_out_data
from opcost.model.training.fit import fit_model, predict_rows
from opcost.params.train import TrainParams


def test_a_fitted_forest_predicts_on_one_thread_and_repeats_itself_exactly():
    data, _, _ = left_out_data()
    tp = TrainParams(folds=3, seed=0, random_forest={"n_estimators": 64})
    rows = np.arange(data.n)
    a = fit_model(data, "rf", "improved", "power", rows, tp)
    b = fit_model(data, "rf", "improved", "power", rows, tp)
    assert a.model.n_jobs == 1 and b.model.n_jobs == 1
    many = np.tile(rows, 50)
    first = predict_rows(data, a, many)
    for f in (a, b, a, b):
        assert np.array_equal(predict_rows(data, f, many), first)
