def f(c: bool) -> int:
    return 1 if c else [1]
# error: 2:24 type mismatch
