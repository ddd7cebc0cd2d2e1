"""One model's shape step: from a decision's asks to the Deployments' writes and Events (pure).

After :func:`~scaler.policy.shapes.decide.decide_shapes` says what each
shape asks for, :func:`plan_shapes` says what to write:

- the **user's Deployment** runs the shape its template already is (its
  ask), or nothing when the template is none of the listed shapes;
- each other listed shape runs in its **companion** ``<name>-<shape>``
  (:mod:`scaler.policy.shapes.companion`): created the first time the shape
  is asked for, rebuilt when its template hash differs (the user's template
  or the shape's declaration changed), then scaled to its ask;
- a companion of a shape no longer listed (or of a model whose ``shapes``
  annotation is gone) is deleted once the replicas asked of the others are
  all Ready, so that the model has no gap while they load;
- Events: ``ShapeUnavailable`` (Warning) when a shape is capped,
  ``ShapeRecovered`` when it serves again, ``ShapesChanged`` when the set of
  shapes with replicas changes (a new count on the same shapes is the
  scale's own Event).

Main decision, a companion is never created for a shape at zero: listing
six shapes makes no Deployment until a shape is bought.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from scaler.policy.events import SHAPE_RECOVERED, SHAPE_UNAVAILABLE, SHAPES_CHANGED
from scaler.policy.shapes.availability import Turn
from scaler.policy.shapes.mix import Mix

__all__ = ["CompanionSeen", "ShapePlan", "plan_shapes", "plan_without_shapes"]


@dataclass(frozen=True, slots=True)
class CompanionSeen:
    """A shape's companion as the watch shows it; ``current``: its template hash is
    the one the shape's template has now."""

    spec_replicas: int
    ready_replicas: int
    current: bool


@dataclass(frozen=True, slots=True)
class ShapePlan:
    """What one shape step asks for (see the module docstring).

    ``user_replicas``: the user's Deployment's replicas; ``companions``: each
    companion to scale, to that many (after ``ensure``, the ones to create or
    rebuild); ``delete``: companions to delete; ``events``: ``(reason,
    message, warning)``.
    """

    user_replicas: int
    companions: Mapping[str, int] = field(default_factory=dict)
    ensure: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    events: tuple[tuple[str, str, bool], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "companions", MappingProxyType(dict(self.companions)))

    def needs_writes(self, seen: Mapping[str, CompanionSeen]) -> bool:
        """Whether anything beyond the user's scale is to be written."""
        if self.ensure or self.delete or self.events:
            return True
        return any(
            shape not in seen or seen[shape].spec_replicas != n
            for shape, n in self.companions.items()
        )


def _events(turns: Sequence[Turn], mix: Mix, before: Mix | None) -> list[tuple[str, str, bool]]:
    out = [
        (SHAPE_UNAVAILABLE, f"{t.shape}: {t.why}; the mix is now {mix.why}", True)
        if t.out
        else (SHAPE_RECOVERED, f"{t.shape} serves again ({t.why})", False)
        for t in turns
    ]
    if before is not None and mix.replicas and set(mix.replicas) != set(before.replicas):
        was = before.described if before.replicas else "none"
        out.append((SHAPES_CHANGED, f"now {mix.why} (was {was})", False))
    return out


def plan_shapes(
    *,
    asks: Mapping[str, int],
    listed: Sequence[str],
    template_shape: str | None,
    seen: Mapping[str, CompanionSeen],
    mix: Mix,
    before: Mix | None,
    turns: Sequence[Turn] = (),
    all_ready: bool,
) -> ShapePlan:
    """This step's plan for a model with shapes (module docstring). ``seen``: its
    companions by shape; ``before``: the last step's mix (``None``: the first);
    ``all_ready``: every replica asked of the listed shapes is Ready."""
    companions: dict[str, int] = {}
    ensure: list[str] = []
    for shape in listed:
        if shape == template_shape:
            continue
        n = asks.get(shape, 0)
        have = seen.get(shape)
        if have is None and n == 0:
            continue  # never bought: no Deployment for it
        if have is None or not have.current:
            ensure.append(shape)
        companions[shape] = n
    delete = [
        shape for shape in seen if (shape not in listed or shape == template_shape) and all_ready
    ]
    return ShapePlan(
        user_replicas=asks.get(template_shape, 0) if template_shape is not None else 0,
        companions=companions,
        ensure=tuple(ensure),
        delete=tuple(sorted(delete)),
        events=tuple(_events(turns, mix, before)),
    )


def plan_without_shapes(
    *, desired: int, user_ready: int, seen: Mapping[str, CompanionSeen]
) -> ShapePlan | None:
    """A model with no shapes: ``None`` (today's behaviour), or, where companions of
    shapes it once had remain, their deletion once the user's Deployment serves the
    whole ``desired``."""
    if not seen:
        return None
    delete = tuple(sorted(seen)) if user_ready >= desired else ()
    return ShapePlan(user_replicas=desired, delete=delete)
