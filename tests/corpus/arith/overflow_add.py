def add(a: int, b: int) -> int:
    return a + b

def aug(a: int) -> int:
    x = 2147483600
    x += a
    return x

# call: add(2147483647, 1) -> trap overflow
# call: add(-2147483648, -1) -> trap overflow
# call: add(2147483647, 2147483647) -> trap overflow
# call: aug(48) -> trap overflow
# call: aug(47) -> 2147483647
