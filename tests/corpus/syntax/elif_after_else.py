def f(x: int) -> int:
    if x:
        return 1
    else:
        return 2
    elif x > 1:
        return 3
# error: 6:5 invalid syntax
