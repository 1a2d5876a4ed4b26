def g(a: int) -> int:
    return a

def f() -> int:
    return g(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
# error: 5:68 too many parameters or arguments
