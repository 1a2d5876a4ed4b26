def f() -> int:
    x: int = False
    return x
# error: 2:14 type mismatch
