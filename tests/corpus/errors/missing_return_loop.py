def f(xs: list[int]) -> int:
    for x in xs:
        return x
# error: 1:5 function may end without returning a value
