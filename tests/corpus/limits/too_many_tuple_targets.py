def f() -> int:
    a, b, c, d, e, f, g, h, i = 1, 2, 3, 4, 5, 6, 7, 8, 9
    return a
# error: 2:5 too many elements
