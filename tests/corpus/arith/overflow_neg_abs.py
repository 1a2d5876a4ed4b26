def neg(a: int) -> int:
    return -a

def absolute(a: int) -> int:
    return abs(a)

def neg_min() -> int:
    return -(-2147483647 - 1)

# call: neg(-2147483648) -> trap overflow
# call: absolute(-2147483648) -> trap overflow
# call: neg_min() -> trap overflow
# call: neg(2147483647) -> -2147483647
