"""What a scenario is: a pitfall from the seeds, run twice (the broken variant and
the fix), each half reporting numbers, each with the verdict its numbers support."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Half:
    """One side of a scenario: what ran, the figures it produced, and whether those
    figures show the failure (``failed``)."""

    variant: str
    figures: dict[str, object]
    failed: bool


@dataclass
class Outcome:
    broken: Half
    fixed: Half

    @property
    def as_expected(self) -> bool:
        """The broken variant still breaks and the fix still holds."""
        return self.broken.failed and not self.fixed.failed


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    # Which source article (docs/reference/sources.md), which part; or which project.
    seed: str
    story: str  # what the source says and what you are about to see
    run: Callable[..., Outcome] = field(repr=False)
    needs: tuple[str, ...] = ("redis",)  # servers it talks to


def render(scenario: Scenario, outcome: Outcome) -> str:
    """The side-by-side table a user reads after the run."""
    rows = [("", f"broken: {outcome.broken.variant}", f"fixed: {outcome.fixed.variant}")]
    rows += _figure_rows(outcome)
    rows.append(("shows the failure", "yes" if outcome.broken.failed else "NO",
                 "NO" if not outcome.fixed.failed else "YES (the fix failed)"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    verdict = ("as the source says: broken variant breaks, fix holds" if outcome.as_expected
               else "NOT as expected")
    return "\n".join([*lines, "", f"{scenario.id}: {verdict}"])


def render_markdown(scenario: Scenario, outcome: Outcome) -> str:
    """The same table for the docs: a heading, then figure | broken | fixed."""
    cell = lambda value: _show(value).replace("|", "\\|")  # noqa: E731
    lines = [f"### {scenario.id}: {scenario.title}", "",
             f"| | broken: {cell(outcome.broken.variant)} | fixed: {cell(outcome.fixed.variant)} |",
             "|---|---|---|"]
    lines += [f"| {' | '.join(cell(c) for c in row)} |" for row in _figure_rows(outcome)]
    lines.append(f"| shows the failure | {'yes' if outcome.broken.failed else '**no**'} | "
                 f"{'no' if not outcome.fixed.failed else '**yes** (the fix failed)'} |")
    return "\n".join(lines)


def _figure_rows(outcome: Outcome) -> list[tuple[str, str, str]]:
    """Each figure either half reported: its name, the broken half's, the fixed half's."""
    names = dict.fromkeys([*outcome.broken.figures, *outcome.fixed.figures])
    return [(name, _show(outcome.broken.figures.get(name)), _show(outcome.fixed.figures.get(name)))
            for name in names]


def _show(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)
