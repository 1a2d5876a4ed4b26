def f(x: int) -> int:
    return x + \
        1
# error: 2:16 unexpected character
