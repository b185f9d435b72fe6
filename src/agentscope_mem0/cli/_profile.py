"""``agentscope-mem0 profile``: show, edit, refresh or clear a user's profile.

The profile is a record of the working-memory store (see
:mod:`agentscope_mem0._profile.record`): showing, editing and clearing it read
and write that record directly, without mem0 or a model; ``--refresh``
reads the user's current memories and asks the configured chat model
(``chat_model`` in the config, or ``$AGENTSCOPE_MEM0_CHAT_MODEL``), as the
middleware's background refresh does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from .._profile.record import clear_profile, load_profile, save_profile
from .._scope import check_user_id
from ._common import session, store_command, where
from ._exit_codes import NotFoundError, UsageError
from ._working_store import open_working_store

if TYPE_CHECKING:
    from .._working.stores import WorkingRecord
    from ._config import Settings
    from ._output import Output

__all__ = ["PROFILE_MAX_CHARS", "change_profile", "edit_problem", "profile"]

PROFILE_MAX_CHARS = 20_000
"""The longest profile a person may store, in characters: as much as working
memory (the store's other record shown in every note) holds by default."""


def _user(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        check_user_id(value)
    except Exception as exc:
        raise click.BadParameter(str(exc)) from exc
    return value


def edit_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as a profile by hand, or ``None`` when it can."""
    if not text.strip():
        return "the profile's text is empty; to empty the profile, clear it"
    if len(text) > PROFILE_MAX_CHARS:
        return (
            f"the profile's text is {len(text):,} characters and a profile holds at most "
            f"{PROFILE_MAX_CHARS:,}: it is shown in every reply, so keep one short fact a line"
        )
    return None


def change_profile(
    settings: Settings, user: str, *, text: str | None = None, clear: bool = False
) -> WorkingRecord | None:
    """Read a user's profile record, replace it with ``text``, or empty it:
    directly in the working-memory store, without mem0 or a model.

    Args:
        settings: Where the store is.
        user: Whose profile.
        text: The new profile, one fact a line (check it with :func:`edit_problem`).
        clear: Empty the profile instead.

    Returns:
        The record as it is now; ``None`` when there is none (or it was cleared
        and held nothing).
    """
    profiles = open_working_store(settings)
    try:
        if text is not None:
            return save_profile(profiles, user, text)
        if clear:
            return clear_profile(profiles, user)
        return load_profile(profiles, user)
    finally:
        profiles.close()


def _as_json(user: str, record: WorkingRecord | None, **extra: Any) -> dict[str, Any]:
    return {
        "user_id": user,
        "profile": record.content if record is not None else None,
        "version": record.version if record is not None else None,
        "updated_at": record.updated_at if record is not None else None,
        **extra,
    }


@click.command("profile")
@click.argument("user", callback=_user)
@click.option(
    "--edit", "text", default=None, help="Replace the profile with TEXT (one fact a line)."
)
@click.option("--refresh", is_flag=True, help="Distil it again now from the current memories.")
@click.option("--clear", is_flag=True, help="Empty it (it is distilled again after new writes).")
@store_command(reads=True)
def profile(
    *,
    settings: Settings,
    out: Output,
    user: str,
    text: str | None,
    refresh: bool,
    clear: bool,
) -> None:
    """Show a user's profile, or --edit, --refresh or --clear it."""
    if sum([text is not None, refresh, clear]) > 1:
        raise UsageError("give at most one of --edit, --refresh and --clear")
    problem = None if text is None else edit_problem(text)
    if problem is not None:
        raise UsageError(f"--edit: {problem}")
    dropped: list[str] = []
    if refresh:
        chat = _chat_model(settings)
        with session(settings, chat=chat) as (store, run):
            record, dropped = run(_refresh(store, user, chat))
    else:
        record = change_profile(settings, user, text=text, clear=clear)
    if out.as_json:
        out.json(_as_json(user, record, lines_dropped=dropped))
        return
    if clear:
        out.line(f"Cleared the profile of user {user!r}.")
        return
    if record is None or not record.content.strip():
        raise NotFoundError(
            f"no profile for user {user!r} in {where(settings)}; it is written after "
            "new memories when the middleware runs with Parameters(profile=True), or "
            f"by `agentscope-mem0 profile {user} --refresh`"
        )
    out.fields(
        [
            ("profile of", f"user {user!r}"),
            ("as of", record.updated_at),
            ("version", str(record.version)),
        ]
    )
    out.line()
    out.line(record.content)
    if dropped:
        out.line()
        out.note("lines the memories do not support, left out: " + "; ".join(dropped))


def _chat_model(settings: Settings) -> Any:
    from ._models import OFFLINE_NOTE, chat_model_from_spec

    chat = chat_model_from_spec(settings.chat_model)
    if chat.description == OFFLINE_NOTE:
        raise UsageError(
            "--refresh needs a chat model and none is configured: set DASHSCOPE_API_KEY, "
            "OPENAI_API_KEY or OPENAI_BASE_URL, or chat_model in the config"
        )
    return chat


async def _refresh(store: Any, user: str, chat: Any) -> tuple[WorkingRecord | None, list[str]]:
    from .._profile.refresher import ProfileRefresher

    await store.ready()
    profiles = open_working_store(store.settings)
    try:
        done = await ProfileRefresher(store.backend, chat.model, profiles).refresh(user)
    finally:
        profiles.close()
    if done.memories == 0:
        raise NotFoundError(f"user {user!r} has no current memories to distil a profile from")
    return done.record, done.distilled.dropped
