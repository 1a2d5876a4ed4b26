def f(x: int) -> int:
    def g(y: int) -> int:
        return y
    return g(x)
# error: 2:5 nested functions are not supported
