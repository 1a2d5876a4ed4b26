def f(a: int) -> int:
    return a + b
# error: 2:16 undefined name
