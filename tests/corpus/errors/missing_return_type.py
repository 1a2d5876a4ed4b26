def f(a: int):
    return a
# error: 1:14 expected
