"""The error every reader of a Deployment's annotations raises: every bad key, named at once.

:class:`InvalidAnnotation` holds one :class:`AnnotationProblem` per bad
value (its key, the value, what is allowed), so the controller's
``InvalidAnnotation`` Event names each bad key at once and the user fixes
them in one round. The scaling config (:mod:`scaler.policy.annotations`)
and the GPU shapes' declarations (:mod:`scaler.policy.shapes.declarations`)
raise it alike; what counts as a bad value of a key both services read is
:mod:`groundwork.rules`'.
"""

from __future__ import annotations

from groundwork.rules.annotation_keys import Problem as AnnotationProblem

__all__ = ["AnnotationProblem", "InvalidAnnotation"]


class InvalidAnnotation(ValueError):
    """One or more annotations are invalid; the message names each key, value and what is allowed.

    ``InvalidAnnotation(key, value, allowed)`` builds one with a single
    problem; :meth:`from_problems` one with several. ``key``, ``value`` and
    ``allowed`` are those of the first problem; ``problems`` holds them all.
    """

    problems: tuple[AnnotationProblem, ...]

    def __init__(
        self,
        key: str,
        value: str,
        allowed: str,
        *,
        unsupported: bool = False,
        more: tuple[AnnotationProblem, ...] = (),
    ) -> None:
        self.problems = (AnnotationProblem(key, value, allowed, unsupported), *more)
        super().__init__("; ".join(str(p) for p in self.problems))

    @classmethod
    def from_problems(cls, problems: tuple[AnnotationProblem, ...]) -> InvalidAnnotation:
        if not problems:
            raise ValueError("InvalidAnnotation needs at least one problem")
        first, *more = problems
        return cls(
            first.key,
            first.value,
            first.allowed,
            unsupported=first.unsupported,
            more=tuple(more),
        )

    @property
    def key(self) -> str:
        return self.problems[0].key

    @property
    def value(self) -> str:
        return self.problems[0].value

    @property
    def allowed(self) -> str:
        return self.problems[0].allowed

    @property
    def keys(self) -> tuple[str, ...]:
        """Every bad key, in the order found."""
        return tuple(p.key for p in self.problems)
