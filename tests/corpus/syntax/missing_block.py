def f(x: int) -> int:
    if x:
    return 0
# error: 3:5 expected an indented block
