"""The lexer's keyword recognition: on the host a perfect-hash table (compiler.h, keyword()), on
the GPU a switch on the first letter. Both must name exactly Python's keywords, and a name that
hashes to a keyword's slot must stay a name."""
import keyword
import re
from pathlib import Path

import pytest

from vramgym.compiler import CompileError, compile_source
from vramgym.compiler.frontend import tokenize
from vramgym.vm import execute, opcodes as oc

ROOT = Path(__file__).resolve().parents[1]
SRC = (ROOT / "compiler" / "csrc" / "compiler.h").read_text()
# The host table's rows: {"text", len, TOK_X or 0, reserved index or -1}
HOST = re.findall(r'\{"(\w+)", (\d+), (TOK_\w+|0), (-?\d+)\}', SRC)
KEYWORDS = [text for text, *_ in HOST]


def slot(text: str) -> int:
    """compiler.h's keyword hash (keep the two in step)."""
    b = text.encode()
    second = b[1] if len(b) > 1 else 0
    return (b[0] * 2 + second * 11 + b[-1] * 2 + len(b)) & 127


def test_the_host_table_is_the_switch_and_pythons_keywords():
    switch_kw = dict(re.findall(r'VG_KW\("(\w+)", (TOK_\w+)\)', SRC))
    switch_rk = {text: int(i) for text, i in re.findall(r'VG_RK\("(\w+)", (\d+)\)', SRC)}
    host_kw = {text: tok for text, n, tok, r in HOST if int(r) < 0}
    host_rk = {text: int(r) for text, n, tok, r in HOST if int(r) >= 0}
    assert host_kw == switch_kw
    assert host_rk == switch_rk == {k: i for i, k in enumerate(oc.RESERVED_KEYWORDS)}
    assert all(int(n) == len(text) for text, n, *_ in HOST)
    assert set(KEYWORDS) == set(keyword.kwlist) | {"__debug__"}


def test_the_hash_is_perfect_on_the_keywords():
    # A collision would silently drop a keyword from the table (the later one takes the slot).
    assert len({slot(k) for k in KEYWORDS}) == len(KEYWORDS)


def _near_misses(word: str) -> set[str]:
    out = {word[:-1], word + "x", word.upper(), word.swapcase(), "_" + word, word + "_", word + "1", word[0] + word}
    if len(word) >= 3:  # same first, second and last letters and length: the keyword's own slot
        out.add(word[:2] + "q" * (len(word) - 3) + word[-1] if word[2:-1] != "q" * (len(word) - 3) else word[:2] + "z" * (len(word) - 3) + word[-1])
    return {w for w in out if w.isidentifier() and not keyword.iskeyword(w) and w != "__debug__" and len(w) >= 1}


NEAR = sorted({w for k in KEYWORDS for w in _near_misses(k)} - set(oc.BUILTIN_NAMES) - {"__builtins__"})


def test_near_misses_share_slots_with_keywords():
    # (else the slot test below tests nothing)
    slots = {slot(k) for k in KEYWORDS}
    assert sum(slot(w) in slots and len(w) == len(k) and slot(w) == slot(k) for w in NEAR for k in KEYWORDS) >= 20


@pytest.mark.parametrize("name", NEAR)
def test_a_near_miss_is_a_name(name):
    prog = compile_source(f"def f(x: int) -> int:\n    {name} = x + 1\n    return {name}\n")
    assert execute(prog, "f", [(4,), (-2,)]) == [5, -1]


@pytest.mark.parametrize("word", KEYWORDS)
def test_a_keyword_is_not_a_name(word):
    src = f"def f(x: int) -> int:\n    {word} = x\n    return x\n"
    with pytest.raises(SyntaxError):  # CPython refuses each of them as an assignment target
        compile(src, "<kw>", "exec")
    with pytest.raises(CompileError) as e:
        compile_source(src)
    assert e.value.line == 2


TOKEN = {name: i for i, (name, _) in enumerate(oc.TOKENS)}


@pytest.mark.parametrize("word", KEYWORDS)
def test_a_keyword_lexes_to_its_token(word):
    kind, value = tokenize(word + " x")[0, :2].tolist()
    if word in oc.RESERVED_KEYWORDS:
        assert (kind, value) == (TOKEN["RESERVED"], oc.RESERVED_KEYWORDS.index(word))
    else:
        assert kind == TOKEN[word.upper()]


def test_near_misses_lex_to_names():
    for word in NEAR:
        assert tokenize(word)[0, 0] == TOKEN["NAME"], word


# The lexer skips indentation 8 bytes at a time on the host: the first token after it must start
# where the spaces end, for every character there and indents on both sides of 8 and 16.
@pytest.mark.parametrize("indent", [1, 7, 8, 9, 15, 16, 17])
def test_the_first_token_after_an_indent_starts_where_the_spaces_end(indent):
    for ch in (chr(c) for c in range(0x21, 0x7F)):
        if ch == "#":  # a comment-only line has no tokens
            continue
        src = "if x:\n" + " " * indent + ch + "\n"
        try:
            toks = tokenize(src)
        except CompileError as e:
            assert (e.line, e.col) == (2, indent + 1), (indent, ch, e)
            continue
        first = toks[[k for k in range(len(toks)) if toks[k, 0] == TOKEN["INDENT"]][0] + 1]
        assert first[2:].tolist() == [2, indent + 1], (indent, ch)
