"""Syntax highlighting with pygments (its WGSL and Python lexers) in a QSyntaxHighlighter.

The whole document is lexed once per change (a kernel is a few hundred lines: well under a
millisecond of lexing) and each block takes its slice of the token stream. A block's state is a
hash of its formats, so Qt keeps re-highlighting downwards exactly as far as a change reaches
(an opened docstring or block comment recolours the lines after it).

The token colours are a pygments style's: ``friendly`` on a light palette, ``lightbulb`` on a dark
one (every one of its colours keeps ≥ 4.5:1 on the dark base; friendly's keywords and names would
fall to 1–2.6:1 there). ``set_palette`` switches between them when the palette changes.
"""
from __future__ import annotations

from functools import lru_cache

from pygments.lexers import get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.token import Token
from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat

STYLES = ("friendly", "lightbulb")        # (on a light palette, on a dark one)
STYLE = STYLES[0]


@lru_cache(maxsize=None)
def _format_for(ttype, style_name: str = STYLE) -> QTextCharFormat | None:
    style = get_style_by_name(style_name)
    while ttype not in style._styles and ttype.parent is not None:  # pygments' own table
        ttype = ttype.parent
    s = style.style_for_token(ttype)
    if not (s["color"] or s["bold"] or s["italic"]):
        return None
    f = QTextCharFormat()
    if s["color"]:
        f.setForeground(QColor("#" + s["color"]))    # the pygments style's own table (light or dark, above)
    if s["bold"]:
        f.setFontWeight(QFont.Weight.Bold)
    if s["italic"]:
        f.setFontItalic(True)
    return f


class PygmentsHighlighter(QSyntaxHighlighter):
    def __init__(self, document, language: str):
        super().__init__(document)
        self.lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False)
        self.language = language
        from .style import is_dark
        self.style_name = STYLES[is_dark()]
        self._text: str | None = None
        self._spans: dict[int, list[tuple[int, int, object]]] = {}

    def _lex(self) -> None:
        doc = self.document()
        text = doc.toPlainText()
        if text == self._text:
            return
        self._text = text
        starts, spans = [], {}
        block = doc.begin()
        while block.isValid():
            starts.append(block.position())
            block = block.next()
        bi = 0
        for start, ttype, value in self.lexer.get_tokens_unprocessed(text):
            end = start + len(value)
            while start < end:
                while bi + 1 < len(starts) and starts[bi + 1] <= start:
                    bi += 1
                block_end = starts[bi + 1] - 1 if bi + 1 < len(starts) else len(text)
                piece_end = min(end, block_end)
                if piece_end > start and ttype not in (Token.Text, Token.Text.Whitespace):
                    spans.setdefault(bi, []).append((start - starts[bi], piece_end - start, ttype))
                start = max(piece_end, start)
                if start == block_end:
                    start += 1  # the newline between blocks belongs to neither
        self._spans = spans

    def set_palette(self, palette) -> bool:
        """Take the style for ``palette`` (light or dark); re-highlights and returns True when it changed."""
        from .style import is_dark
        name = STYLES[is_dark(palette)]
        if name == self.style_name:
            return False
        self.style_name = name
        self.rehighlight()
        return True

    def highlightBlock(self, text: str) -> None:  # Qt's name
        self._lex()
        n = self.currentBlock().blockNumber()
        spans = self._spans.get(n, [])
        for start, length, ttype in spans:
            fmt = _format_for(ttype, self.style_name)
            if fmt is not None:
                self.setFormat(start, length, fmt)
        self.setCurrentBlockState(hash(tuple((s, ln, str(t)) for s, ln, t in spans)) & 0x3FFFFFFF)
