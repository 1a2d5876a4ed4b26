"""A task bank: the tasks an environment samples from, with their test inputs and expected
outputs drawn and encoded once (outputs computed by the VM running each reference), and the
batched scorer that compiles and runs many candidate programs against them in one call.

    bank = TaskBank.from_names(["gcd", "sum_list"], n_tests=16, seed=0)
    scores = bank.score(bodies, task_ids)      # bodies: (N, L) action ids, END-padded

Shapes (T tasks, M tests per task, E shown examples, W / W_OUT words per encoded example):
    examples  (T, E, W) int32      encoded argument tuples shown to the agent, zero-padded
    outputs   (T, E, W_OUT) int32  encoded expected outputs of those examples
    kinds     (T, 4) int32         parameter kinds (opcodes.KIND_*; -1 for unused slots)
    ret_kind  (T,) int32
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vramgym.compiler import compile_tokens, tokenize
from vramgym.vm import opcodes as oc
from vramgym.vm import VMConfig, encode_results, encode_tuples, run_batch
from vramgym.vm.values import KIND_BY_NAME, Encoded

from . import vocab as V
from .tasks import TASKS, Task


@dataclass
class Scores:
    """Per candidate (N,): compiled, fraction of tests passed, all passed, mean executed steps
    over the tests, and the program length in actions."""

    compiled: np.ndarray
    pass_frac: np.ndarray
    all_pass: np.ndarray
    steps: np.ndarray
    length: np.ndarray


def _pad_rows(enc: Encoded, width: int) -> np.ndarray:
    """Encoded items as rows of `width` int32 words, zero-padded."""
    n = len(enc)
    out = np.zeros((n, width), dtype=np.int32)
    lens = np.diff(enc.offsets)
    if n and lens.max() > width:
        raise ValueError(f"an encoded example needs {lens.max()} words, more than {width}")
    col = np.arange(width)[None, :]
    mask = col < lens[:, None]
    out[mask] = enc.words[(enc.offsets[:-1, None] + col)[mask]]
    return out


def _action_token_table() -> np.ndarray:
    """(VOCAB_SIZE, 2) int32: the compiler token (kind, value) of every action; END is -1."""
    tc = oc.TOKEN_CODES
    text_kind = {"return": "RETURN", "if": "IF", "elif": "ELIF", "else": "ELSE", "while": "WHILE", "for": "FOR",
                 "in": "IN", "break": "BREAK", "continue": "CONTINUE", "pass": "PASS", "and": "AND", "or": "OR",
                 "not": "NOT", "True": "TRUE", "False": "FALSE", "(": "LPAREN", ")": "RPAREN", "[": "LBRACKET",
                 "]": "RBRACKET", ",": "COMMA", ":": "COLON", ".": "DOT", "=": "ASSIGN", "+=": "PLUS_ASSIGN",
                 "-=": "MINUS_ASSIGN", "*=": "STAR_ASSIGN", "//=": "SLASHSLASH_ASSIGN", "%=": "PERCENT_ASSIGN",
                 "+": "PLUS", "-": "MINUS", "*": "STAR", "//": "SLASHSLASH", "%": "PERCENT", "<": "LT", "<=": "LE",
                 ">": "GT", ">=": "GE", "==": "EQ", "!=": "NE", "<NEWLINE>": "NEWLINE", "<INDENT>": "INDENT",
                 "<DEDENT>": "DEDENT"}
    table = np.full((V.VOCAB_SIZE, 2), -1, dtype=np.int32)
    for a, text in enumerate(V.TOKENS):
        if text in text_kind:
            table[a] = (tc[text_kind[text]], 0)
        elif text in oc.BUILTIN_NAMES:
            table[a] = (tc["NAME"], oc.BUILTIN_NAMES.index(text))
        elif a in V.NAME_SLOTS:  # FN, P0..P3, V0..V7: fixed name ids after the builtins
            table[a] = (tc["NAME"], len(oc.BUILTIN_NAMES) + V.NAME_SLOTS.index(a))
        elif text.isdigit():
            table[a] = (tc["INT"], int(text))
    assert (table[:, 0] >= 0).sum() == V.VOCAB_SIZE - 1  # every action but END
    return table


_ACTION_TOKENS = _action_token_table()


class TaskBank:
    """Tasks with their tests, ready for batched scoring. Every task's signature must fit the
    vocabulary (at most 4 parameters)."""

    def __init__(self, tasks: Sequence[Task], n_tests: int = 16, n_examples: int = 4, seed: int = 0,
                 example_width: int = 64, config: VMConfig | None = None, backend: str = "cpu"):
        if not tasks:
            raise ValueError("a task bank needs at least one task")
        if not 1 <= n_examples <= n_tests:
            raise ValueError("need 1 <= n_examples <= n_tests")
        self.tasks = list(tasks)
        self.n_tests, self.n_examples = n_tests, n_examples
        self.config = config or VMConfig(fuel=20_000)
        self.backend = backend
        self.signatures = [V.as_signature(t.signature_line()) for t in self.tasks]
        T = len(self.tasks)
        # The compiler tokens of each signature line, up to the body's INDENT. The lexer interns
        # the function name and the parameters first, so their ids are the vocabulary's slots.
        prefixes = []
        for t in self.tasks:
            toks = tokenize(t.signature_line() + "\n    pass\n")
            prefixes.append(toks[: int(np.flatnonzero(toks[:, 0] == oc.TOKEN_CODES["INDENT"])[0]) + 1])
        self.prefix_len = np.array([len(p) for p in prefixes], dtype=np.int64)
        self.prefix = np.zeros((T, self.prefix_len.max(), 4), dtype=np.int32)
        for i, p in enumerate(prefixes):
            self.prefix[i, : len(p)] = p
        self.kinds = np.full((T, V.NUM_PARAMS), -1, dtype=np.int32)
        self.ret_kind = np.zeros(T, dtype=np.int32)
        enc_inputs, enc_expected, shown_in, shown_out = [], [], [], []
        for i, task in enumerate(self.tasks):
            kinds = task.signature.kinds
            self.kinds[i, : len(kinds)] = [KIND_BY_NAME[k] for k in kinds]
            self.ret_kind[i] = KIND_BY_NAME[task.signature.ret]
            inputs, outputs = task.examples(seed, n_tests)
            enc_inputs.append(encode_tuples(inputs, kinds))
            enc_expected.append(encode_results(outputs, task.signature.ret))
            shown_in.append(_pad_rows(enc_inputs[-1], example_width)[:n_examples])
            shown_out.append(_pad_rows(enc_expected[-1], example_width)[:n_examples])
        self.inputs = Encoded.concat(enc_inputs)      # task t's tests are items t*M .. t*M + M - 1
        self.expected = Encoded.concat(enc_expected)
        self.examples = np.stack(shown_in)   # (T, E, W)
        self.outputs = np.stack(shown_out)   # (T, E, W_OUT)

    @classmethod
    def from_names(cls, names: Sequence[str] | None = None, **kw) -> "TaskBank":
        """A bank of built-in tasks (all of them by default)."""
        return cls([TASKS[n] for n in (names or sorted(TASKS))], **kw)

    def __len__(self):
        return len(self.tasks)

    def compiler_tokens(self, bodies: np.ndarray, lengths: np.ndarray, task_ids: np.ndarray):
        """Compiler token arrays of N bodies, vectorized (no Python loop per program): the
        signature's tokens, the body's, then NEWLINE if missing, the DEDENTs that close every
        open block and EOF. Lines are exact; columns count tokens (vocab.to_compiler_tokens
        gives the rendered source's exact columns, for messages). Returns ((R, 4) int32, (N+1,))."""
        n, L = bodies.shape
        pos = np.arange(L)[None, :]
        live = pos < lengths[:, None]
        a = np.where(live & (bodies >= 0) & (bodies < V.VOCAB_SIZE), bodies, V.END)
        live &= a != V.END  # anything out of range ends the body there
        body_len = np.where(live.all(axis=1), L, np.argmin(live, axis=1))
        live = pos < body_len[:, None]
        kind = np.where(live, _ACTION_TOKENS[a, 0], -1)
        is_nl = kind == oc.TOKEN_CODES["NEWLINE"]
        depth = 1 + (kind == oc.TOKEN_CODES["INDENT"]).sum(axis=1) - (kind == oc.TOKEN_CODES["DEDENT"]).sum(axis=1)
        last = kind[np.arange(n), np.maximum(body_len - 1, 0)]
        add_nl = (body_len > 0) & (last != oc.TOKEN_CODES["NEWLINE"])
        close = np.maximum(depth, 0)
        plen = self.prefix_len[task_ids]
        sizes = plen + body_len + add_nl + close + 1
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        out = np.zeros((int(offsets[-1]), 4), dtype=np.int32)
        # prefix
        pm = np.arange(self.prefix.shape[1])[None, :] < plen[:, None]
        out[(offsets[:-1, None] + np.arange(self.prefix.shape[1])[None, :])[pm]] = self.prefix[task_ids][pm]
        # body: line 2 + NEWLINEs before the token, column = position in the body + 1
        line = 2 + np.cumsum(is_nl, axis=1) - is_nl
        at = (offsets[:-1, None] + plen[:, None] + pos)[live]
        col = np.broadcast_to(pos + 1, live.shape)
        out[at] = np.stack([kind[live], _ACTION_TOKENS[a, 1][live], line[live], col[live]], axis=1)
        # closing: NEWLINE, DEDENTs, EOF on the line after the last
        end_line = 2 + is_nl.sum(axis=1) + add_nl
        base = offsets[:-1] + plen + body_len
        nl_rows = np.flatnonzero(add_nl)
        out[base[nl_rows]] = np.stack([np.full(len(nl_rows), oc.TOKEN_CODES["NEWLINE"]), np.zeros(len(nl_rows), int),
                                       end_line[nl_rows] - 1, body_len[nl_rows] + 1], axis=1)
        ded_row = np.repeat(np.arange(n), close)
        ded_k = np.arange(len(ded_row)) - np.repeat(np.cumsum(close) - close, close)
        out[base[ded_row] + add_nl[ded_row] + ded_k] = np.stack(
            [np.full(len(ded_row), oc.TOKEN_CODES["DEDENT"]), np.zeros(len(ded_row), int), end_line[ded_row],
             np.ones(len(ded_row), int)], axis=1)
        out[offsets[1:] - 1] = np.stack([np.full(n, oc.TOKEN_CODES["EOF"]), np.zeros(n, int), end_line, np.ones(n, int)], axis=1)
        return out, offsets

    def score(self, bodies: np.ndarray, task_ids: np.ndarray, lengths: np.ndarray | None = None) -> Scores:
        """Compile and run N candidate bodies on their tasks' tests in one batch.

        bodies: (N, L) action ids (a body ends at its first END or at L); task_ids: (N,)."""
        bodies = np.asarray(bodies)
        task_ids = np.asarray(task_ids, dtype=np.int64)
        n, L = bodies.shape
        if lengths is None:
            is_end = bodies == V.END
            lengths = np.where(is_end.any(axis=1), is_end.argmax(axis=1), L)
        tokens, offsets = self.compiler_tokens(bodies, lengths, task_ids)
        compiled = compile_tokens(tokens, offsets)
        ok = compiled.ok
        programs = compiled.to_programs(entry=0, ret_kind=self.ret_kind[task_ids])
        m = self.n_tests
        run_prog = np.repeat(np.arange(n, dtype=np.int32), m)
        run_in = (task_ids[:, None] * m + np.arange(m)[None, :]).ravel().astype(np.int32)
        res = run_batch(programs, self.inputs, (run_prog, run_in), expected=self.expected, config=self.config,
                        out_cap=0, backend=self.backend)
        passed = res.passed.reshape(n, m) & ok[:, None]
        steps = np.where(ok, res.steps.reshape(n, m).mean(axis=1), 0.0)
        pass_frac = passed.mean(axis=1)
        return Scores(ok, pass_frac, passed.all(axis=1), steps, np.asarray(lengths))

