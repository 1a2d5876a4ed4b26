# The only int32 division that overflows: the minimum divided by -1.
def div(a: int, b: int) -> int:
    return a // b

def aug(b: int) -> int:
    x = -2147483647 - 1
    x //= b
    return x

# call: div(-2147483648, -1) -> trap overflow
# call: aug(-1) -> trap overflow
# call: aug(1) -> -2147483648
