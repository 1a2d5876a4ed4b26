def f(x: int) -> int:
    return x +
    y = 'abc
# error: 3:9 unterminated string literal
