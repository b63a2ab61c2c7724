"""``SandboxShell``: the provider of ``shell`` that runs every command under bubblewrap.

Rules:
- It is ``LocalShell``'s executor (:class:`LocalShellExecutor`: the same job table, job ids,
  owner tokens, output bounds and per-job supervisor) with each ``/bin/sh -c`` wrapped in
  ``bwrap``: the whole file system read-only, the command's working directory (the
  workspace) and :attr:`SandboxShell.Config.writable` writable under ``workspace-write``, a
  private ``/tmp``, ``/dev`` and ``/proc``, no network unless ``network``, a new PID namespace
  (when its first process dies the kernel kills every other one), ``--die-with-parent`` and
  ``--new-session`` (no terminal to inject input into).
- ``danger-full-access`` is no sandbox at all: the executor is ``LocalShell``'s, unwrapped.
- A request may ask for a stricter policy (``ShellExecRequest.policy``: a ``read-only``
  agent or mode); the stricter of the two applies, so a request never loosens the sandbox.
- Starting the plugin runs ``bwrap`` once with the same options (``/bin/true``): a missing
  ``bwrap``, or one that cannot create namespaces, fails the start with one line that says
  how to fix it (:class:`SandboxUnavailableError`); there is never a silent fallback to an
  unsandboxed shell.
- A command killed by a signal inside the sandbox reports ``128 + N`` (``bwrap`` relays the
  exit status that way); one the executor kills (``kill``, a timeout) reports ``-15`` or
  ``-9``, as ``LocalShell``'s do.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from typing import Any, final

import attrs
import trio

from ..kernel import Context
from ._child import supervisor_available
from ._errors import ShellError
from ._executor import SHELL
from ._local import LocalShell, LocalShellExecutor
from ._types import SANDBOX_POLICIES, ShellExecSpec

_FIX = "or run without the sandbox (--sandbox danger-full-access)"


class SandboxUnavailableError(ShellError):
    """bubblewrap is missing, or cannot create a sandbox on this machine."""


def stricter(policy: str, asked: str | None) -> str:
    """The stricter of two policies (``asked`` ``None``: ``policy``): read-only before
    workspace-write before danger-full-access."""
    if asked is None:
        return policy
    return min(policy, asked, key=SANDBOX_POLICIES.index)


def _policy(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in SANDBOX_POLICIES:
        raise ValueError(f"{attribute.name} is one of {', '.join(SANDBOX_POLICIES)}; got {value!r}")


def _positive(_: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{attribute.name} must be a positive finite number; got {value!r}")


def bwrap_argv(
    bwrap: str,
    cwd: str,
    *,
    policy: str = "workspace-write",
    writable: tuple[str, ...] = (),
    network: bool = False,
) -> list[str]:
    """The ``bwrap`` command line (up to its ``--``) that runs a command in ``cwd`` under
    ``policy`` (``read-only`` or ``workspace-write``)."""
    argv = [
        bwrap,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--new-session",
    ]  # fmt: skip
    if not network:
        argv.append("--unshare-net")
    # After the private /tmp, so a workspace under /tmp is the real directory, not the tmpfs.
    bind = "--bind" if policy == "workspace-write" else "--ro-bind"
    argv += [bind, cwd, cwd]
    if policy == "workspace-write":
        for path in writable:
            argv += ["--bind", path, path]
    argv += ["--chdir", cwd, "--"]
    return argv


@final
class SandboxShell:
    """The plugin that provides a sandboxed :class:`LocalShellExecutor` as the service
    ``shell`` (in place of :class:`LocalShell`; see docs/shell.rst, "Sandbox")."""

    name = "shell"

    @attrs.frozen
    class Config:
        """The sandbox's policy, and the executor's limits (as :class:`LocalShell`'s).

        Attributes:
            policy: ``read-only``, ``workspace-write`` or ``danger-full-access``.
            writable: directories writable besides the workspace (``workspace-write``).
            network: whether commands may reach the network.
            bwrap: the bubblewrap program (a name looked up on ``PATH``, or a path).
            default_timeout: seconds a foreground run gets when it asks for none.
            max_timeout: the largest timeout a request may ask for.
            output_cap: bytes of unread output kept per process.
            kill_grace: seconds between SIGTERM and SIGKILL.
        """

        policy: str = attrs.field(default="workspace-write", validator=_policy)
        writable: tuple[str, ...] = ()
        network: bool = False
        bwrap: str = "bwrap"
        default_timeout: float = attrs.field(default=120.0, validator=_positive)
        max_timeout: float = attrs.field(default=600.0, validator=_positive)
        output_cap: int = attrs.field(default=1 << 20, validator=_positive)
        kill_grace: float = attrs.field(default=2.0, validator=_positive)

        def limits(self) -> LocalShell.Config:
            """The executor's limits, as ``LocalShell`` takes them."""
            return LocalShell.Config(
                default_timeout=self.default_timeout,
                max_timeout=self.max_timeout,
                output_cap=self.output_cap,
                kill_grace=self.kill_grace,
            )

    async def apply(self, ctx: Context, config: SandboxShell.Config) -> None:
        """Check that bubblewrap works here, then provide the executor.

        Raises:
            SandboxUnavailableError: bubblewrap is missing or cannot make a sandbox.
            ShellError: a ``writable`` directory does not exist.
        """
        limits = config.limits()
        if config.policy == "danger-full-access":
            executor = LocalShellExecutor(ctx, limits)
        else:
            writable = _writable(config)
            bwrap = await _check(config, writable)

            def wrap(spec: ShellExecSpec) -> list[str]:
                return bwrap_argv(
                    bwrap,
                    spec.cwd,
                    policy=stricter(config.policy, spec.policy),
                    writable=writable,
                    network=config.network,
                )

            executor = LocalShellExecutor(ctx, limits, wrap=wrap, sandbox=config.policy)
        ctx.defer(executor.aclose)
        ctx.provide(SHELL, executor)


def _writable(config: SandboxShell.Config) -> tuple[str, ...]:
    """The absolute paths of the writable directories, each checked to exist."""
    for path in config.writable:
        if not os.path.isdir(path):
            raise ShellError(
                f"the sandbox's writable directory {path!r} does not exist; create it or "
                f"remove it from the sandbox's writable list"
            )
    return tuple(os.path.abspath(p) for p in config.writable)


async def _check(config: SandboxShell.Config, writable: tuple[str, ...]) -> str:
    """The path of a ``bwrap`` that can make the sandbox ``config`` asks for."""
    if not supervisor_available():
        raise SandboxUnavailableError(
            f"the {config.policy} sandbox needs Linux (bubblewrap and the job supervisor); {_FIX}"
        )
    bwrap = shutil.which(config.bwrap)
    if bwrap is None:
        raise SandboxUnavailableError(
            f"the {config.policy} sandbox needs bubblewrap, and {config.bwrap!r} was not found; "
            f"install it (Debian and Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
            f"bubblewrap) {_FIX}"
        )
    argv = bwrap_argv(
        bwrap,
        "/",
        policy=config.policy,
        writable=writable,
        network=config.network,
    )
    try:
        done = await trio.run_process(
            [*argv, "/bin/true"],
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    except OSError as exc:
        raise SandboxUnavailableError(
            f"the {config.policy} sandbox cannot start bubblewrap ({bwrap}): {exc}; {_FIX}"
        ) from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = said[-1] if said else f"exit status {done.returncode}"
        raise SandboxUnavailableError(
            f"bubblewrap ({bwrap}) cannot create the {config.policy} sandbox here: {reason}; "
            f"enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
            f"on Ubuntu also kernel.apparmor_restrict_unprivileged_userns=0) {_FIX}"
        )
    return bwrap
