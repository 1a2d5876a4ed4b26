def f(a) -> int:
    return 0
# error: 1:8 expected
