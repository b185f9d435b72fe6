"""The one escaping rule for stored text shown to a model.

A memory is data someone else wrote (a user, an extraction model, an
imported file), and it reaches the model inside this package's own framing:
the memory note's ``<memories>`` block, ``search_memory``'s answer, and any
later path. :func:`escape_text` is the only function that makes such text
safe; every path that shows memory text to a model calls it.

What it neutralises is decided by Unicode's properties of each character
(its general category, its name, its compatibility decomposition), not by a
list of examples, so a look-alike nobody listed is caught all the same:

* **Line structure.** Every kind of line break and other whitespace
  collapses to one space (in ``single_line`` mode), so a memory can neither
  start a line of its own (a fake ``SYSTEM:`` line, a header, a bullet) nor
  end the list it is in.
* **Tags.** ``<`` and ``>`` become ``&lt;`` and ``&gt;``, and so does every
  character drawn like them (:func:`_angle`): whatever decomposes to them
  (full-width, small), opening and closing punctuation named for an angle
  (angle brackets and angle quotation marks of every form: 〈 《 « ‹ ⟨ ⟪ ❮
  ︽ ︿ ...), symbols that are a bare less-/greater-than or a left/right
  arrowhead (≪ ⋘ ⪡ ˂ ...), and the few letters and symbols Unicode's
  confusables data (UTS #39) draws as ``<`` or ``>`` (ᐸ ᐳ ᚲ ...). So no
  memory can open or close ``<memories>`` or write a chat-template token such
  as ``<|im_start|>``. The bracket-style tokens of other templates
  (``[INST]``, ``[/INST]``, ``[SYSTEM_PROMPT]``, ...) are shown in
  parentheses instead.
* **Invisible text.** Removed (:func:`.._unicode.is_invisible`), because a
  model may read it while a person reviewing the text does not see it:
  control, format (``Cf``: zero-width spaces and joiners, bidi controls, the
  BOM, soft hyphens, the TAG characters), surrogate, private-use and
  unassigned code points, and the other default-ignorable ones, which are
  marks or letters drawn as nothing: every variation selector (U+FE00..FE0F,
  the supplement, the Mongolian free ones: sequences of them can spell hidden
  text), the combining grapheme joiner, the Khmer inherent vowels, the Hangul
  fillers, and the blank Braille pattern.

Ordinary text, ``&`` and every script's letters are kept as they are.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from .unicode import is_invisible

__all__ = ["escape_memory", "escape_text"]

# Punctuation that opens or closes and is named for an angle.
_ANGLE_PUNCTUATION = re.compile(r"ANGLE|LESS-THAN|GREATER-THAN")
# Symbols that are a bare angle: "(much/very much/nested ...) less-than",
# "(not) greater-than sign", "left/right arrowhead".
_ANGLE_SYMBOL = re.compile(r"(?:LESS|GREATER)-THAN(?: SIGN)?$|(?:LEFT|RIGHT) ARROWHEAD$")
# Which way a quotation mark or symbol points: the first of these its name says.
_POINTING = re.compile(r"LEFT|LESS|RIGHT|GREATER")
# Letters and symbols drawn as < and > that no property marks: the
# confusables of '<' and '>' in Unicode's UTS #39 data.
_CONFUSABLE_OPEN = frozenset("\u1438\u16b2\U0001d236")
_CONFUSABLE_CLOSE = frozenset("\u1433\U00016f3f\U0001d237")

_WHITESPACE = re.compile(r"\s+")
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_BRACKET_TOKENS = re.compile(
    r"\[\s*(/?)\s*(INST|SYS|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS|"
    r"TOOL_CONTENT|THINK)\s*\]",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=4096)
def _shown(char: str) -> str:
    """What ``char`` becomes: itself, an escape, or nothing."""
    if is_invisible(char):
        return ""
    angle = _angle(char, unicodedata.category(char), unicodedata.name(char, ""))
    return char if angle is None else angle


def _angle(char: str, category: str, name: str) -> str | None:
    """``&lt;``/``&gt;`` when ``char`` is drawn like ``<``/``>``, else ``None``."""
    decomposed = unicodedata.normalize("NFKD", char)
    if "<" in decomposed or ">" in decomposed:
        return decomposed.replace("<", "&lt;").replace(">", "&gt;")
    if char in _CONFUSABLE_OPEN:
        return "&lt;"
    if char in _CONFUSABLE_CLOSE:
        return "&gt;"
    if category in ("Ps", "Pe", "Pi", "Pf"):
        if not _ANGLE_PUNCTUATION.search(name):
            return None
    elif category not in ("Sm", "So", "Sk") or not _ANGLE_SYMBOL.search(name):
        return None
    if category in ("Ps", "Pe"):  # brackets open or close, whichever way they are drawn
        return "&lt;" if category == "Ps" else "&gt;"
    first = _POINTING.search(name)
    return "&lt;" if first is not None and first.group() in ("LEFT", "LESS") else "&gt;"


# Printable ASCII that shows as itself, worked out once: most memories hold
# nothing else and skip the pass character by character (it ran for every
# memory line of every note, on the event loop).
_PLAIN = frozenset(c for c in map(chr, range(0x20, 0x7F)) if c not in "<>" and _shown(c) == c)
_PLAIN_LINES = _PLAIN | {"\n", "\t"}


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
    # str.split() splits on exactly what \s matches: the runs collapsed, the ends cut.
    text = " ".join(text.split()) if single_line else _LINE_BREAKS.sub("\n", text)
    if (_PLAIN if single_line else _PLAIN_LINES).issuperset(text):
        return _BRACKET_TOKENS.sub(r"(\1\2)", text)  # nothing removed: no doubled space
    out: list[str] = []
    for char in text:
        if char == "<":
            out.append("&lt;")
        elif char == ">":
            out.append("&gt;")
        elif char in "\n\t" and not single_line:
            out.append(char)
        else:
            out.append(_shown(char))
    shown = "".join(out)
    escaped = _BRACKET_TOKENS.sub(r"(\1\2)", shown)
    if single_line:
        # Removing invisible characters can leave doubled spaces behind.
        escaped = _WHITESPACE.sub(" ", escaped).strip()
    return escaped


def escape_memory(text: str) -> str:
    """One memory as one safe line: :func:`escape_text` in single-line mode."""
    return escape_text(text, single_line=True)
