"""The one escaping rule for stored text shown to a model.

A memory is data someone else wrote (a user, an extraction model, an
imported file), and it reaches the model inside this package's own framing:
the memory note's ``<memories>`` block, ``search_memory``'s answer, and any
later path. :func:`escape_text` is the only function that makes such text
safe; every path that shows memory text to a model calls it.

What it neutralises, and how:

* **Line structure.** Every kind of line break and other whitespace
  collapses to one space (in ``single_line`` mode), so a memory can neither
  start a line of its own (a fake ``SYSTEM:`` line, a header, a bullet) nor
  end the list it is in.
* **Tags.** ``<`` and ``>`` become ``&lt;`` and ``&gt;``, and so do their
  look-alikes (full-width, small, single guillemets, mathematical and CJK
  angle brackets, ...), so no memory can open or close ``<memories>`` or
  write a chat-template token such as ``<|im_start|>``. The bracket-style
  tokens of other templates (``[INST]``, ``[/INST]``, ``[SYSTEM_PROMPT]``,
  ...) are shown in parentheses instead.
* **Invisible text.** Control characters, format characters (zero-width
  spaces and joiners, bidi embeddings, overrides and isolates, the BOM,
  soft hyphens, the Unicode TAG characters U+E0000..E007F), variation
  selectors beyond the basic sixteen, private-use, unassigned and lone
  surrogate code points, and the Hangul filler letters are removed: a model
  may read them while a person reviewing the text does not see them.

Ordinary text, ``&`` and every script's letters are kept as they are.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["escape_memory", "escape_text"]

# Angle brackets and the glyphs drawn like them; letters of scripts that look
# like them (Canadian syllabics) are left alone.
_OPEN = frozenset("<\uff1c\ufe64\u2039\u2329\u3008\u27e8\u27ea\u02c2\u276c\u276e\u2770\u29fc")
_CLOSE = frozenset(">\uff1e\ufe65\u203a\u232a\u3009\u27e9\u27eb\u02c3\u276d\u276f\u2771\u29fd")
# Invisible letters that are not format characters.
_INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
# Categories dropped: control, format, surrogate, private use, unassigned.
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
_WHITESPACE = re.compile(r"\s+")
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_BRACKET_TOKENS = re.compile(
    r"\[\s*(/?)\s*(INST|SYS|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS|"
    r"TOOL_CONTENT|THINK)\s*\]",
    re.IGNORECASE,
)


def _is_dropped(char: str) -> bool:
    code = ord(char)
    if code < 0x80:
        return code < 0x20 or code == 0x7F
    if char in _INVISIBLE_LETTERS or 0xE0100 <= code <= 0xE01EF:
        return True
    return unicodedata.category(char) in _DROPPED_CATEGORIES


def escape_text(text: str, *, single_line: bool = True) -> str:
    """``text`` made safe to show to a model inside this package's framing.

    Args:
        text: Stored text (a memory, working memory, ...).
        single_line: Collapse all whitespace, line breaks included, to single
            spaces and strip the ends (a memory in a list). ``False`` keeps
            line breaks as ``"\\n"`` (every kind of break becomes one) and
            tabs, for multi-line blocks.

    Returns:
        The escaped text.
    """
    text = _WHITESPACE.sub(" ", text) if single_line else _LINE_BREAKS.sub("\n", text)
    out: list[str] = []
    for char in text:
        if char in "\n\t" and not single_line:
            out.append(char)
        elif char in _OPEN:
            out.append("&lt;")
        elif char in _CLOSE:
            out.append("&gt;")
        elif _is_dropped(char):
            continue
        else:
            out.append(char)
    escaped = _BRACKET_TOKENS.sub(r"(\1\2)", "".join(out))
    if single_line:
        # Removing invisible characters can leave doubled spaces behind.
        escaped = _WHITESPACE.sub(" ", escaped).strip()
    return escaped


def escape_memory(text: str) -> str:
    """One memory as one safe line: :func:`escape_text` in single-line mode."""
    return escape_text(text, single_line=True)
