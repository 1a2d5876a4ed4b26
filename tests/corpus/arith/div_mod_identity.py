# (a // b) * b + a % b == a for every sign combination.
def check(a: int, b: int) -> bool:
    return (a // b) * b + a % b == a

def count() -> int:
    n = 0
    for a in range(-20, 21):
        for b in range(-7, 8):
            if b != 0 and check(a, b):
                n += 1
    return n

# call: count() -> 574
# call: check(-2147483640, 10) -> True
# call: check(-2147483647, 10) -> trap overflow
