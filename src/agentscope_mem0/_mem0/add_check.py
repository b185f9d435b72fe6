"""Tell "nothing worth keeping" from "mem0 swallowed a failure" in one ``add``.

mem0 2.2's ``AsyncMemory.add`` logs and swallows two failures, returning
fewer memories (or none) as if the model had found nothing: an extraction
answer it cannot parse (prose, truncated JSON) and a fact whose embedding
fails. To see them, the writer runs each ``add`` inside :func:`watch_add`,
which records, for that call only (its :class:`~.call_context.Mem0Call`,
which mem0's worker threads inherit), the extraction answers the
client's LLM returned and the embedding calls that raised. Whatever LLM or
embedder provider the client uses, the check is the same.

mem0 swallows a third failure the same way: a memory its vector store
refused to insert (it retries a refused batch one memory at a time, logs
the ones refused again and returns the rest). The store's ``insert`` is
watched too; a refusal for want of disk space (:class:`DiskFullError`) is
raised as such, so the writer waits for space instead of using up retries.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .._exceptions import DiskFullError, ExtractionFailedError, TransientBackendError
from .call_context import AddSeen, calling, current

__all__ = ["AddWatch", "watch_add"]

_MARK = "_agentscope_mem0_watched"
_INSTALL_LOCK = threading.Lock()


class AddWatch(AddSeen):
    """What happened inside one mem0 ``add`` call, and whether it failed."""

    def failure(self) -> str | None:
        """Why this ``add`` did not store what it should have, or ``None``."""
        for answer in self.answers:
            problem = _unparseable(answer)
            if problem is not None:
                return problem
        if self.embed_errors:
            return (
                f"embedding {len(self.embed_errors)} extracted fact(s) failed inside mem0's "
                f"add ({next(iter(self.embed_errors.values()))}); mem0 skipped them"
            )
        return None

    def raise_if_failed(self) -> None:
        """Raise when mem0 skipped something it should have stored.

        Raises:
            DiskFullError: The store refused a memory for want of disk space.
            TransientBackendError: The store refused a memory otherwise.
            ExtractionFailedError: :meth:`failure` found something.
        """
        self.raise_if_out_of_space()
        if self.insert_errors:
            error = next(iter(self.insert_errors.values()))
            raise TransientBackendError(
                f"the vector store refused {len(self.insert_errors)} memories inside "
                f"mem0's add ({type(error).__name__}: {error}); mem0 skipped them"
            ) from error
        problem = self.failure()
        if problem is not None:
            raise ExtractionFailedError(problem)

    def raise_if_out_of_space(self) -> None:
        """Raise :class:`DiskFullError` when the store refused a memory for want of space."""
        for error in self.insert_errors.values():
            if isinstance(error, DiskFullError):
                raise DiskFullError(str(error)) from error


def _unparseable(answer: Any) -> str | None:
    """Why mem0 keeps less of ``answer`` than it holds (unreadable, items without
    text), or ``None``."""
    from mem0.memory.utils import extract_json, remove_code_blocks

    if not isinstance(answer, str):
        return f"the model's extraction answer is a {type(answer).__name__}, not text"
    text = remove_code_blocks(answer)
    if not text or not text.strip():
        return None  # mem0 2.2 reads an empty answer as "no memories" too
    try:
        try:
            parsed = json.loads(text, strict=False)
        except json.JSONDecodeError:
            parsed = json.loads(extract_json(text), strict=False)
    except (ValueError, TypeError):
        parsed = None
    shown = " ".join(answer.split())
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    if not isinstance(parsed, dict) or not isinstance(parsed.get("memory", None), list):
        return (
            "the model's extraction answer is not mem0's JSON "
            f'{{"memory": [...]}} (mem0 would keep nothing): {shown!r}'
        )
    # mem0 2.2 silently skips an item without a non-empty "text" ({"fact": ...}).
    textless = [item for item in parsed["memory"] if not _has_text(item)]
    if textless:
        return (
            f"{len(textless)} of the {len(parsed['memory'])} memories in the model's "
            'extraction answer have no "text" (mem0 skips them): ' + repr(shown)
        )
    return None


def _has_text(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("text"), str) and bool(item["text"])


def _install(client: Any) -> None:
    """Wrap the client's LLM and embedder once so that watched calls are seen."""
    llm = getattr(client, "llm", None)
    embedder = getattr(client, "embedding_model", None)
    store = getattr(client, "vector_store", None)
    with _INSTALL_LOCK:
        if store is not None and not getattr(store, _MARK, False):
            store.insert = _watch_inserts(store.insert)
            setattr(store, _MARK, True)
        if llm is not None and not getattr(llm, _MARK, False):
            llm.generate_response = _watch_answers(llm.generate_response)
            setattr(llm, _MARK, True)
        if embedder is not None and not getattr(embedder, _MARK, False):
            embedder.embed = _watch_embeds(embedder.embed)
            setattr(embedder, _MARK, True)


def _watch_answers(generate: Callable[..., Any]) -> Callable[..., Any]:
    def generate_response(*args: Any, **kwargs: Any) -> Any:
        answer = generate(*args, **kwargs)
        watch = current().watch
        fmt = kwargs.get("response_format")
        if watch is not None and isinstance(fmt, dict) and fmt.get("type") == "json_object":
            watch.answers.append(answer)
        return answer

    return generate_response


def _watch_embeds(embed: Callable[..., Any]) -> Callable[..., Any]:
    def watched_embed(text: Any, memory_action: str | None = None, *rest: Any, **kw: Any) -> Any:
        watch = current().watch if memory_action == "add" else None
        try:
            vector = embed(text, memory_action, *rest, **kw)
        except Exception as exc:
            if watch is not None:
                watch.embed_errors[str(text)] = f"{type(exc).__name__}: {exc}"
            raise
        if watch is not None:
            watch.embed_errors.pop(str(text), None)
        return vector

    return watched_embed


def _watch_inserts(insert: Callable[..., Any]) -> Callable[..., Any]:
    def watched_insert(*args: Any, **kw: Any) -> Any:
        watch = current().watch
        ids = [str(i) for i in kw.get("ids") or ["?"]]  # mem0 passes them by name
        try:
            result = insert(*args, **kw)
        except Exception as exc:
            if watch is not None:
                watch.insert_errors.update(dict.fromkeys(ids, exc))
            raise
        if watch is not None:
            for memory_id in ids:
                watch.insert_errors.pop(memory_id, None)
        return result

    return watched_insert


@contextlib.contextmanager
def watch_add(client: Any) -> Iterator[AddWatch]:
    """Record what the LLM and embedder of ``client`` do during the ``with`` block."""
    with contextlib.suppress(AttributeError, TypeError):  # a client we cannot wrap: no watch
        _install(client)
    watch = AddWatch()
    with calling(watch=watch):
        yield watch
