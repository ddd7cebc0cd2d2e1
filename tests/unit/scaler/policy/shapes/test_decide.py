"""A model with shapes, decided on a simulated clock (scaler.policy.shapes.decide).

Covers: a light load runs on the cheap slice once the history is long
enough to compare shapes on, a heavy one within a quarter of where each
shape's sizing makes it cheapest (what runs stays unless a move saves
that); from zero with no history an activation wakes the base shape, with
one the cheapest; slices stuck Pending are capped and the H100 covers in the
same decision, and the model moves back two minutes after (the H100 kept
until the slice is Ready); each shape
learns its capacity from its own servers, from a prior scaled by its ratios,
and the activators weigh its replicas and bound its prompts by what it learned;
prompts a slice cannot prefill within the objective keep an H100 in the mix;
the model's decision is named by the direction the total moved; a shape's
correction multiplies its sizing once, also while its policy holds its count.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from scaler.policy.api import (
    Demand,
    LoadTotals,
    Observation,
    Reason,
    SignalKind,
    SignalReading,
)
from scaler.policy.placement.availability import CapacityType, PodFacts
from scaler.policy.protocol import PurePolicy
from scaler.policy.shapes.correction import Correction
from scaler.policy.shapes.decide import ShapeSeen, ShapesOutcome, ShapesState, decide_shapes
from scaler.policy.shapes.declarations import ChosenShape, parse_shape_table, read_shapes
from scaler.policy.shapes.mix import SWITCH_SAVING

COLD_START_S = 60.0
H100, SLICE = "h100", "mig-3g.40gb"
PRODUCT = "NVIDIA-H100-80GB-HBM3"
TABLE = {
    H100: f"resource=nvidia.com/gpu, gpu-product={PRODUCT}, on-demand=12.29",
    SLICE: f"resource=nvidia.com/mig-3g.40gb, gpu-product={PRODUCT}, on-demand=5.27",
}


def shapes(listed: str = f"{H100},{SLICE}") -> tuple[ChosenShape, ...]:
    table, problems = parse_shape_table(TABLE)
    assert problems == ()
    reading = read_shapes({"placement.tidal.dev/shapes": listed}, table)
    assert reading.problems == ()
    return reading.shapes


@dataclass
class Model:
    """One model with shapes, its replicas Ready as soon as asked unless ``stuck``."""

    annotations: dict[str, str] = field(
        default_factory=lambda: {
            "autoscaling.tidal.dev/slo-ttft": "2s",
            "placement.tidal.dev/pending-timeout": "30s",
        }
    )
    policy: PurePolicy = field(
        default_factory=lambda: PurePolicy(cold_start_estimate_s=COLD_START_S)
    )
    listed: tuple[ChosenShape, ...] = field(default_factory=shapes)
    now: float = 0.0
    asks: dict[str, int] = field(default_factory=dict)
    born: dict[str, float] = field(default_factory=dict)  # when each shape's pods were made
    stuck: set[str] = field(default_factory=set)  # shapes whose pods stay Pending
    state: ShapesState = field(default_factory=ShapesState)
    totals: LoadTotals = field(default_factory=LoadTotals)
    own: dict[str, LoadTotals] = field(default_factory=dict)
    follow: bool = True  # the replicas follow the asks (False: they stay as they are)

    def __post_init__(self) -> None:
        # A scaler that starts on a running model takes what runs as the last mix.
        self.state = ShapesState.running(self.asks, self.listed)

    def pods(self, shape: str) -> list[PodFacts]:
        stuck = shape in self.stuck
        return [
            PodFacts(
                name=f"{shape}-{i}",
                capacity_type=CapacityType.ON_DEMAND,
                phase="Pending" if stuck else "Running",
                ready=not stuck,
                created_at=self.born.get(shape, 0.0),
            )
            for i in range(self.asks.get(shape, 0))
        ]

    def step(
        self,
        *,
        requests: float = 0.0,
        prompt: int = 200,
        activation: bool = False,
        seconds: float = 2.0,
        served: dict[str, tuple[float, float]] | None = None,
        over: tuple[float, ...] = (),
    ) -> ShapesOutcome:
        """``served``: per shape, prompt tokens its servers did and requests waiting there."""
        self.now += seconds
        t = self.totals
        was_over = t.prompts_over or (0.0,) * len(over)
        self.totals = LoadTotals(
            arrivals=t.arrivals + requests,
            prompt_tokens=t.prompt_tokens + requests * prompt,
            first_tokens=t.first_tokens + requests,
            prefilled_tokens=t.prefilled_tokens + requests * prompt,
            prompts_over=(
                tuple(a + b for a, b in zip(was_over, over, strict=True)) if over else was_over
            ),
        )
        seen = {}
        for c in self.listed:
            name = c.shape.name
            load = None
            if served is not None and name in served:
                tokens, waiting = served[name]
                was = self.own.get(name, LoadTotals())
                load = self.own[name] = LoadTotals(
                    served_prompt_tokens=was.served_prompt_tokens + tokens,
                    server_waiting=waiting,
                )
            pods = self.pods(name)
            seen[name] = ShapeSeen(ready=sum(p.ready for p in pods), pods=pods, load=load)
        concurrency = requests / seconds
        observation = Observation(
            ready_replicas=sum(s.ready for s in seen.values()),
            spec_replicas=sum(self.asks.values()),
            signals={SignalKind.CONCURRENCY: SignalReading(concurrency, concurrency, fresh=True)},
            demand=Demand(busy=requests > 0, all_sources_fresh=True),
            activation_requested=activation,
            load=self.totals,
        )
        out = decide_shapes(
            policy=self.policy,
            config=self.policy.parse(self.annotations),
            shapes=self.listed,
            base=H100,
            observation=observation,
            seen=seen,
            current=dict(self.asks),
            state=self.state,
            now=self.now,
            now_wall=self.now,
        )
        self.state = out.shapes
        if not self.follow:
            return out
        for name, n in out.asks.items():
            if n > self.asks.get(name, 0):
                self.born[name] = self.now
        self.asks = dict(out.asks)
        return out


def test_a_light_load_runs_on_the_cheap_slice_once_its_history_says_so() -> None:
    model = Model(asks={H100: 1})
    for _ in range(50):  # 100 s: the history is too short to compare shapes on
        out = model.step(requests=4, prompt=500)  # 1,000 prompt tokens/s
        assert out.asks == {H100: 1}
    for _ in range(40):
        out = model.step(requests=4, prompt=500)
    assert dict(out.mix.replicas) == {SLICE: 1}
    assert out.asks == {SLICE: 1}  # the H100 left once the slice was Ready
    assert out.decisions[H100].desired == 1 and out.decisions[SLICE].desired == 1


def test_a_heavy_load_goes_where_each_shape_alone_is_cheapest() -> None:
    model = Model(asks={H100: 2})
    for _ in range(90):
        out = model.step(requests=40, prompt=1_000)  # 20,000 prompt tokens/s
    needs = {name: d.desired for name, d in out.decisions.items()}
    # The slice prefills 3/7 of the H100's rate: it needs about 7/3 as many.
    assert needs[SLICE] >= 2 * needs[H100]
    alone = {H100: 12.29 * needs[H100], SLICE: 5.27 * needs[SLICE]}
    # What runs stays unless a move saves a quarter (SWITCH_SAVING).
    assert out.mix.cost_per_h <= min(alone.values()) / (1 - SWITCH_SAVING) + 1e-9


def test_from_zero_the_base_shape_until_a_history_then_the_cheapest() -> None:
    model = Model()
    out = model.step(activation=True)  # nothing known of the load: what the template is
    assert out.decision.reason is Reason.ACTIVATED
    assert dict(out.mix.replicas) == {H100: 1} and out.decision.desired == 1
    seasoned = Model(asks={SLICE: 1})
    for _ in range(70):
        seasoned.step(requests=1, prompt=500)
    seasoned.now += 7_200.0  # idle, to zero, and woken with a history
    assert seasoned.step().asks == {}
    out = seasoned.step(activation=True)
    assert dict(out.mix.replicas) == {SLICE: 1}


def test_slices_stuck_pending_are_covered_by_an_h100_and_tried_again() -> None:
    model = Model(asks={H100: 1})
    for _ in range(90):
        model.step(requests=4, prompt=500)
    assert model.asks == {SLICE: 1}
    # The slices run out: a new slice replica (the first was lost, say) stays Pending.
    model.stuck.add(SLICE)
    model.born[SLICE] = model.now
    turned = []
    for _ in range(16):  # 32 s: past the 30 s pending-timeout
        out = model.step(requests=4, prompt=500)
        turned += [t.shape for t in out.turns if t.out]
    assert turned == [SLICE]
    assert dict(out.mix.replicas) == {H100: 1} and model.asks == {H100: 1}
    # The slices are free now: the model moves back once the cover has held two
    # minutes (the load that moved it seen to hold), keeping the H100 until the slice
    # is Ready.
    model.stuck.clear()
    for _ in range(55):
        model.step(requests=4, prompt=500)
    assert model.asks == {H100: 1}
    for _ in range(15):
        model.step(requests=4, prompt=500)
    assert model.asks == {SLICE: 1}


def test_each_shape_learns_its_capacity_from_its_own_servers() -> None:
    model = Model(asks={H100: 1, SLICE: 1}, follow=False)
    first = model.step()
    h100 = first.decisions[H100].slo
    slice_ = first.decisions[SLICE].slo
    assert h100 is not None and slice_ is not None
    # The prior: 12,000 prompt tokens/s on the H100 the template is; 3/7 of it on the slice.
    assert h100.capacity_tokens_per_s == 12_000
    assert abs(slice_.capacity_tokens_per_s - 12_000 * 3 / 7) < 1
    # Saturated (ten requests waiting on each), each shape's servers prefill at their
    # own rate: the H100 at 30,000 tokens/s, the slice at 9,000.
    for _ in range(40):
        out = model.step(
            requests=80, prompt=1_000, served={H100: (60_000, 10), SLICE: (18_000, 10)}
        )
    h100, slice_ = out.decisions[H100].slo, out.decisions[SLICE].slo
    assert h100 is not None and slice_ is not None
    assert h100.capacity_learned and slice_.capacity_learned
    assert abs(h100.capacity_tokens_per_s - 30_000) < 300
    assert abs(slice_.capacity_tokens_per_s - 9_000) < 100
    # What the activators weigh each replica by: the learned rates, in the phase that
    # binds the model (prefill here), the largest 1; and each one's reach, the longest
    # prompt it prefills within the 2 s objective.
    assert out.weights[H100] == 1.0
    assert abs(out.weights[SLICE] - 9_000 / 30_000) < 0.02
    h100_reach, slice_reach = out.limits[H100], out.limits[SLICE]
    assert h100_reach is not None and slice_reach is not None
    assert abs(h100_reach / slice_reach - 30_000 / 9_000) < 0.2


def test_prompts_a_slice_cannot_prefill_in_time_keep_an_h100() -> None:
    # A slice prefills ~5,100 tokens/s: 10,000 in 2 s; an H100 24,000. A fifth of the
    # prompts are over 10,000 tokens (and under 20,000).
    model = Model(asks={H100: 1})
    for _ in range(60):
        out = model.step(requests=4, prompt=3_000, over=(4, 4, 4, 0.8, 0, 0, 0, 0))
    slice_ = out.decisions[SLICE].slo
    assert slice_ is not None and slice_.hopeless_share > 0.15
    assert H100 in out.mix.replicas


def test_the_decision_is_named_by_the_direction_of_the_total() -> None:
    model = Model(asks={SLICE: 1})
    out = model.step(requests=4, prompt=500)
    assert out.decision.desired == 1 and out.decision.reason is Reason.STEADY
    assert "1 x mig-3g.40gb" in out.decision.message
    for _ in range(10):
        out = model.step(requests=60, prompt=1_000)
        if out.decision.desired > 1:
            break
    assert out.decision.reason is Reason.SCALED_UP
    rare = Model(asks={SLICE: 1})
    rare.step(requests=1, prompt=500)
    rare.now += 7_200.0
    out = rare.step()
    assert out.decision.reason is Reason.SCALED_TO_ZERO and out.asks == {}


def test_a_shape_held_at_its_count_takes_its_correction_once() -> None:
    # A rising load (the policy keeps a shape's count while the load rises), then the
    # H100s' servers found short: a correction of 2. It doubles the H100s once: the
    # count the H100's policy keeps is the one it sized, not the doubled one (which,
    # kept and doubled again at each decision, went 4, 8, 16 and flipped the mix).
    model = Model(asks={H100: 2})
    for i in range(20):
        model.step(requests=10 + i, prompt=1_000)
    model.state = replace(model.state, corrections={H100: Correction(2.0, model.now)})
    for i in range(20, 40):
        out = model.step(requests=10 + i, prompt=1_000)
        kept = out.decisions[H100].desired
        assert kept <= 4 and out.needs[H100] == 2 * kept
        assert dict(out.mix.replicas) == {H100: 2 * kept}
