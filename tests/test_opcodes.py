"""The opcode table is the single source of truth: the C++ header is generated from it, the
VM implements every opcode, and the disassembler names every one."""
import re
from pathlib import Path

import numpy as np
import pytest

from vramgym.vm import Program, opcodes as oc

ROOT = Path(__file__).resolve().parents[1]


def test_generated_header_is_current():
    committed = (ROOT / "vm" / "csrc" / "opcodes.h").read_text()
    assert committed == oc.render_header(), "run `python -m vramgym.vm.opcodes --write` after editing vm/opcodes.py"


def test_vm_implements_every_opcode():
    vm = (ROOT / "vm" / "csrc" / "vm.h").read_text()
    cases = set(re.findall(r"case OP_([A-Z_0-9]+):", vm))
    missing = {op.name for op in oc.OPS} - cases - {"FUNC"}  # FUNC is a header: executing it traps
    assert not missing, f"opcodes without a case in vm.h: {sorted(missing)}"


def test_opcode_codes_are_unique_and_fit_a_byte():
    codes = [op.code for op in oc.OPS]
    assert len(codes) == len(set(codes)) and all(0 < c < 256 for c in codes)


@pytest.mark.parametrize("arg", [0, 1, 255, (1 << 23) - 1, -1, -(1 << 23)])
def test_encode_decode_round_trip(arg):
    w = oc.encode("LOAD_CONST", arg)
    op, a = oc.decode(w)
    assert op == oc.OP_BY_NAME["LOAD_CONST"].code and oc.signed_arg(a) == arg


def test_encode_rejects_wide_arguments():
    with pytest.raises(ValueError):
        oc.encode("JUMP", 1 << 24)
    with pytest.raises(ValueError):
        oc.encode("LOAD_CONST", -(1 << 23) - 1)


def test_disassembler_names_every_opcode():
    words = [oc.encode(op.code, 0) for op in oc.OPS] + [0xFF]
    text = Program.from_code(np.array(words, dtype=np.uint32)).disassemble()
    for op in oc.OPS:
        assert op.name in text
    assert "???" in text  # an unknown opcode is shown, not hidden


def test_error_and_trap_tables_are_consistent():
    assert oc.TRAP_NAMES[0] == "ok" and oc.ERROR_NAMES[0] == "ok"
    assert len(set(oc.TRAP_NAMES.values())) == len(oc.TRAPS)
    assert len(set(oc.ERROR_NAMES.values())) == len(oc.ERRORS)
    for code, name, msg in oc.ERRORS[1:]:
        assert msg, name


def test_lexer_keyword_switch_matches_the_table():
    src = (ROOT / "compiler" / "csrc" / "compiler.h").read_text()
    found = {text: int(i) for text, i in re.findall(r'VG_RK\("(\w+)", (\d+)\)', src)}
    assert found == {k: i for i, k in enumerate(oc.RESERVED_KEYWORDS)}
