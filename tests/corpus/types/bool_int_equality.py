def f(b: bool) -> bool:
    return b == 1
# error: 2:17 type mismatch
