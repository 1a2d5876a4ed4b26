def p1() -> int:
    return 2 + 3 * 4

def p2() -> int:
    return (2 + 3) * 4

def p3() -> int:
    return -7 // 2

def p4() -> int:
    return -(7 // 2)

def p5() -> int:
    return 20 - 6 - 4

def p6() -> int:
    return 100 // 10 // 3

def p7() -> int:
    return 7 - 10 % 4 * 2

def p8() -> int:
    return -2 * -3 + 1

# call: p1() -> 14
# call: p2() -> 20
# call: p3() -> -4
# call: p4() -> -3
# call: p5() -> 10
# call: p6() -> 3
# call: p7() -> 3
# call: p8() -> 7
