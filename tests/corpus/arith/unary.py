def neg(a: int) -> int:
    return -a

def plus(a: int) -> int:
    return +a

def stacked(a: int) -> int:
    return - -a + -+-a

# call: neg(5) -> -5
# call: neg(-2147483647) -> 2147483647
# call: neg(0) -> 0
# call: plus(-3) -> -3
# call: stacked(4) -> 8
