"""The Cluster tab's tables as a person reads them: each row's cells by column, as text, and
the message of a table's error row."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import unescape
from html.parser import HTMLParser


@dataclass
class Row:
    name: str
    cells: dict[str, str] = field(default_factory=dict)  # column key -> visible text


class _Rows(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[Row] = []
        self._column: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr" and "data-name" in found:
            self.rows.append(Row(found["data-name"] or ""))
        elif tag == "td" and "data-col" in found and self.rows:
            self._column, self._text = found["data-col"], []

    def handle_data(self, data: str) -> None:
        if self._column is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._column is not None:
            self.rows[-1].cells[self._column] = " ".join("".join(self._text).split())
            self._column = None


def rows(html: str) -> list[Row]:
    """The rows of a table's HTML (or of one row, as a live update carries it)."""
    parser = _Rows()
    parser.feed(html)
    return parser.rows


def section(page: str, resource: str) -> str:
    """One resource's table on the page."""
    match = re.search(rf'<section class="k8s-section[^"]*" id="{resource}".*?</section>', page,
                      re.S)
    assert match, f"no {resource} table on the page"
    return match.group(0)


def error_message(table: str) -> str | None:
    """What the table's error row says, or None while it is hidden."""
    match = re.search(r'<tr class="error-row"\s*(hidden)?>.*?<span class="message">(.*?)</span>',
                      table, re.S)
    assert match, "no error row"
    return None if match.group(1) else unescape(match.group(2))
