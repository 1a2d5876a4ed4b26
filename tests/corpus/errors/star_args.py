def f(*a: int) -> int:
    return 0
# error: 1:7 expected
