"""HTML that escapes by default: `Html`, MarkupSafe's `Markup` whose escape is the pages' own.

Markup is text already HTML. Whatever goes into it — through `format`, `join`, `+` or `%` — is
escaped unless it is Markup itself, so a value a page forgets to escape is escaped anyway, and
only a literal written in the code (or a string a function vouches for, marked so) is HTML.

The escape is `html.escape(flat(value))`: on one line without a control or format character
(stored_text.flat: a page printed by `retrod report --format html` reaches a terminal, and a
bidirectional override would reorder what the page shows), then `&`, `<`, `>`, `"` and `'` as
entities (the standard library's forms, which the pages have always written).
"""

from __future__ import annotations

import html
from typing import Any

from markupsafe import Markup

from ..basics.stored_text import flat


class Html(Markup):
    __slots__ = ()

    @classmethod
    def escape(cls, s: Any, /) -> Html:
        if hasattr(s, "__html__"):
            return cls(s.__html__())
        return cls(html.escape(flat(s)))

    def format(self, *args: Any, **kwargs: Any) -> Html:
        # A missing value shows as nothing, as e(None) does, never as the text "None" (MarkupSafe's
        # formatter writes str(None) before escaping it).
        return super().format(*("" if a is None else a for a in args),
                              **{k: "" if v is None else v for k, v in kwargs.items()})


def e(value: object) -> Html:
    """A text as HTML, escaped (Html.escape)."""
    return Html.escape(value)
