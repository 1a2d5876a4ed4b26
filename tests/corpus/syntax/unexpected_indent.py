def f(x: int) -> int:
    y = x
        return y
# error: 3:8 unexpected indent
