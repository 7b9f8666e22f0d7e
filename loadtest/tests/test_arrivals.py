import math

import pytest

from loadtest.arrivals import RAMP_S, arrival_offset, opening_peak


def test_a_steady_crowd_arrives_at_its_rate():
    assert [arrival_offset(k, 5, rate=100) for k in range(5)] == [0, 0.01, 0.02, 0.03, 0.04]


def test_an_opening_climbs_to_its_peak_in_a_second_then_halves_every_half_life():
    n, half_life = 10_000, 1.0
    offsets = [arrival_offset(k, n, half_life=half_life) for k in range(n)]
    assert offsets == sorted(offsets) and offsets[0] > 0

    def within(a: float, b: float) -> int:
        return sum(1 for t in offsets if a <= t < b)

    # Buyer k arrives at the (k + 0.5)/n quantile: a span's count is its share of n, to
    # the nearest buyer either way.
    peak = opening_peak(n, half_life)
    climb = peak * RAMP_S / 2  # the buyers under the climb
    assert abs(within(0, RAMP_S) - climb) <= 1
    # In a straight line: a quarter of the climb's buyers in its first half.
    assert abs(within(0, RAMP_S / 2) - climb / 4) <= 1
    # After the peak, each half-life holds half the buyers left.
    tail = n - climb
    assert abs(within(RAMP_S, RAMP_S + half_life) - tail / 2) <= 1
    assert abs(within(RAMP_S + half_life, RAMP_S + 2 * half_life) - tail / 4) <= 1
    # The busiest 100 ms is the one at the peak, at about the peak's rate (a little
    # under it, on both sides of the peak: 2% over these 100 ms).
    busiest = max(range(60), key=lambda tick: within(tick / 10, (tick + 1) / 10))
    assert busiest in (9, 10)
    assert math.isclose(within(0.95, 1.05) / 0.1, peak, rel_tol=0.03)


@pytest.mark.parametrize("k", [-1, 3])
def test_a_buyer_outside_the_crowd_is_refused(k):
    with pytest.raises(ValueError):
        arrival_offset(k, 3)
