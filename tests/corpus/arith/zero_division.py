def div(a: int, b: int) -> int:
    return a // b

def mod(a: int, b: int) -> int:
    return a % b

def aug_div(a: int) -> int:
    x = 10
    x //= a
    return x

def aug_mod(a: int) -> int:
    x = 10
    x %= a
    return x

# call: div(1, 0) -> trap zero_division
# call: div(0, 0) -> trap zero_division
# call: mod(-5, 0) -> trap zero_division
# call: aug_div(0) -> trap zero_division
# call: aug_mod(0) -> trap zero_division
# call: aug_mod(3) -> 1
