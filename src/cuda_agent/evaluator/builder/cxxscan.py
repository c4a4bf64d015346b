"""A small C++ token scanner: the names a source uses, the names a header declares.

Two questions drive the light header set (``light.py``):

* which names does a candidate's source *use*? (``used_names``: every identifier outside
  comments, strings and ``#include`` lines that is not a member access, i.e. not right after
  ``.`` or ``->``; macro names in ``#if``/``#ifdef`` lines count);
* which names does a header *declare* at namespace scope? (``declared_names``: classes, enums
  and unscoped enumerators, typedefs and aliases, functions, variables, macros), read from
  ``g++ -E -dD`` output so that declarations made by macro expansion are seen, and attributed
  to the file the preprocessor's line markers name.

This is not a C++ parser. Both answers over-approximate: a name that merely looks declared
is reported as declared, which can only make the light header set larger (slower, never
different). Class members, function bodies and parameter names are skipped, since lookup of
a name written in a candidate's code never finds them without naming their class first.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

TOKEN = re.compile(
    r"""[A-Za-z_]\w*                           # identifier
      | (?:u8|[uUL])?"(?:\\.|[^"\\\n])*"       # string literal
      | (?:u8|[uUL])?'(?:\\.|[^'\\\n])*'       # character literal
      | \d[\w.']*                              # number
      | ::|->|[{}()\[\];,=<>.*&~]              # punctuation we look at
    """,
    re.X,
)
LINE_MARKER = re.compile(r'^#\s*(?:line\s+)?\d+\s+"((?:\\.|[^"\\])*)"')
DEFINE = re.compile(r"^#\s*define\s+([A-Za-z_]\w*)")
BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
LINE_COMMENT = re.compile(r"//[^\n]*")
RAW_STRING = re.compile(r'R"([^(\s]{0,16})\((?:.|\n)*?\)\1"')
CONTINUATION = re.compile(r"\\\n")
INCLUDE_LINE = re.compile(
    r"^\s*#\s*(?:include|include_next|import|pragma|error|warning)\b.*$", re.M
)

_KEYWORD_TEXT = """
    alignas alignof asm auto bool break case catch char char8_t char16_t char32_t class
    co_await co_return co_yield concept const consteval constexpr constinit const_cast continue
    decltype default delete do double dynamic_cast else enum explicit export extern false float
    for friend goto if inline int long mutable namespace new noexcept nullptr operator private
    protected public register reinterpret_cast requires return short signed sizeof static
    static_assert static_cast struct switch template this thread_local throw true try typedef
    typeid typename union unsigned using virtual void volatile wchar_t while final override
    __attribute__ __asm__ __asm __declspec __extension__ __inline __inline__ __restrict
    __restrict__ __typeof__ __typeof __alignof__ __const __volatile__ __thread __int128
    __builtin_va_list _Pragma __decltype"""
KEYWORDS = frozenset(_KEYWORD_TEXT.split())
CLASS_KEYS = frozenset({"class", "struct", "union"})


def strip_comments(text: str) -> str:
    """Remove comments, raw strings and line continuations (newlines are kept)."""
    text = CONTINUATION.sub("", text)
    text = RAW_STRING.sub('""', text)
    text = BLOCK_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return LINE_COMMENT.sub("", text)


def used_names(source: str) -> tuple[frozenset[str], frozenset[str]]:
    """Identifiers a source refers to by name, and those it only ever writes before ``::``.

    Member names (right after ``.`` or ``->``) are not counted: lookup finds them in their
    class. A name written only as ``name::`` can only be a namespace or a type (C++ looks
    nothing else up there), which lets a caller ignore functions that share it (``at::std``).
    """
    text = INCLUDE_LINE.sub("", strip_comments(source))
    names: set[str] = set()
    elsewhere: set[str] = set()
    pending = ""
    previous = ""
    for match in TOKEN.finditer(text):
        tok = match.group(0)
        if pending and tok != "::":
            elsewhere.add(pending)
        pending = ""
        if _is_identifier(tok) and previous not in (".", "->") and tok not in KEYWORDS:
            names.add(tok)
            pending = tok
        previous = tok
    if pending:
        elsewhere.add(pending)
    return frozenset(names), frozenset(names - elsewhere)


def _is_identifier(tok: str) -> bool:
    if not tok:
        return False
    first = tok[0]
    return (first.isalpha() or first == "_") and '"' not in tok and "'" not in tok


class DeclarationScanner:
    """Feed preprocessed lines (``g++ -E -dD``); collects namespace-scope names per file."""

    def __init__(self) -> None:
        self.names: dict[str, set[tuple[str, str]]] = {}  # file -> {(namespace, name)}
        self.order: list[str] = []  # files in order of first appearance
        self.parents: dict[str, str] = {}  # file -> the file that first included it
        self._file = ""
        self._stack: list[str] = []  # "ns", "class", "block", "enum"
        self._namespaces: list[str] = []  # innermost named namespace per open "ns" brace
        self.macros: dict[str, set[str]] = {}  # macro -> identifiers of its definition(s)
        self._parens = 0
        self.namespace_names: set[str] = set()
        self._stmt: list[str] = []
        self._enum_expect = False

    def feed(self, text: str) -> None:
        for line in text.splitlines():
            if line.startswith("#"):
                self._directive(line)
            elif line.strip():
                for match in TOKEN.finditer(line):
                    self._token(match.group(0))

    # -- preprocessor lines -------------------------------------------------------------

    def _directive(self, line: str) -> None:
        marker = LINE_MARKER.match(line)
        if marker:
            name = marker.group(1)
            flags = line[marker.end() :].split()
            if "1" in flags and name not in self.names:
                self.parents[name] = self._file
            self._enter(name)
            return
        define = DEFINE.match(line)
        if define:
            name = define.group(1)
            self._record(name, macro=True)
            body = self.macros.setdefault(name, set())
            start = define.end()
            params: set[str] = set()
            if line[start : start + 1] == "(":
                close = line.find(")", start)
                params = set(re.findall(r"[A-Za-z_]\w*", line[start:close]))
                start = close + 1
            for match in TOKEN.finditer(line, start):
                tok = match.group(0)
                wanted = _is_identifier(tok) and tok not in KEYWORDS and tok != name
                if wanted and tok not in params and tok != "__VA_ARGS__":
                    body.add(tok)

    def _enter(self, name: str) -> None:
        self._file = name
        if name not in self.names:
            self.names[name] = set()
            self.order.append(name)

    def _record(self, name: str, *, macro: bool = False) -> None:
        if name and name not in KEYWORDS and self._file:
            namespace = "" if macro or not self._namespaces else self._namespaces[-1]
            self.names.setdefault(self._file, set()).add((namespace, name))

    # -- declarations ---------------------------------------------------------------------

    def _token(self, tok: str) -> None:
        top = self._stack[-1] if self._stack else "ns"
        if top in ("class", "block"):
            if tok == "{":
                self._stack.append("block")
            elif tok == "}":
                self._stack.pop()
            return
        if top == "enum":
            self._enum_token(tok)
            return
        if tok in ("(", "["):
            self._parens += 1
        elif tok in (")", "]"):
            self._parens = max(0, self._parens - 1)
        if self._parens and tok not in ("(", "[", ")", "]"):
            self._stmt.append(tok)  # braces inside parentheses: default arguments, lambdas
        elif tok == ";":
            self._declare(self._stmt, final=True)
            self._stmt = []
        elif tok == "{":
            self._open_brace()
        elif tok == "}":
            if self._stack:
                self._stack.pop()
                self._namespaces.pop()
            self._stmt = []
        else:
            self._stmt.append(tok)

    def _enum_token(self, tok: str) -> None:
        if tok == "}":
            self._stack.pop()
            self._stmt = []
        elif tok == "{":
            self._stack.append("block")
        elif tok == ",":
            self._enum_expect = True
        elif self._enum_expect and _is_identifier(tok) and tok not in KEYWORDS:
            self._record(tok)
            self._enum_expect = False
        else:
            self._enum_expect = False

    def _open_brace(self) -> None:
        stmt = _strip_attributes(_strip_templates(self._stmt))
        self._stmt = []
        if not stmt or stmt[0] == "namespace" or stmt[:2] == ["inline", "namespace"]:
            self._open_namespace(stmt)
            return
        if stmt[0] == "extern" and len(stmt) == 2 and stmt[1].startswith('"'):
            self._open_namespace([])
            return
        head = _before_top_level(stmt, ("=", "("))
        key = next((t for t in head if t in CLASS_KEYS or t == "enum"), None)
        if key is not None:
            index = head.index(key)
            name = _tag_name(head[index + 1 :])
            self._record(name)
            scoped = key in CLASS_KEYS or (index + 1 < len(head) and head[index + 1] in CLASS_KEYS)
            if key == "enum" and not scoped:
                self._stack.append("enum")
                self._enum_expect = True
            else:
                self._stack.append("class")
            return
        self._declare(stmt, final=False)
        self._stack.append("block")

    def _open_namespace(self, stmt: list[str]) -> None:
        """``namespace a::b {`` -> "b"; inline, anonymous and ``extern "C"`` keep the parent."""
        parent = self._namespaces[-1] if self._namespaces else ""
        named = [t for t in stmt if _is_identifier(t) and t not in KEYWORDS]
        inline = "inline" in stmt
        self._stack.append("ns")
        self._namespaces.append(parent if inline or not named else named[-1])
        self.namespace_names.update(named)

    def _declare(self, stmt: list[str], *, final: bool) -> None:
        stmt = _strip_attributes(_strip_templates(stmt))
        if not stmt:
            return
        first = stmt[0]
        if first == "using":
            if len(stmt) >= 3 and stmt[2] == "=":
                self._record(stmt[1])  # an alias (``using N = ...``) is a new name
            return  # ``using ns::N`` re-exports an entity declared elsewhere
        if first == "namespace":
            if len(stmt) >= 2:
                self._record(stmt[1])
            return
        if first in ("static_assert", "asm", "__asm__", "__extension__") and "(" in stmt[:2]:
            return
        if final and len(stmt) == 2 and stmt[0] in CLASS_KEYS:
            return  # ``class X;`` names an entity declared elsewhere; it adds nothing
        for i, tok in enumerate(stmt):
            if tok in CLASS_KEYS or tok == "enum":
                self._record(_tag_name(stmt[i + 1 :]))
        self._declarators(stmt)

    def _declarators(self, stmt: list[str]) -> None:
        """Names declared by one namespace-scope declaration (functions, variables, typedefs).

        A name right before a top-level ``(``, ``[``, ``=``, ``,`` or the end is declared,
        unless qualified (``X::f(`` defines a name declared elsewhere) or part of an
        ``operator`` name; ``(*name)`` declares a function pointer (typedefs).
        """
        depth = angle = 0
        window = ["", "", ""]  # the three tokens before the current one, newest last
        for tok in stmt:
            before, previous = window[-2], window[-1]
            declared = _is_identifier(previous) and before not in ("::", "operator")
            declared = declared and not before.startswith('"')
            if tok in ("(", "["):
                if depth == 0 and angle == 0 and declared:
                    self._record(previous)
                depth += 1
            elif tok in (")", "]"):
                if depth == 1 and before == "*" and window[-3] == "(" and declared:
                    self._record(previous)  # typedef void (*name)(...)
                depth = max(0, depth - 1)
            elif depth == 0 and tok == "<":
                angle += 1
            elif depth == 0 and tok == ">":
                angle = max(0, angle - 1)
            elif depth == 0 and angle == 0 and tok in ("=", ","):
                if declared:
                    self._record(previous)
                if tok == "=":
                    return
            window = [*window[1:], tok]
        before, previous = window[-2], window[-1]
        if depth == 0 and _is_identifier(previous) and before not in ("::", "operator"):
            self._record(previous)


def _strip_templates(stmt: list[str]) -> list[str]:
    """Drop leading ``template <...>`` headers (and ``extern template``)."""
    i = 0
    while i < len(stmt) and stmt[i] in ("template", "extern", "export") and i + 1 < len(stmt):
        if stmt[i] != "template":
            if stmt[i + 1] != "template":
                break
            i += 1
            continue
        if stmt[i + 1] != "<":
            i += 1
            continue
        depth = 0
        j = i + 1
        while j < len(stmt):
            if stmt[j] == "<":
                depth += 1
            elif stmt[j] == ">":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        i = j + 1
    return stmt[i:]


def _strip_attributes(stmt: list[str]) -> list[str]:
    """Drop ``__attribute__((...))``, ``alignas(...)``, ``__declspec(...)`` and ``[[...]]``."""
    out: list[str] = []
    i = 0
    while i < len(stmt):
        tok = stmt[i]
        opener = {"__attribute__": "(", "alignas": "(", "__declspec": "(", "[": "["}.get(tok)
        if opener and i + 1 < len(stmt) and stmt[i + 1] == opener:
            if tok == "[" and stmt[i + 1] != "[":
                out.append(tok)
                i += 1
                continue
            closer = ")" if opener == "(" else "]"
            depth = 0
            j = i + 1
            while j < len(stmt):
                if stmt[j] == opener:
                    depth += 1
                elif stmt[j] == closer:
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            i = j + 1
            continue
        out.append(tok)
        i += 1
    return out


def _before_top_level(stmt: list[str], stops: tuple[str, ...]) -> list[str]:
    out = []
    for tok in stmt:
        if tok in stops:
            break
        out.append(tok)
    return out


def _tag_name(rest: list[str]) -> str:
    """The name after ``class``/``struct``/``enum [class]``, skipping attributes."""
    depth = 0
    for tok in rest:
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
        elif depth == 0 and _is_identifier(tok) and tok not in KEYWORDS:
            return tok
        elif depth == 0 and tok in (":", "{", ";", "<"):
            return ""
    return ""


def _last_identifier(stmt: list[str]) -> str:
    for tok in reversed(stmt):
        if _is_identifier(tok) and tok not in KEYWORDS:
            return tok
    return ""


def identifiers(text: str) -> Iterator[str]:
    """Every identifier token of ``text`` (comments and strings excluded)."""
    for match in TOKEN.finditer(strip_comments(text)):
        tok = match.group(0)
        if _is_identifier(tok):
            yield tok
