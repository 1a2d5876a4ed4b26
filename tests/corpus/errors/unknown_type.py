def f(a: str) -> int:
    return 0
# error: 1:10 expected a type
