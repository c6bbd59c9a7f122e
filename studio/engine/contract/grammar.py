"""The grammars in resources/grammars: cached LALR parsers, and lark's errors turned into
StudioErrors that point at the offending token in the user's file."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Callable, TypeVar

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput

from ..errors import StudioError
from ..resources import GRAMMARS

_FRIENDLY = {"NAME": "a name", "INT": "an integer", "FLOAT": "a decimal number", "STRING": "a quoted string",
             "CMP": "a comparison (<=, <, >=, >, ==, !=)",
             "OPREF": "an op id (namespace/author/name@version)", "_NL": "a new line", "$END": "the end of the text"}
T = TypeVar("T")


@dataclass(frozen=True)
class Source:
    """A text that starts at (line, col) of file, both 1-based (e.g. a string inside op.toml)."""
    text: str
    file: str | None = None
    line: int = 1
    col: int = 1

    def at(self, line: int, col: int) -> tuple[int, int]:
        """A (line, col) of the text as a (line, col) of the file."""
        return self.line + line - 1, col + (self.col - 1 if line == 1 else 0)

    def pos(self, tok: Token) -> tuple[int, int]:
        return self.at(tok.line, tok.column)

    def error(self, message: str, at: Token | tuple[int, int], hint: str, field: str | None = None) -> StudioError:
        """at: a token of this text, or a (line, col) already in file coordinates."""
        line, col = self.pos(at) if isinstance(at, Token) else at
        return StudioError(message, file=self.file, line=line, col=col, field=field, hint=hint)


# WGSL (wgsl.lark) lexes by parser state, so `>>` closes two template lists where only `>` fits, and
# keeps every token: its static checks read operators and brackets too (docs/grammars.md, "WGSL").
_OPTIONS = {"wgsl": {"lexer": "contextual", "keep_all_tokens": True}}


@cache
def parser(name: str) -> Lark:
    # The basic lexer makes keywords reserved words: 'vjpx' is a name, never 'vjp' then 'x'.
    options = {"lexer": "basic", **_OPTIONS.get(name, {})}
    return Lark.open(str(GRAMMARS / f"{name}.lark"), parser="lalr", propagate_positions=True, **options)


def parse(name: str, src: Source, build: Callable[[Tree], T], example: str,
          explain: Callable[[UnexpectedInput], StudioError | None] | None = None) -> T:
    """Parse src with grammar `name` and build the result; every failure is a StudioError.
    example: a valid text shown in the hint of a syntax error. explain: a grammar's own words
    for a syntax error it recognizes (None: the generic 'unexpected ...; expected ...')."""
    if not isinstance(src.text, str):
        raise StudioError(f"expected text, got {type(src.text).__name__}", file=src.file, line=src.line,
                          col=src.col, hint=f"write it as a string, e.g. {example}")
    p = parser(name)
    try:
        return build(p.parse(src.text))
    except StudioError:
        raise
    except UnexpectedInput as e:
        raise (explain and explain(e)) or _syntax_error(p, src, e, example) from None
    except Exception as e:  # absurd nesting (RecursionError), or a bug: still a StudioError, cause kept
        why = "it nests too deeply" if isinstance(e, RecursionError) else f"{type(e).__name__}: {e}"
        raise src.error(f"cannot read this text: {why}", src.at(1, 1), f"simplify it, e.g. {example}") from e


def _syntax_error(p: Lark, src: Source, e: UnexpectedInput, example: str) -> StudioError:
    ip = getattr(e, "interactive_parser", None)  # accepts(): the tokens that truly fit here
    expected = ip.accepts() if ip is not None else getattr(e, "expected", None) or set()
    token = getattr(e, "token", None)
    if isinstance(e, UnexpectedCharacters):
        what, at = f"character {src.text[e.pos_in_stream]!r}", (e.line, e.column)
    elif token is None or token.type == "$END":  # point just past the last thing written
        body = src.text.rstrip()
        what, at = "end of text", (body.count("\n") + 1, len(body) - body.rfind("\n"))
    else:
        what, at = ("a new line" if token.type == "_NL" else repr(str(token))), (token.line, token.column)
    names = sorted({_describe(p, t) for t in expected})
    hint = f"a valid example: {example}"
    if token is not None and token.type != "NAME" and str(token).isidentifier() and "a name" in names:
        hint = f"'{token}' is a reserved word here; choose another name"
    if names:
        what += f"; expected {' or '.join(names)}" if len(names) < 3 else f"; expected one of {', '.join(names)}"
    return src.error(f"unexpected {what}", src.at(*at), hint)


def _describe(p: Lark, terminal: str) -> str:
    name = terminal.removeprefix("expr__")
    if name in _FRIENDLY:
        return _FRIENDLY[name]
    pattern = p.get_terminal(terminal).pattern
    return f"'{pattern.value}'" if pattern.type == "str" else name.lower()
