def aug(a: int) -> int:
    x = a
    x += 10
    x -= 3
    x *= -2
    x //= 4
    x %= 5
    return x

# call: aug(0) -> 1
# call: aug(5) -> 4
# call: aug(-100) -> 1
