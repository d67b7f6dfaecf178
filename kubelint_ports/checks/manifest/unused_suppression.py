"""unused-suppression: a suppression comment that silences nothing (ruff's RUF100).

What a comment silenced is known only once every other rule has run and the comments are applied,
so this check yields no hit of its own: the engine's suppression step (`suppressions.
apply_suppression_comments`) makes the rule's findings at the comments when its policy is among
the run's rules, with the policy's id, name and severity, as for any check."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kubelint_ports.checks import Hit, register
from kubelint_ports.model import Cluster


@register("unused-suppression")
def unused_suppression(cluster: Cluster, params: Mapping[str, Any]) -> Iterator[Hit]:
    """No hit from the model: the findings are made at the comments, after the other rules ran."""
    return iter(())
