def g(xs: list[int]) -> int:
    return len(xs)

def f() -> int:
    return g(5)
# error: 5:14 type mismatch
