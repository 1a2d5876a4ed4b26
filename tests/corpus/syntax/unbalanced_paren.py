def f(x: int) -> int:
    return (x + 1
# error: 4:1 expected
