def mul(a: int, b: int) -> int:
    return a * b

def aug(a: int) -> int:
    x = 65536
    x *= a
    return x

# call: mul(65536, 65536) -> trap overflow
# call: mul(46341, 46341) -> trap overflow
# call: mul(-2147483648, -1) -> trap overflow
# call: mul(-1, -2147483648) -> trap overflow
# call: mul(1073741824, 2) -> trap overflow
# call: mul(-1073741824, 2) -> -2147483648
# call: aug(32768) -> trap overflow
# call: aug(-32768) -> -2147483648
