def sub(a: int, b: int) -> int:
    return a - b

def aug(a: int) -> int:
    x = -2147483600
    x -= a
    return x

# call: sub(-2147483648, 1) -> trap overflow
# call: sub(2147483647, -1) -> trap overflow
# call: sub(0, -2147483648) -> trap overflow
# call: aug(49) -> trap overflow
# call: aug(48) -> -2147483648
