"""ACP ``session/list`` lists top-level sessions only, and ``session/delete`` of a parent
takes its children with it (issue 37, item 2)."""

from __future__ import annotations

from tests.helpers.acp_support import serve_bridge
from tests.helpers.children_support import store_a_family
from trio_agents.session import MemoryStore


async def test_session_list_leaves_child_sessions_out() -> None:
    """Of p, its children c1, c2, its grandchild g and the unrelated s: p and s."""
    store = MemoryStore()
    await store_a_family(store)
    async with serve_bridge(store=store) as s:
        await s.client.initialize()
        result = await s.client.call("session/list", {})
        assert sorted(entry["sessionId"] for entry in result["sessions"]) == ["p", "s"]


async def test_session_delete_of_a_parent_deletes_its_children() -> None:
    """session/delete p answers {}; the store then holds s only."""
    store = MemoryStore()
    await store_a_family(store)
    async with serve_bridge(store=store) as s:
        await s.client.initialize()
        assert await s.client.call("session/delete", {"sessionId": "p"}) == {}
        assert [info.id for info in await store.list()] == ["s"]
        result = await s.client.call("session/list", {})
        assert [entry["sessionId"] for entry in result["sessions"]] == ["s"]
