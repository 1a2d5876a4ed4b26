def f(x: int) -> int:
    return x $ 1
# error: 2:14 unexpected character
