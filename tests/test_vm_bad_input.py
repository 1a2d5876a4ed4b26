"""Bad input to the VM's Python API and C ABI: a clear exception or a bad_input trap, never a
crash, an out-of-bounds read or a silently wrong answer (found by an audit of the public API)."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vramgym.compiler import compile_source
from vramgym.vm import Encoded, ProgramBatch, Trap, VMConfig, encode_results, encode_tuples, execute, run_batch
from vramgym.vm import cpu
from vramgym.vm import opcodes as oc
from vramgym.vm.program import Program
from vramgym.vm import values
from vramgym.vm.values import encode_value

BAD_INPUT = oc.TRAP_CODES["bad_input"]
TWO_LISTS = "def f(xs: list[int], ys: list[int]) -> int:\n    return len(xs) * 100 + xs[0]\n"
INC = "def g(a: int) -> int:\n    return a + 1\n"


def _batch(src, entry):
    return ProgramBatch.from_programs([compile_source(src)], entry)


def _run_child(code: str, mem_bytes: int | None = None):
    """Run `code` in a fresh interpreter (a crash must not take the test process with it)."""
    pre = ""
    if mem_bytes:  # on top of what the interpreter has mapped after its imports
        pre = ("import resource, vramgym.vm, vramgym.compiler\n"
               "vsz = resource.getpagesize() * int(open('/proc/self/statm').read().split()[0])\n"
               f"resource.setrlimit(resource.RLIMIT_AS, (vsz + {mem_bytes}, vsz + {mem_bytes}))\n")
    return subprocess.run([sys.executable, "-c", pre + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300)


# --- argument kinds (the VM sees only the argument count) ------------------------------------

def test_input_kinds_that_differ_from_the_signature_trap_bad_input():
    batch = _batch(TWO_LISTS, "f")
    inputs = Encoded.concat([encode_tuples([(0, [7, 8, 9])], ("int", "list")),        # int for a list
                             encode_tuples([([5, 6], [1])], ("list", "list")),         # right kinds
                             encode_tuples([([5, 6], True)], ("list", "bool"))])       # bool for a list
    res = run_batch(batch, inputs)
    assert res.status.tolist() == [BAD_INPUT, 0, BAD_INPUT]
    assert res.value.tolist() == [0, 205, 0] and res.steps[[0, 2]].tolist() == [0, 0]
    res = run_batch(_batch(INC, "g"), Encoded.concat([encode_tuples([([1, 2],)], ("list",)),    # list for an int
                                                      encode_tuples([(4,)], ("int",))]))
    assert res.status.tolist() == [BAD_INPUT, 0] and res.value.tolist() == [0, 5]


def test_kind_check_clears_passed_and_list_rows():
    batch = _batch("def f(xs: list[int]) -> list[int]:\n    return xs + xs\n", "f")
    inputs = Encoded.concat([encode_tuples([(3,)], ("int",)), encode_tuples([([1, 2],)], ("list",))])
    expected = Encoded.concat([encode_tuples([([],)], ("list",)), encode_tuples([([1, 2, 1, 2],)], ("list",))])
    res = run_batch(batch, inputs, expected=expected, out_cap=4)
    assert res.status.tolist() == [BAD_INPUT, 0]
    assert res.passed.tolist() == [False, True] and res.out_list.tolist() == [[0] * 4, [1, 2, 1, 2]]


def test_hand_made_code_has_no_declared_kinds_so_no_check():
    """Program.from_code guesses int parameters: its runs are not checked against the guess."""
    src = compile_source("def f(xs: list[int]) -> int:\n    return len(xs)\n")
    batch = ProgramBatch.from_programs([Program.from_code(src.code)], "f0")
    assert batch.params is None
    res = run_batch(batch, encode_tuples([([4, 5, 6],)], ("list",)))
    assert res.status.tolist() == [0] and res.value.tolist() == [3]


# --- ProgramBatch built by hand --------------------------------------------------------------

def test_program_batch_checks_offsets_entries_and_kinds():
    p = compile_source(INC)
    with pytest.raises(ValueError, match="offsets"):
        ProgramBatch(p.code, np.arange(3, dtype=np.int64) * 65536, np.zeros(2, np.int32), np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="one value per program"):
        ProgramBatch(np.concatenate([p.code, p.code]), np.array([0, len(p.code), 2 * len(p.code)]),
                     np.zeros(1, np.int32), np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="ret_kind"):
        ProgramBatch.build(p.code, [0, len(p.code)], 0, 9)
    with pytest.raises(ValueError, match="unknown ret_kind"):
        ProgramBatch.build(p.code, [0, len(p.code)], 0, "float")
    with pytest.raises(TypeError, match="integer"):
        ProgramBatch.build(p.code.astype(np.float64), [0, len(p.code)])
    with pytest.raises(ValueError, match="code"):
        ProgramBatch.build(p.code.astype(np.int64) + 2**32, [0, len(p.code)])


def test_program_batch_converts_other_integer_dtypes_exactly():
    """int32 offsets, int64 or int32-view code: the same program, not reinterpreted memory."""
    p = compile_source(INC)
    inputs = encode_tuples([(41,)], ("int",))
    for code in (p.code, p.code.astype(np.int64), p.code.view(np.int32)):
        for off in (np.array([0, len(p.code)], np.int64), np.array([0, len(p.code)], np.int32)):
            b = ProgramBatch(code, off, np.zeros(1, np.int16), np.zeros(1, np.int64))
            res = run_batch(b, inputs)
            assert res.status.tolist() == [0] and res.value.tolist() == [42], (code.dtype, off.dtype)



def test_program_batch_checks_parameter_kinds():
    p = compile_source(INC)
    w = oc.LIMITS["MAX_PARAMS"] + 1

    def batch(row):
        return ProgramBatch(p.code, [0, len(p.code)], [0], [oc.KIND_INT], np.array([row], np.int64))
    ok = [oc.KIND_INT] + [-1] * (w - 1)
    assert batch(ok).params.tolist() == [ok]
    assert batch([-2] * w).params.tolist() == [[-2] * w]   # a row of UNKNOWN_KINDS: not checked
    for bad in ([oc.KIND_LIST + 1] + [-1] * (w - 1), [-3] + [-1] * (w - 1), [-1, oc.KIND_INT] + [-1] * (w - 2),
                [oc.KIND_INT] * w, [-2] + [-1] * (w - 1)):
        with pytest.raises(ValueError, match="params"):
            batch(bad)


def test_programs_with_other_code_dtypes_batch_as_the_compiled_one():
    """from_programs takes each Program's words as code_words reads them (an int32 view, int64):
    one dtype for the concatenation, not a mix promoted to int64 and reinterpreted."""
    p = compile_source(INC)
    twins = [p, Program(p.code.view(np.int32), p.functions), Program(p.code.astype(np.int64), p.functions)]
    b = ProgramBatch.from_programs(twins, "g")
    assert b.code.dtype == np.uint32 and b.code.tolist() == p.code.tolist() * 3
    assert execute(twins, "g", [(41,)]) == [[42]] * 3


def test_the_core_gets_only_arrays_of_its_dtype():
    """The C ABI's array arguments are plain addresses: ptr() refuses any other dtype (or a
    non-contiguous array) instead of handing over memory the core would misread."""
    assert cpu.ptr(None, cpu._i32p) is None
    a = np.zeros(3, np.int32)
    assert cpu.ptr(a, cpu._i32p) == a.ctypes.data
    for a in (np.zeros(3, np.int64), np.zeros(3, np.uint32), np.zeros(6, np.int32)[::2]):
        with pytest.raises(TypeError, match="contiguous int32"):
            cpu.ptr(a, cpu._i32p)

def test_batches_do_not_share_the_callers_arrays():
    """Found by an audit: Encoded and ProgramBatch kept the caller's arrays after checking them, so
    writing to those afterwards sent unchecked offsets to the core (a segfault). Now a batch's
    arrays are its own, read-only, and its attributes cannot be reassigned."""
    import dataclasses
    import pickle

    p = compile_source("def f(xs: list[int]) -> int:\n    return len(xs)\n")
    words, offsets = np.array([2, 3, 7, 8, 9], np.int32), np.array([0, 5], np.int64)
    inp = Encoded(words, offsets)
    code, code_off = np.tile(p.code, 3), np.arange(4, dtype=np.int64) * len(p.code)
    entry = np.zeros(3, np.int32)
    pb = ProgramBatch.build(code, code_off, entry, "int")
    before = run_batch(pb, inp).value.tolist()
    assert before == [3, 3, 3]
    words[1], offsets[1] = 60_000_000, 60_000_002  # the caller reuses its buffers
    code_off[:] = np.arange(4) * 60_000
    code[:] = 0
    entry[:] = 7
    assert run_batch(pb, inp).value.tolist() == before
    for arr in (inp.words, inp.offsets, pb.code, pb.offsets, pb.entry, pb.ret_kind, pb.params):
        if arr is not None:
            with pytest.raises(ValueError, match="read-only"):
                arr[0] = 1
    with pytest.raises(AttributeError, match="immutable"):
        inp.words = np.zeros(2, np.int32)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pb.entry = np.zeros(0, np.int32)
    with pytest.raises(ValueError, match="one value per program"):
        dataclasses.replace(pb, entry=np.zeros(0, np.int32))
    typed = ProgramBatch.from_programs([p], "f")
    for obj in (inp, pb, typed):  # a round trip (how Ray ships batches) checks them again
        back = pickle.loads(pickle.dumps(obj))
        assert type(back) is type(obj) and run_batch(typed, back if obj is inp else inp).value.tolist() == [3]
        assert not back.offsets.flags.writeable

def test_batches_copy_arrays_handed_over_by_array_protocol_objects():
    """Found by an audit: an object whose __array__ returns an array it keeps passed the copy
    test (the array owns its data and is not the object given), so the batch shared it and set
    the caller's array read-only; the caller could set it writeable again and send the core
    unchecked offsets (a segfault)."""
    class Holder:
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    p = compile_source("def f(xs: list[int]) -> int:\n    return len(xs)\n")
    w, o = np.array([2, 3, 7, 8, 9], np.int32), np.array([0, 5], np.int64)
    inp = Encoded(Holder(w), Holder(o))
    code, code_off = np.tile(p.code, 2), np.arange(3, dtype=np.int64) * len(p.code)
    pb = ProgramBatch.build(Holder(code), Holder(code_off), np.zeros(2, np.int32), "int")
    for mine, theirs in ((inp.words, w), (inp.offsets, o), (pb.code, code), (pb.offsets, code_off)):
        assert not np.shares_memory(mine, theirs) and theirs.flags.writeable
    w[1], o[1] = 100_000_000, 100_000_002
    code_off[:] = np.arange(3) * 60_000
    assert run_batch(pb, inp).value.tolist() == [3, 3]


def test_hand_made_functions_take_the_compilers_kind_names_or_are_refused():
    """Found by an audit: execute compared a Function's ret with 'list' literally, so a hand-made
    Function returning 'list[int]' (accepted everywhere else) ran as a list and came back as its
    length; an unknown kind raised a bare KeyError from the batch builder."""
    from vramgym.vm.program import Function
    p = compile_source("def f(xs: list[int]) -> list[int]:\n    return xs + xs\n")
    f = p.functions[0]
    q = Program.from_code(p.code, [Function(f.name, f.index, f.pc, ("list[int]",), "list[int]", f.nlocals)])
    assert execute(q, "f", [([1, 2],)]) == [[1, 2, 1, 2]]
    direct = Program(p.code, [Function(f.name, f.index, f.pc, ("list[int]",), "list[int]", f.nlocals)])
    assert execute(direct, "f", [([1, 2],)]) == [[1, 2, 1, 2]]
    for params, ret in ((("list",), "float"), (("str",), "int"), ("int", "int")):
        with pytest.raises((ValueError, TypeError)):
            Program.from_code(p.code, [Function(f.name, f.index, f.pc, params, ret, f.nlocals)])
        with pytest.raises(ValueError, match="kinds"):
            ProgramBatch.from_programs([Program(p.code, [Function(f.name, f.index, f.pc, params, ret, f.nlocals)])],
                                       "f")


def test_from_programs_checks_what_it_no_longer_scans():
    """from_programs builds its arrays itself and skips the constructor's scans, so it checks a
    hand-made Program's parameter count, entry index and code words instead: each refused with a
    ValueError (as the scans refused them), and what it accepts passes the constructor's checks."""
    from vramgym.vm.program import Function
    p = compile_source("def f(xs: list[int], k: int) -> bool:\n    return len(xs) > k\n")
    f = p.functions[0]
    many = ("int",) * (oc.LIMITS["MAX_PARAMS"] + 1)
    for fn in (Function(f.name, f.index, f.pc, many, "int", 255), Function(f.name, 2**31, f.pc, f.params, f.ret, 2),
               Function(f.name, True, f.pc, f.params, f.ret, 2), Function(f.name, 1.0, f.pc, f.params, f.ret, 2)):
        with pytest.raises(ValueError):
            ProgramBatch.from_programs([Program(p.code, [fn])], "f")
    with pytest.raises(ValueError):
        ProgramBatch.from_programs([Program(np.stack([p.code, p.code]), [f])], "f")   # 2-D code
    # Found by the audit of these checks: an untyped program's parameter count is from_code's
    # reading of a FUNC word (up to 255), which traps bad_bytecode when it runs, as it did before
    # the check; a 0-d integer array is an index like any other.
    wide = Program.from_code(np.array([oc.OP_BY_NAME["FUNC"].code | (17 << 8)], np.uint32))
    assert execute(wide, "f0", [tuple(range(17))]) == [Trap("bad_bytecode")]
    plain = Program.from_code(compile_source("def f(x: int) -> int:\n    return x\n").code)
    assert run_batch(ProgramBatch.from_programs([plain, wide], "f0"), encode_tuples([(6,)], ("int",)),
                     (np.array([0]), np.array([0]))).value.tolist() == [6]
    assert execute(Program(p.code, [Function(f.name, np.array(0), f.pc, f.params, f.ret, 2)]), "f", [([1], 0)]) == \
        [True]
    g = compile_source("def f(a: int) -> list[int]:\n    return [a]\n")
    hand = Program(p.code.astype(np.int64), [f])   # other dtypes are converted (and checked)
    b = ProgramBatch.from_programs([p, g, hand, Program.from_code(g.code, [g.functions[0]])], "f")
    checked = ProgramBatch(b.code, b.offsets, b.entry, b.ret_kind, b.params)   # the scans pass
    for name in ("code", "offsets", "entry", "ret_kind", "params"):
        arr = getattr(b, name)
        assert not arr.flags.writeable and np.array_equal(arr, getattr(checked, name)), name
        assert arr.dtype == getattr(checked, name).dtype, name
    assert b.offsets.tolist() == [0, len(p.code), len(p.code) + len(g.code), 2 * len(p.code) + len(g.code),
                                  2 * len(p.code) + 2 * len(g.code)]
    ins = encode_tuples([([1, 2], 1), ([], 0)], ("list", "int"))
    assert run_batch(b, ins, (np.array([0, 0, 2]), np.array([0, 1, 0]))).value.tolist() == [1, 0, 1]


def test_core_addresses_are_the_arrays_data():
    """ptr() hands the core an array's address through the _address extension (ndarray.ctypes
    costs ~2 us); read-only and empty arrays included, and what a typed pointer would refuse is
    refused."""
    a = np.arange(6, dtype=np.int32)
    ro = a.copy()
    ro.flags.writeable = False
    for arr in (a, ro, np.zeros(0, np.int32), np.arange(4, dtype=np.int32)[1:]):
        assert cpu.ptr(arr, cpu._i32p) == arr.ctypes.data
    assert cpu._address.__module__ == "vramgym.vm._address"   # the extension, not the fallback
    assert cpu.ptr(None, cpu._i32p) is None
    for bad in (a.astype(np.int64), a[::2], a.astype(np.uint32)):
        with pytest.raises(TypeError):
            cpu.ptr(bad, cpu._i32p)


def test_native_encoder_output_is_read_only_and_passes_the_checks():
    enc = encode_tuples([(1, [2, 3]), (0, [])], ("int", "list"))
    assert not enc.words.flags.writeable and not enc.offsets.flags.writeable
    again = Encoded(enc.words, enc.offsets)   # the checks the native path skips
    assert np.array_equal(again.words, enc.words) and again.offsets.tolist() == enc.offsets.tolist() == [0, 6, 10]
    with pytest.raises(ValueError):
        enc.words[0] = 5


def test_hand_made_compiled_batch_lengths_are_not_cast():
    """Found by an audit: CompiledBatch.to_programs cast float lengths (5.9 read as 5 words) and
    bools (True as 1 word)."""
    from vramgym.compiler import compile_batch
    from vramgym.compiler.batch import CompiledBatch
    cb = compile_batch(["def f(a: int) -> int:\n    return a * 2\n"])
    assert CompiledBatch(cb.code, cb.lengths.astype(np.int64), cb.errors).to_programs().offsets.tolist() == \
        cb.to_programs().offsets.tolist()
    for lengths in (cb.lengths + 0.9, cb.lengths.astype(np.float64), np.array([True])):
        with pytest.raises(TypeError):
            CompiledBatch(cb.code, lengths, cb.errors).to_programs()


def test_program_from_code_rejects_words_it_would_mask():
    p = compile_source(INC)
    assert np.array_equal(Program.from_code(p.code.view(np.int32)).code, p.code)
    with pytest.raises(ValueError):
        Program.from_code(p.code.astype(np.int64) + 2**32)
    with pytest.raises(TypeError):
        Program.from_code(p.code.astype(np.float64) + 0.5)


# --- run_batch's other arguments -------------------------------------------------------------

def test_run_batch_rejects_indices_caps_and_threads_it_would_wrap():
    b, inputs = _batch(INC, "g"), encode_tuples([(1,)], ("int",))
    with pytest.raises(ValueError, match="run_prog"):
        run_batch(b, inputs, (np.array([2**40]), np.array([0])))
    with pytest.raises(TypeError, match="run_prog"):
        run_batch(b, inputs, (np.array([0.7]), np.array([0])))
    for cap in (-1, 2**31 + 2, True, 1.5):
        with pytest.raises(ValueError, match="out_cap"):
            run_batch(b, inputs, out_cap=cap)
    for n in (-1, 2**31 - 1, 2**40):
        with pytest.raises(ValueError, match="nthreads"):
            run_batch(b, inputs, nthreads=n)
    for n in (True, 2.0):
        with pytest.raises(TypeError, match="nthreads"):
            run_batch(b, inputs, nthreads=n)
    for flag in (None, "no", 0, [], np.array([True])):   # (session 30's audit: None ran one by one)
        with pytest.raises(TypeError, match="lockstep must be a bool"):
            run_batch(b, inputs, lockstep=flag)
    assert run_batch(b, inputs, lockstep=np.bool_(False)).value.tolist() == [2]
    with pytest.raises(TypeError, match="VMConfig"):
        run_batch(b, inputs, config={"fuel": 10})
    with pytest.raises(TypeError, match="Encoded"):
        run_batch(b, [(1,)])
    with pytest.raises(ValueError, match="words"):
        Encoded(np.array([oc.KIND_INT, 2**40]), np.array([0, 2]))
    assert run_batch(b, inputs, nthreads=0).value.tolist() == [2]


def test_images_longer_than_max_code_trap_bad_bytecode_as_language_md_says():
    """An image of MAX_CODE words runs; one word more is invalid as a whole (reported at word 0)."""
    ops = {o.name: o.code for o in oc.OPS}

    def image(n):   # FUNC (1 param); (LOAD_VAR 0; POP) * k; [LOAD_VAR 0;] LOAD_VAR 0; RETURN: valid at any length
        code = np.full(n, ops["LOAD_VAR"], np.uint32)
        code[0] = ops["FUNC"] | 1 << 8 | 1 << 16
        code[2:n - 2:2] = ops["POP"]
        code[-1] = ops["RETURN"]
        return code
    cap = oc.LIMITS["MAX_CODE"]
    for n in (cap - 1, cap):
        assert cpu.validate(image(n), 0) == (-1, 0)
        assert execute(Program.from_code(image(n)), "f0", [(5,)], steps=True) == [(5, n - 1)]
    assert cpu.validate(image(cap + 1), 0) == (0, -1)
    assert execute(Program.from_code(image(cap + 1)), "f0", [(5,)], steps=True) == [(Trap("bad_bytecode"), 0)]


def test_execute_names_what_it_takes():
    p = compile_source(INC)
    with pytest.raises(TypeError, match="compile"):
        execute("def g(a: int) -> int:\n    return a\n", "g", [(1,)])
    with pytest.raises(TypeError, match="int"):
        execute([p, 3], "g", [(1,)])
    lens = compile_source("def h(xs: list[int]) -> int:\n    return len(xs)\n")
    assert execute(lens, "h", [np.array([1, 2, 3])]) == [3]   # a 1-D array is one list argument
    # so rows of a 2-D array are list arguments too, and for other signatures the error says so
    sub = compile_source("def f(a: int, b: int) -> int:\n    return a - b\n")
    with pytest.raises(TypeError, match=r"expected 2 arguments, got 1 \(a numpy array there is one list"):
        execute(sub, "f", np.array([[1, 2], [3, 4]]))
    assert execute(sub, "f", np.array([[1, 2], [3, 4]]).tolist()) == [-1, -1]
    with pytest.raises(TypeError, match=r"expected 2 arguments, got 1$"):
        execute(sub, "f", [(1, 2), (3,)])
    for flag in ("no", None, 1, np.array([1, 2])):   # ("no" was taken as True)
        with pytest.raises(TypeError, match="steps must be a bool"):
            execute(sub, "f", [(1, 2)], steps=flag)
    assert execute(sub, "f", [(1, 2)], steps=np.bool_(True)) == [(-1, 4)]


def test_encode_tuples_takes_rows_of_a_2d_array():
    enc = encode_tuples(np.array([[1, 2], [3, 4]]), ("int", "int"))
    assert np.array_equal(enc.words, encode_tuples([(1, 2), (3, 4)], ("int", "int")).words)
    # for one list parameter a row is that list, as before
    enc = encode_tuples(np.array([[1, 2], [3, 4]]), ["list"])
    assert np.array_equal(enc.words, encode_tuples([([1, 2],), ([3, 4],)], ["list"]).words)


def test_runs_as_a_2_by_r_array():
    b = _batch(INC, "g")
    inputs = encode_tuples([(1,), (5,)], ("int",))
    res = run_batch(b, inputs, np.array([[0, 0, 0], [1, 0, 1]]))
    assert res.value.tolist() == [6, 2, 6]
    with pytest.raises(TypeError, match="pair"):
        run_batch(b, inputs, np.array([0, 1]))


def test_core_caps_a_huge_thread_count_itself():
    """The C ABI sized per-thread scratch by nthreads before capping it (std::bad_alloc, abort)."""
    p = compile_source(INC)
    inputs = encode_tuples([(1,), (2,)], ("int",))
    b = ProgramBatch.from_programs([p], "g")
    rp, ri = np.zeros(2, np.int32), np.arange(2, dtype=np.int32)
    status, value, *_ = cpu.run_batch(b.code, b.offsets, b.entry, b.ret_kind, inputs.words, inputs.offsets,
                                           rp, ri, None, None, VMConfig().as_array(), 0, 2**31 - 1)
    assert status.tolist() == [0, 0] and value.tolist() == [2, 3]
    code, lengths, _, _ = cpu.compile_batch(INC.encode(), np.array([0, len(INC)], np.int64), 256, 2**31 - 1)
    assert lengths[0] == len(p.code) and np.array_equal(code[0, :lengths[0]], p.code)


# --- memory -----------------------------------------------------------------------------------

def test_large_limits_run_one_by_one_with_the_same_results():
    """Lockstep scratch is 33 runs' memory: past 256 MiB the runs go one by one instead. With
    heap_size=2**22 (16 MiB a run), lockstep would need some 550 MiB: under a 300 MiB address-space
    limit the batch only runs one by one (same results as the default limits)."""
    out = _run_child("""
        from vramgym.compiler import compile_source
        from vramgym.vm import execute
        src = compile_source("def f(n: int) -> list[int]:\\n    xs = [n] * n\\n    xs.append(len(xs))\\n"
                             "    return xs\\n")
        args = [(k,) for k in range(0, 40, 3)]
        big = execute(src, "f", args, heap_size=1 << 22, steps=True, nthreads=1)
        small = execute(src, "f", args, steps=True, nthreads=1)
        print("same" if big == small and big[2][0] == [6] * 6 + [6] else f"differ {big} {small}")
    """, mem_bytes=300 << 20)
    assert out.returncode == 0 and out.stdout.strip() == "same", out.stdout + out.stderr[-2000:]


def test_out_of_memory_in_the_core_is_a_memory_error_not_an_abort():
    out = _run_child("""
        from vramgym.compiler import compile_source
        from vramgym.vm import execute
        p = compile_source("def f(x: int) -> int:\\n    return x\\n")
        try:
            execute(p, "f", [(1,), (2,)], heap_size=1 << 28, stack_size=1 << 24, max_lists=1 << 24, nthreads=1)
        except MemoryError as e:
            print("MemoryError:", e)
        else:
            print("ran")
    """, mem_bytes=600 << 20)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "MemoryError: run_batch" in out.stdout, out.stdout + out.stderr[-2000:]


# --- encoding ---------------------------------------------------------------------------------

_SIG = st.lists(st.sampled_from(["int", "bool", "list"]), min_size=0, max_size=4)
_I32 = st.integers(-(2**31), 2**31 - 1)


def _value(kind):
    if kind == "int":
        return st.one_of(_I32, _I32.map(np.int32), _I32.map(np.int64))
    if kind == "bool":
        return st.one_of(st.booleans(), st.booleans().map(np.bool_))
    items = st.lists(_I32, max_size=6)
    return st.one_of(items, items.map(tuple), items.map(lambda xs: np.array(xs, dtype=np.int64)))


@pytest.fixture(params=["native", "python"])
def encoder(request, monkeypatch):
    """encode_tuples with its C encoder (vm/csrc/encode_py.cpp), and with the Python code alone."""
    if request.param == "python":
        monkeypatch.setattr(values, "_native", None)
    return request.param


def test_native_encoder_is_built():
    """pip install builds the C encoder; without it encoding silently runs 5x slower."""
    assert values._native is not None


@given(st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_encode_tuples_matches_value_by_value(encoder, data):  # (the fixture holds for every example)
    """Both encoders give what encode_value gives one value at a time."""
    kinds = data.draw(_SIG)
    rows = data.draw(st.lists(st.tuples(*[_value(k) for k in kinds]), max_size=6))
    rows = [data.draw(st.sampled_from([r, list(r)])) for r in rows]
    enc = encode_tuples(rows, kinds)
    for i, row in enumerate(rows):
        want: list[int] = []
        for v, k in zip(row, kinds):
            encode_value(v, k, want)
        assert enc.words[enc.offsets[i]:enc.offsets[i + 1]].tolist() == want
    assert len(enc) == len(rows)
    if len(kinds) == 1:  # expected values: one value each, unwrapped
        res = encode_results([r[0] for r in rows], kinds[0])
        assert np.array_equal(res.words, enc.words) and np.array_equal(res.offsets, enc.offsets)


@pytest.mark.parametrize("rows, kinds, err, match", [
    ([(1, 2), (3,)], ("int", "int"), TypeError, "expected 2 arguments, got 1"),
    ([(1,), (True,)], ("int",), TypeError, "argument 1: expected int, got bool"),
    ([(1.0,)], ("int",), TypeError, "expected int, got float"),
    ([(2**31,)], ("int",), ValueError, "does not fit"),
    ([(1, [1, True])], ("int", "list"), TypeError, r"argument 2 \(list element\): expected int, got bool"),
    ([(1, [1, 2.5])], ("int", "list"), TypeError, "expected int, got float"),
    ([(1, np.array([1.5]))], ("int", "list"), TypeError, "expected int, got float"),
    ([(1, 7)], ("int", "list"), TypeError, "argument 2: expected list, got int"),
    ([(1,)], ("bool",), TypeError, "expected bool, got int"),
    ([(1,)], ("float",), ValueError, "unknown kind"),
])
def test_encode_tuples_rejects(encoder, rows, kinds, err, match):
    with pytest.raises(err, match=match):
        encode_tuples(rows, kinds)


def test_encode_results_checks_like_arguments(encoder):
    assert encode_results(np.array([3, 4]), "int").words.tolist() == [oc.KIND_INT, 3, oc.KIND_INT, 4]
    assert encode_results([3, 4], "int").words.tolist() == [oc.KIND_INT, 3, oc.KIND_INT, 4]
    assert encode_results(iter([[1], []]), "list").words.tolist() == [oc.KIND_LIST, 1, 1, oc.KIND_LIST, 0]
    with pytest.raises(TypeError, match="expected value 1: expected bool, got int"):
        encode_results([1], "bool")
    with pytest.raises(ValueError, match="unknown kind"):
        encode_results([1], "str")


def test_native_encoder_takes_plain_rows_and_matches_python(monkeypatch):
    """Rows of plain ints, bools and lists (or tuples) of ints, int32 edges included, go through
    the C encoder, which gives the Python encoder's words; anything else falls back to Python."""
    rng = np.random.default_rng(5)
    edge = [-(2**31), 2**31 - 1, 0, -1, 1]

    def value(kind):
        if kind == "bool":
            return bool(rng.integers(2))
        ints = [int(rng.choice(edge)) if rng.random() < 0.3 else int(rng.integers(-1000, 1000))
                for _ in range(int(rng.integers(0, 5)))]
        if kind == "int":
            return ints[0] if ints else int(rng.choice(edge))
        return ints if rng.random() < 0.7 else tuple(ints)

    for _ in range(200):
        kinds = [str(k) for k in rng.choice(["int", "bool", "list", "list[int]"], size=int(rng.integers(0, 4)))]
        rows = [tuple(value(k) for k in kinds) for _ in range(int(rng.integers(0, 20)))]
        rows = rows if rng.random() < 0.5 else [list(r) for r in rows]
        fast = values._native_encode(rows, kinds, False)
        assert fast is not None, (rows, kinds)
        with monkeypatch.context() as m:
            m.setattr(values, "_native", None)
            slow = encode_tuples(rows, kinds)
            assert values._native_encode(rows, kinds, False) is None
        assert np.array_equal(fast.words, slow.words) and np.array_equal(fast.offsets, slow.offsets), (rows, kinds)
        if len(kinds) == 1:
            single = values._native_encode([r[0] for r in rows], kinds, True)
            assert single is not None and np.array_equal(single.words, slow.words)
    # not the common case: numpy values, bools for ints, ints past int32, wrong arity, bare values
    for rows, kinds in [([(np.int64(1),)], ["int"]), ([(True,)], ["int"]), ([(2**31,)], ["int"]),
                        ([([1, True],)], ["list"]), ([(1, 2)], ["int"]), ([3], ["int"]), ([(1,)], ["float"]),
                        ([(np.array([1]),)], ["list"])]:
        assert values._native_encode(rows, kinds, False) is None, (rows, kinds)
    assert encode_tuples([3], ["int"]).words.tolist() == [oc.KIND_INT, 3]  # bare values are 1-tuples


def test_native_encoder_falls_back_on_a_huge_signature():
    """Found by review: the C encoder reserved rows x parameters words before checking arities,
    so a wrong arity with a huge signature raised MemoryError instead of the Python TypeError."""
    with pytest.raises(TypeError, match="expected 1000000 arguments, got 0"):
        encode_tuples([()] * 10**6, ["int"] * 10**6)


def test_a_large_heap_costs_only_the_memory_runs_touch():
    """Each thread's scratch heap was a zero-filled vector: at the largest heap_size (2**28 ints)
    1 GiB of committed memory per thread, before any run used it, so a many-core host met the
    OOM killer instead of results. Untouched scratch pages now cost nothing."""
    code = (
        "import resource\n"
        "from vramgym.compiler import compile_source\n"
        "from vramgym.vm import execute\n"
        "p = compile_source('def f(n: int) -> int:\\n    xs = [1] * n\\n    return len(xs)\\n')\n"
        "execute(p, 'f', [(3,)])\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "r = execute(p, 'f', [(3,), (100000,)] * 4, heap_size=1 << 28, nthreads=2)\n"
        "assert r == [3, 100000] * 4, r\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) < 64, f"{out.stdout} MiB more resident for runs of at most 100,000 ints"


# --- the disassembler and from_code's functions (audit, session 16) ------------------------------

@pytest.mark.parametrize("bad,exc", [([1.9], TypeError), ([True], TypeError), (np.array([0.5, 1.0]), TypeError),
                                     ([2**32 + 3], ValueError), (np.zeros((1, 3), np.uint32), ValueError),
                                     ("abc", TypeError)])
def test_disassemble_refuses_what_it_would_cast(bad, exc):
    from vramgym.vm import disassemble
    with pytest.raises(exc):  # it printed [1.9] and [True] as LOAD_CONST 0
        disassemble(bad)


def test_disassemble_takes_int32_views_as_from_code_does():
    from vramgym.vm import disassemble
    code = compile_source(INC).code
    assert disassemble(code.view(np.int32)) == disassemble(code) == disassemble(code.tolist())
    assert "???" in disassemble([-1])  # (was an OverflowError)


@pytest.mark.parametrize("functions", ["g", [1], [("g", 0, 0, ("int",), "int", 1)]])
def test_from_code_checks_its_functions(functions):
    with pytest.raises(TypeError, match="functions must be a list of vramgym.vm.Function"):
        Program.from_code(compile_source(INC).code, functions=functions)
    prog = compile_source(INC)
    assert execute(Program.from_code(prog.code, functions=tuple(prog.functions)), "g", [(1,)]) == [2]


def test_items_past_int32_words_are_refused_before_the_core():
    """Suspected by an audit, from reading the core: it takes an item's size as an int32, so an
    item of 2**32 + 5 words would be read as 5 (testing it end to end takes 16 GiB)."""
    assert values.offsets_array(np.array([0, 2**31 - 1, 2**31 + 3]), 2**31 + 3, "word", "n").tolist()[-1] == 2**31 + 3
    with pytest.raises(ValueError, match="more than 2"):
        values.offsets_array(np.array([0, 4, 2**32 + 9]), 2**32 + 9, "word", "len(words)")


# ---- session 30's mutation audit: checks that no test held ----------------------------------------

def test_trap_ok_is_no_trap():
    with pytest.raises(ValueError):
        Trap("ok")   # status 0 is a result: a Trap("ok") would never equal what a run returns


def test_encoded_offsets_must_end_at_the_words_end():
    """Offsets that stop short of the words were taken, and Encoded.concat then shifted the next
    batch's items into the first one's tail."""
    with pytest.raises(ValueError, match="offsets must be N \\+ 1 word offsets from 0 to len\\(words\\) = 4"):
        Encoded(np.array([oc.KIND_INT, 5, oc.KIND_INT, 7], np.int32), np.array([0, 2], np.int64))


def test_a_2d_array_is_one_list_per_row_for_either_spelling_of_the_kind():
    rows = np.array([[1, 2, 3], [4, 5, 6]])
    want = encode_tuples([([1, 2, 3],), ([4, 5, 6],)], ["list"])
    for kind in ("list", "list[int]"):
        got = encode_tuples(rows, [kind])
        assert got.words.tolist() == want.words.tolist() and got.offsets.tolist() == want.offsets.tolist()


def test_program_batch_needs_one_ret_kind_per_program():
    p = ProgramBatch.from_programs([compile_source(INC)] * 3, "g")
    for ret in (np.zeros(1, np.int32), np.zeros(4, np.int32)):
        with pytest.raises(ValueError, match="entry and ret_kind need one value per program \\(3\\)"):
            ProgramBatch(p.code, p.offsets, p.entry, ret)


def test_run_batch_needs_one_expected_value_per_input():
    b = _batch(INC, "g")
    with pytest.raises(ValueError, match="expected needs one value per input"):
        run_batch(b, encode_tuples([(1,), (2,), (3,)], ("int",)), expected=encode_results([2], "int"))


def test_default_out_cap_holds_list_results_when_any_program_returns_a_list():
    progs = [compile_source("def f(n: int) -> list[int]:\n    return [n, n + 1]\n"),
             compile_source("def f(n: int) -> int:\n    return n\n")]
    r = run_batch(ProgramBatch.from_programs(progs, "f"), encode_tuples([(7,)], ("int",)))
    assert r.out_list is not None and r.out_list.shape == (2, 256)
    assert r.value.tolist() == [2, 7] and r.out_list[0, :2].tolist() == [7, 8]


def test_execute_refuses_bool_limits_even_after_the_int_was_cached():
    """execute caches VMConfigs by their limits: True == 1 must not find fuel=1's (typed cache)."""
    p = compile_source(INC)
    assert execute(p, "g", [(1,)], max_depth=1) == [2]
    for name in ("fuel", "max_depth", "heap_size", "max_lists", "stack_size"):
        with pytest.raises(ValueError, match=f"VMConfig.{name} must be an int"):
            execute(p, "g", [(1,)], **{name: True})


def test_hand_made_functions_are_checked_and_take_the_canonical_kind_names():
    from vramgym.vm import Function
    src = compile_source("def f(xs: list[int]) -> list[int]:\n    return xs\n")
    fn = src.functions[0]
    p = Program.from_code(src.code, [Function(fn.name, 0, fn.pc, ("list[int]",), "list[int]", fn.nlocals, ("xs",))])
    assert (p.functions[0].params, p.functions[0].ret) == (fn.params, fn.ret) == (("list",), "list")
    with pytest.raises(TypeError, match="params"):   # a str is not a tuple of kinds
        Program.from_code(src.code, [Function("f", 0, 0, "int", "int", 1)])


def test_wide_code_words_below_int32_are_refused_not_wrapped():
    code = compile_source(INC).code.astype(np.int64)
    with pytest.raises(ValueError, match="words"):
        Program.from_code(code - 2**32)
    assert Program.from_code(code.astype(np.int32).astype(np.int64)).code.tolist() == code.tolist()
