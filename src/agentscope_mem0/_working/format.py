"""What working memory may hold, and how an update changes it.

Three formats, chosen by the options:

- free text (the default): append adds the new text as a new paragraph;
- a Markdown template: the template is the starting content and its headings
  must stay; append puts each section of the new text under the matching
  heading (new headings go at the end);
- a JSON schema (a pydantic model or a JSON Schema dict): the content is a
  JSON object; append merges it into the current one (objects recursively,
  lists without duplicates) and the result is validated.

Every update is validated; an invalid one raises :class:`WorkingContentError`,
whose message tells the model what to fix.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from .._exceptions import ConfigurationError, WorkingContentError

__all__ = [
    "Kind",
    "UpdateMode",
    "WorkingFormat",
    "merge_json",
]

Kind = Literal["text", "markdown", "json"]
UpdateMode = Literal["append", "replace"]

_HEADING = re.compile(r"^#{1,6}[ \t]+\S")


def merge_json(base: Any, extra: Any) -> Any:
    """``extra`` merged into ``base``: objects key by key (recursively), lists
    extended by the items they lack; anything else is replaced by ``extra``."""
    if isinstance(base, dict) and isinstance(extra, dict):
        merged = dict(base)
        for key, value in extra.items():
            merged[key] = merge_json(base[key], value) if key in base else value
        return merged
    if isinstance(base, list) and isinstance(extra, list):
        items = list(base)
        for item in extra:
            if item not in items:
                items.append(item)
        return items
    return extra


def _headings(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if _HEADING.match(line)]


def _sections(text: str) -> list[tuple[str | None, list[str]]]:
    """``text`` cut at its headings: (heading or None for the preamble, body lines)."""
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in text.splitlines():
        if _HEADING.match(line):
            sections.append((line.strip(), []))
        else:
            sections[-1][1].append(line)
    return sections


def _trimmed(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def append_markdown(current: str, addition: str) -> str:
    """``addition`` put into ``current`` section by section.

    Lines under a heading that ``current`` has go at the end of that section;
    sections with a new heading, and text before the first heading, go at the end.
    """
    sections = [(h, _trimmed(body)) for h, body in _sections(current)]
    tail: list[str] = []
    for heading, body in _sections(addition):
        body = _trimmed(body)
        if heading is None:
            tail.extend(body)
            continue
        for index, (existing, lines) in enumerate(sections):
            if existing == heading:
                sections[index] = (existing, [*lines, *body])
                break
        else:
            sections.append((heading, body))
    parts: list[str] = []
    for heading, lines in sections:
        block = "\n".join([heading, *lines] if heading else lines).strip("\n")
        if block:
            parts.append(block)
    if tail:
        parts.append("\n".join(tail))
    return "\n\n".join(parts)


class WorkingFormat:
    """The format of one working memory: its kind, starting content and checks.

    Args:
        template: Markdown the memory starts from; its headings must stay.
        schema: A pydantic model class or a JSON Schema dict the memory's JSON
            object must match after every update.

    Raises:
        ConfigurationError: Both given, a template without headings, or a
            schema that is neither a pydantic model nor a valid JSON Schema.
    """

    def __init__(self, *, template: str | None = None, schema: Any = None) -> None:
        if template is not None and schema is not None:
            raise ConfigurationError(
                "working memory takes a template or a schema, not both; drop one"
            )
        self.template = template
        self._model: Any = None
        self._validator: Any = None
        self.schema_json: dict[str, Any] | None = None
        if template is not None:
            if not isinstance(template, str) or not _headings(template):
                raise ConfigurationError(
                    "the working-memory template must be Markdown with at least one "
                    "heading line such as '## Plan'"
                )
            self.kind: Kind = "markdown"
            self._required = _headings(template)
        elif schema is not None:
            self.kind = "json"
            self._setup_schema(schema)
        else:
            self.kind = "text"

    def _setup_schema(self, schema: Any) -> None:
        from pydantic import BaseModel

        if isinstance(schema, type) and issubclass(schema, BaseModel):
            self._model = schema
            self.schema_json = schema.model_json_schema()
            return
        if not isinstance(schema, dict):
            raise ConfigurationError(
                "the working-memory schema must be a pydantic model class or a JSON "
                f"Schema dict, got {type(schema).__name__}"
            )
        try:
            import jsonschema
        except ImportError as exc:  # pragma: no cover - agentscope depends on it
            raise ConfigurationError(
                "a JSON Schema dict needs the jsonschema package: pip install jsonschema"
            ) from exc
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ConfigurationError(
                f"the working-memory schema is invalid: {exc.message}"
            ) from exc
        if schema.get("type", "object") != "object":
            raise ConfigurationError(
                "the working-memory schema must describe a JSON object ('type': 'object')"
            )
        self._validator = cls(schema)
        self.schema_json = schema

    # -- content ----------------------------------------------------------

    def initial(self) -> str:
        """The content of a memory nobody wrote yet."""
        if self.kind == "markdown":
            return (self.template or "").strip()
        return "{}" if self.kind == "json" else ""

    def is_blank(self, content: str) -> bool:
        """Whether ``content`` holds nothing beyond the starting content."""
        return not content.strip() or content.strip() == self.initial()

    def apply(self, current: str | None, content: Any, mode: UpdateMode) -> str:
        """The memory after writing ``content`` with ``mode`` over ``current``.

        Args:
            current: The stored content; ``None`` or empty for a new memory.
            content: What the model wrote: text, or for a schema a JSON object
                (as a dict or as JSON text).
            mode: ``"append"`` merges into ``current``; ``"replace"`` overwrites.

        Raises:
            WorkingContentError: An unknown mode, empty content, content that
                breaks the template or does not match the schema.
        """
        if mode not in ("append", "replace"):
            raise WorkingContentError(f"mode must be 'append' or 'replace', not {mode!r}")
        base = current if current and current.strip() else self.initial()
        if self.kind == "json":
            return self._apply_json(base, content, mode)
        if not isinstance(content, str):
            raise WorkingContentError("content must be text")
        text = content.strip()
        if not text and mode == "append":
            raise WorkingContentError("content is empty, so nothing was added")
        if self.kind == "text":
            return text if mode == "replace" or not base else f"{base}\n\n{text}"
        result = text if mode == "replace" else append_markdown(base, text)
        present = set(_headings(result))
        missing = [h for h in self._required if h not in present]
        if missing:
            raise WorkingContentError(
                "the working memory must keep the template's headings; missing: "
                + ", ".join(repr(h) for h in missing)
                + ". Rewrite it with every heading, or use mode='append' to add under one."
            )
        return result

    def _apply_json(self, base: str, content: Any, mode: UpdateMode) -> str:
        value = content
        if isinstance(content, str):
            try:
                value = json.loads(content)
            except json.JSONDecodeError as exc:
                raise WorkingContentError(
                    f"content must be a JSON object; it is not valid JSON ({exc.msg} at "
                    f"line {exc.lineno} column {exc.colno})"
                ) from exc
        if not isinstance(value, dict):
            raise WorkingContentError(f"content must be a JSON object, got {type(value).__name__}")
        if mode == "append":
            value = merge_json(json.loads(base), value)
        return json.dumps(self._validate(value), ensure_ascii=False, indent=2)

    def _validate(self, value: dict[str, Any]) -> dict[str, Any]:
        if self._model is not None:
            from pydantic import ValidationError

            try:
                checked: dict[str, Any] = self._model.model_validate(value).model_dump(mode="json")
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors()
                )
                raise WorkingContentError(
                    f"the working memory does not match its schema: {problems}"
                ) from exc
            return checked
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            problems = "; ".join(
                f"{'.'.join(map(str, e.path)) or '(top)'}: {e.message}" for e in errors[:5]
            )
            raise WorkingContentError(f"the working memory does not match its schema: {problems}")
        return value

    def describe(self) -> str:
        """What ``content`` must be, for the tool's description."""
        if self.kind == "text":
            return "Free text."
        if self.kind == "markdown":
            headings = ", ".join(self._required)
            return f"Markdown that keeps the template's headings ({headings})."
        schema = json.dumps(self.schema_json, ensure_ascii=False, separators=(",", ":"))
        return f"A JSON object (as JSON text) matching this JSON Schema: {schema}"
