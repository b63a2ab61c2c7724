"""ctx.section(): a part of a fiber's stack that unwinds in its own place, as one entry."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from tests.helpers.support import P, rec
from trio_agents.cancel import current_cause
from trio_agents.kernel import Context, FiberClosedError, open_root
from trio_agents.kernel._context import current_context


async def note(log: list[str], name: str) -> None:
    log.append(name)


async def empty(ctx: Context, config: None) -> None:
    pass


async def test_what_is_added_to_a_section_later_unwinds_in_the_sections_place() -> None:
    log: list[str] = []
    holder: list[Context] = []

    async def apply(ctx: Context, config: None) -> None:
        ctx.defer(note, log, "before")
        holder.append(ctx.section("s"))
        ctx.defer(note, log, "after")

    async with open_root() as root:
        fiber = await root.plugin(P("f", apply))
        section = holder[0]
        # Added after the "after" entry, yet unwound before "before" and after "after".
        section.defer(note, log, "s1")
        await section.effect(rec(log, "s2"))
        section.defer(note, log, "s3")
        assert fiber.statistics().entries == (
            "defer note",
            "section s",
            "defer note",
        )
        await fiber.dispose()
    assert log == ["enter s2", "after", "s3", "exit s2", "s1", "before"]


async def test_a_sections_tasks_and_child_fibers_are_the_fibers_and_stop_in_its_place() -> None:
    log: list[str] = []
    seen: list[Context] = []

    async def worker(name: str) -> None:
        seen.append(current_context())
        log.append(f"start {name}")
        try:
            await trio.sleep_forever()
        finally:
            log.append(f"stop {name} {current_cause()!r}")

    async def child(ctx: Context, config: None) -> None:
        await ctx.effect(rec(log, "child"))

    async with open_root() as root:
        parent = await root.plugin(P("parent", empty))
        ctx = parent.context
        ctx.defer(note, log, "first")
        section = ctx.section("s")
        ctx.defer(note, log, "last")
        section.start_soon(worker, "w")
        kid = await section.plugin(P("kid", child))
        await trio.testing.wait_all_tasks_blocked()
        assert seen == [section]  # the task runs as the section's context
        assert kid.parent is parent
        assert parent.children == (kid,)
        await parent.dispose()
    assert log == [
        "start w",
        "enter child",
        "last",
        "exit child",
        "stop w DisposedCancel()",
        "first",
    ]


async def test_a_section_takes_nothing_once_it_unwound_even_if_its_fiber_loads_again() -> None:
    """A fiber sent back to ``pending`` (a service it injects left) and applied again has a
    new stack: a section of its previous application refuses what is added to it."""
    sections: list[Context] = []

    async def dependent(ctx: Context, config: None) -> None:
        sections.append(ctx.section("s"))

    async def provider(ctx: Context, config: None) -> None:
        ctx.provide("svc", object())

    async with open_root() as root:
        first = await root.plugin(P("provider", provider))
        fiber = await root.plugin(P("dependent", dependent, inject=("svc",)))
        await first.dispose()
        assert fiber.state.value == "pending"
        await root.plugin(P("provider", provider))
        await trio.testing.wait_all_tasks_blocked()
        assert fiber.state.value == "active"
        assert len(sections) == 2
        with pytest.raises(FiberClosedError, match=r"section of fiber .* is unwinding"):
            sections[0].defer(note, [], "late")
        sections[1].defer(note, [], "fine")  # the new application's section is open


async def test_a_failing_exit_in_a_section_is_reported_and_skips_nothing() -> None:
    log: list[str] = []

    async def boom() -> None:
        raise ValueError("boom")

    async with open_root() as root:
        fiber = await root.plugin(P("f", empty))
        ctx = fiber.context
        ctx.defer(note, log, "outer")
        section = ctx.section("s")
        section.defer(note, log, "inner")
        section.defer(boom)
        with pytest.raises(BaseExceptionGroup) as caught:
            await fiber.dispose()
    assert log == ["inner", "outer"]
    (group,) = caught.value.exceptions
    assert isinstance(group, BaseExceptionGroup)
    assert "section 's'" in str(group)
    assert [type(e) for e in group.exceptions] == [ValueError]


async def test_sections_nest() -> None:
    log: list[str] = []
    async with open_root() as root:
        fiber = await root.plugin(P("f", empty))
        outer = fiber.context.section("outer")
        inner = outer.section("inner")
        outer.defer(note, log, "outer entry")
        inner.defer(note, log, "inner entry")
        await fiber.dispose()
    assert log == ["outer entry", "inner entry"]
