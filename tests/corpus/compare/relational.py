def lt(a: int, b: int) -> bool:
    return a < b

def le(a: int, b: int) -> bool:
    return a <= b

def gt(a: int, b: int) -> bool:
    return a > b

def ge(a: int, b: int) -> bool:
    return a >= b

# call: lt(1, 2) -> True
# call: lt(2, 2) -> False
# call: lt(-2147483648, 2147483647) -> True
# call: le(2, 2) -> True
# call: le(3, 2) -> False
# call: gt(-1, -2) -> True
# call: gt(-2, -1) -> False
# call: ge(-5, -5) -> True
# call: ge(2147483647, -2147483648) -> True
