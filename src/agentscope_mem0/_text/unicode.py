"""Which characters are invisible, by their Unicode properties.

Shared by the escaping rule for text shown to a model
(:mod:`._recall.escape`, which removes them) and the id checks
(:mod:`._scope`, which refuses ids holding them: two users whose ids differ
by an invisible character look identical in every listing).
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["is_invisible"]

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
"""Control, format, surrogate, private use, unassigned."""

# The default-ignorable code points outside those categories, by what their
# names say they are (Unicode's Variation_Selector and
# Other_Default_Ignorable_Code_Point properties, which unicodedata does not
# expose: every variation selector, the combining grapheme joiner, the Khmer
# inherent vowels, the Hangul fillers), and the blank Braille cell.
_INVISIBLE_NAME = re.compile(
    r"VARIATION SELECTOR|GRAPHEME JOINER|VOWEL INHERENT|HANGUL (?:\w+ )?FILLER"
    r"|BRAILLE PATTERN BLANK"
)


@functools.lru_cache(maxsize=4096)
def is_invisible(char: str) -> bool:
    """Whether ``char`` is drawn as nothing, or is no character at all.

    Control and format characters (zero-width spaces and joiners, bidi
    controls, the BOM, soft hyphens, TAG characters), surrogates, private-use
    and unassigned code points, and the other default-ignorable code points
    (variation selectors, ...). Whitespace is not invisible: it is seen as space.
    """
    code = ord(char)
    if code < 0x80:
        return code < 0x20 or code == 0x7F
    if unicodedata.category(char) in _INVISIBLE_CATEGORIES:
        return True
    return _INVISIBLE_NAME.search(unicodedata.name(char, "")) is not None
