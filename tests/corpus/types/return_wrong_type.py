def f(x: int) -> bool:
    return x + 1
# error: 2:12 type mismatch
