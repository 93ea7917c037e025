"""tools/margins.py, the assert recorder of the seed sweep (`--record-margins`): it must pass and fail exactly as the
assert it replaces. Found by the long sweep: it called np.allclose of equal infinities a failure (|inf - inf| = NaN),
so two correct chapter-9 tests failed at every offset of the sweep and at none in `make test`."""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import margins  # noqa: E402


@pytest.mark.parametrize("a, b, expected", [
    ([0.0, -np.inf, np.inf], [0.0, -np.inf, np.inf], True),     # equal infinities are close (numpy, math)
    ([1.0, np.inf], [1.0, -np.inf], False),
    ([1.0, np.nan], [1.0, np.nan], False),                      # NaN is never close (equal_nan=False)
    ([1.0, 2.0], [1.0, 2.0 + 1e-13], True),
    ([1.0, 2.0], [1.0, 2.0 + 1e-11], False),
])
def test_close_margin_agrees_with_numpy_and_math(a, b, expected):
    a, b = np.array(a), np.array(b)
    assert np.allclose(a, b, rtol=0, atol=1e-12) == expected          # the assert being replaced
    ok, m = margins._margin(["close", 0, 1, 2, 3, False], [a, b, 0.0, 1e-12])
    assert ok == expected and (m >= 0) == expected
    ok_math, _ = margins._margin(["close", 0, 1, 2, 3, True], [a[-1], b[-1], 0.0, 1e-12])
    assert ok_math == math.isclose(a[-1], b[-1], rel_tol=0, abs_tol=1e-12)
