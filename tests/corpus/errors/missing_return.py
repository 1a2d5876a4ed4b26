def f(x: int) -> int:
    if x > 0:
        return 1
# error: 1:5 function may end without returning a value
