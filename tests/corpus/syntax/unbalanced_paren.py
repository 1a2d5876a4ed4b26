def f(x: int) -> int:
    return (x + 1
# error: 2:12 was never closed
