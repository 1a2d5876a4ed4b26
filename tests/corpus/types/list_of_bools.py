def f() -> list[int]:
    return [1, True]
# error: 2:16 type mismatch
